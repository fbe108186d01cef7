"""patches: a proposal's text to a candidate tree and its normalised diff, and the static stage.

Owns: the patch model (``model``), parsing proposals (``parse``: search/replace blocks and
unified diffs), unified-diff reading (``diff``), applying edits in memory (``apply``),
harness trees and rendering git diffs (``tree``), three-way merges of two trees (``merge``),
and the static stage (``static``).
Everything here is pure computation on files; harness code is compiled, never run.

May import: ``daemon.errors``, ``daemon.config.policy`` (the patch limits), ``daemon.pyast``
(parsing) and ``sandbox.guest.harnessd_statements`` (which statements are compound, as the
guest's statement numbering sees them) only.
"""

from daemon.patches.model import NoChange, ParseFailure, PatchRejected, Proposal
from daemon.patches.parse import parse_proposal
from daemon.patches.static import (
    ALLOWED_SUFFIXES,
    AppliedPatch,
    apply_git_diff,
    apply_proposal,
    check_path,
    static_check,
)

__all__ = [
    "ALLOWED_SUFFIXES",
    "AppliedPatch",
    "NoChange",
    "ParseFailure",
    "PatchRejected",
    "Proposal",
    "apply_git_diff",
    "apply_proposal",
    "check_path",
    "parse_proposal",
    "static_check",
]
