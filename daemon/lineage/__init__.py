"""lineage: every candidate with its verdict, and the accepted versions it produced.

Owns: the ``versions`` and ``pointer`` tables (``versions``), the ``candidates`` table
(``candidates``), the version trees and ``current`` symlink on disk (``fs``), the git
history (``git``), crash repair (``reconcile``) and the :class:`Lineage` facade.

May import: patches (tree reading and diffs), store, verdict, errors. Nothing above.
"""

from daemon.lineage.lineage import Lineage
from daemon.lineage.records import (
    Candidate,
    CandidateSource,
    NewCandidate,
    PointerChange,
    TreeEntry,
    Version,
)

__all__ = [
    "Candidate",
    "CandidateSource",
    "Lineage",
    "NewCandidate",
    "PointerChange",
    "TreeEntry",
    "Version",
]
