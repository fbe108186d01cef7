"""Every program the lineage has already seen, so that no patch is evaluated twice.

A program is a harness tree up to comments and layout (:mod:`daemon.patches.identity`).
The versions' trees and every recorded candidate's tree (its parent plus its patch) are
fingerprinted once per process and kept: versions and recorded patches never change. A new
candidate whose program is its parent's changes nothing; one whose program is a version's
or an earlier candidate's (rejected, or queued or under evaluation) was tried, and is
rejected at the static stage without running.
"""

from __future__ import annotations

import logging
from pathlib import Path

from daemon.errors import HarnessdError
from daemon.improve.intake import Refusal
from daemon.lineage import Candidate, CandidateState, Lineage, Version
from daemon.patches.identity import patched_fingerprint, tree_fingerprint
from daemon.patches.tree import read_tree

log = logging.getLogger("harnessd.tried")

# The states of a candidate whose program is not evaluated again (one interrupted by a
# stop has no verdict: it may come again).
ON_ITS_WAY_OR_REJECTED = frozenset(
    {
        CandidateState.REJECTED,
        CandidateState.PROPOSED,
        CandidateState.EVALUATING,
        CandidateState.AWAITING_REVIEW,
    }
)


class TriedPrograms:
    """Fingerprints of the lineage's versions and candidates; call :meth:`refresh` (blocking:
    it reads trees) before :meth:`refusal` to take in what was recorded since."""

    def __init__(self, lineage: Lineage) -> None:
        self._lineage = lineage
        self._versions: dict[int, str] = {}
        self._version_of: dict[str, Version] = {}
        self._candidates: dict[int, str | None] = {}  # None: no tree (rejected unapplied)
        self._candidates_of: dict[str, list[int]] = {}
        self._trees: dict[int, dict[str, bytes]] = {}

    def _version_tree(self, version_id: int) -> dict[str, bytes]:
        tree = self._trees.get(version_id)
        if tree is None:
            tree = self._trees[version_id] = read_tree(
                self._lineage.path(self._lineage.get(version_id))
            )
        return tree

    def refresh(self) -> None:
        for version in self._lineage.versions():
            if version.id not in self._versions:
                fp = self._versions[version.id] = tree_fingerprint(self._lineage.path(version))
                self._version_of.setdefault(fp, version)
        for cand in reversed(self._lineage.candidates()):
            if cand.id not in self._candidates:
                found = self._candidates[cand.id] = self._candidate_fingerprint(cand)
                if found is not None:
                    self._candidates_of.setdefault(found, []).append(cand.id)

    def _candidate_fingerprint(self, cand: Candidate) -> str | None:
        if not cand.patch:
            return None
        try:
            return patched_fingerprint(self._version_tree(cand.parent_version_id), cand.patch)
        except (HarnessdError, ValueError) as exc:
            log.warning("candidate c%d: its patch no longer applies (%s)", cand.id, exc)
            return None

    def refusal(self, parent: Version, fp: str) -> Refusal | None:
        """Why the program ``fp`` proposed on ``parent`` is not evaluated, or None: it is the
        parent's own, an accepted version's, or an earlier candidate's that was rejected or
        is on its way (queued or under evaluation). One interrupted by a stop has no verdict:
        it may come again."""
        if fp == self._versions.get(parent.id):
            return Refusal("changes only comments or layout: the program is its parent's")
        version = self._version_of.get(fp)
        if version is not None:
            return Refusal(f"the same program as {version.name}; not evaluated again")
        for cid in self._candidates_of.get(fp, []):
            if self._lineage.candidate(cid).state in ON_ITS_WAY_OR_REJECTED:
                return Refusal(f"duplicate of c{cid}; not evaluated again", duplicate_of=cid)
        return None

    def screen(self, parent: Version, tree: Path) -> Refusal | None:
        """:meth:`refusal` for the candidate tree ``tree`` of ``parent``."""
        return self.refusal(parent, tree_fingerprint(tree))
