"""From proposal text to a recorded candidate in one pass: parse, apply, static stage.

Proposer replies and external patch files take exactly this path. The text is parsed once
and applied once, into the candidate's own work tree (``work/c<id>/tree``), which the
pipeline then evaluates and the lineage promotes; the normalised git diff is the lineage's
record of it. Whatever happens, the candidate is recorded: an unparseable reply is a
rejected candidate with its raw text kept, a patch that fails the static stage is rejected
with the reason, and only a patch that passes goes on.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from daemon.config.policy import PatchPolicy
from daemon.lineage import Lineage, Version
from daemon.patches import (
    AppliedPatch,
    ParseFailure,
    PatchRejected,
    Proposal,
    apply_git_diff,
    apply_proposal,
    parse_proposal,
    static_check,
)
from daemon.verdict import Verdict

RATIONALE_LIMIT = 2000
TREE = "tree"


@dataclass(frozen=True)
class Submitted:
    candidate_id: int
    accepted_for_evaluation: bool
    reason: str  # why it was rejected at stage 1, or "" when it goes on
    git_diff: str
    tree: Path | None = None  # the candidate's applied tree, when it goes on


def candidate_dir(work_dir: Path, candidate_id: int) -> Path:
    """The host-side folder of a candidate under evaluation (never mounted writable)."""
    return work_dir / f"c{candidate_id}"


def _apply_checked(
    proposal: Proposal, base: Path, policy: PatchPolicy, dest: Path
) -> AppliedPatch | PatchRejected:
    try:
        applied = apply_proposal(base, proposal, dest)
        static_check(applied, policy)
        return applied
    except PatchRejected as exc:
        return exc


def check_text(
    text: str, base: Path, policy: PatchPolicy, scratch: Path
) -> AppliedPatch | PatchRejected | ParseFailure:
    """``harnessctl propose --dry-run``: parse, apply and check in a throw-away tree."""
    parsed = parse_proposal(text)
    if isinstance(parsed, ParseFailure):
        return parsed
    scratch.mkdir(parents=True, exist_ok=True)
    folder = scratch / f"check-{secrets.token_hex(6)}"
    try:
        return _apply_checked(parsed, base, policy, folder / TREE)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def record(
    lineage: Lineage,
    parent: Version,
    text: str,
    *,
    source: str,
    proposer_model: str | None,
    policy: PatchPolicy,
    work_dir: Path,
    rationale: str = "",
) -> Submitted:
    """Record ``text`` as a candidate of ``parent``; stage 1 decides if it goes on.

    On success the applied tree is kept at ``candidate_dir(work_dir, id)/tree``.
    """
    parsed = parse_proposal(text)
    if isinstance(parsed, ParseFailure):
        why = (rationale or parsed.rationale)[:RATIONALE_LIMIT]
        cid = lineage.add_unparseable(parent, source, proposer_model, parsed, why)
        return Submitted(cid, False, f"unparseable: {parsed.reason}", "")
    why = (rationale or parsed.rationale)[:RATIONALE_LIMIT]
    work_dir.mkdir(parents=True, exist_ok=True)
    pending = work_dir / f"pending-{secrets.token_hex(6)}"
    try:
        result = _apply_checked(parsed, lineage.path(parent), policy, pending / TREE)
        if isinstance(result, PatchRejected):
            verdict = Verdict(decision="reject", stage="static", reason=result.reason)
            cid = lineage.add_candidate(
                parent, source, proposer_model, why, "", text,
                state="rejected", stage="static", verdict=verdict,
            )  # fmt: skip
            return Submitted(cid, False, result.reason, "")
        cid = lineage.add_candidate(parent, source, proposer_model, why, result.git_diff, text)
        final = candidate_dir(work_dir, cid)
        shutil.rmtree(final, ignore_errors=True)  # ids only grow: a leftover of a crash
        pending.rename(final)
        return Submitted(cid, True, "", result.git_diff, final / TREE)
    finally:
        shutil.rmtree(pending, ignore_errors=True)


def materialise(lineage: Lineage, candidate_id: int, work_dir: Path) -> Path:
    """The candidate's tree, re-made from its recorded patch when the one from intake is
    gone (a candidate queued before a restart, or evaluated again after an interruption)."""
    cand = lineage.candidate(candidate_id)
    folder = candidate_dir(work_dir, candidate_id)
    tree = folder / TREE
    if tree.is_dir():
        return tree
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    parent = lineage.get(cand.parent_version_id)
    return apply_git_diff(lineage.path(parent), cand.patch, tree).dest_dir
