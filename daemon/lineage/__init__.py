"""lineage: every candidate with its verdict, and the accepted versions it produced.

Owns: the ``versions`` and ``pointer`` tables (``versions``), the ``candidates`` table
(``candidates``, with each candidate's review when ``[gates.review]`` held it for a person:
``awaiting_review``, then approved or rejected, by whom and why), the version trees and
``current`` symlink on disk (``fs``), the git history (``git``), crash repair
(``reconcile``) and the :class:`Lineage` facade.

May import: patches (tree reading and diffs), store, verdict, errors. Nothing above.
"""

from daemon.lineage.lineage import Lineage
from daemon.lineage.records import (
    Candidate,
    CandidateSource,
    CandidateState,
    Decider,
    NewCandidate,
    PointerChange,
    PointerKind,
    Review,
    TreeEntry,
    Version,
)

__all__ = [
    "Candidate",
    "CandidateSource",
    "CandidateState",
    "Decider",
    "Lineage",
    "NewCandidate",
    "PointerChange",
    "PointerKind",
    "Review",
    "TreeEntry",
    "Version",
]
