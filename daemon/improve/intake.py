"""From proposal text to a recorded candidate in one pass: parse, apply, static stage.

Proposer replies and external patch files take exactly this path. The text is parsed once
and applied once, into the candidate's own work tree (``work/c<id>/tree``), which the
pipeline then evaluates and the lineage promotes; the normalised git diff is the lineage's
record of it. Whatever happens, the candidate is recorded: an unparseable reply is a
rejected candidate with its raw text kept, a patch that fails the static stage is rejected
with the reason, a duplicate of a program tried before is rejected without being evaluated
again, and only a patch that passes goes on.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from daemon.config.policy import PatchPolicy
from daemon.lineage import CandidateSource, CandidateState, Lineage, NewCandidate, Version
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
from daemon.patches.merge import MergeConflict, merge_trees
from daemon.patches.tree import diff_trees, read_tree, render_git_diff
from daemon.verdict import Stage, Verdict

RATIONALE_LIMIT = 2000
TREE = "tree"


@dataclass(frozen=True)
class Submitted:
    candidate_id: int
    accepted_for_evaluation: bool
    reason: str  # why it was rejected at stage 1, or "" when it goes on
    git_diff: str
    tree: Path | None = None  # the candidate's applied tree, when it goes on


@dataclass(frozen=True)
class Base:
    """The tree a proposal was written against when that is not the parent version's: an
    earlier candidate of the parent (``candidate_id``), materialised at ``tree``."""

    candidate_id: int
    tree: Path


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


def check_proposal(
    proposal: Proposal, base: Path, policy: PatchPolicy, dest: Path
) -> PatchRejected | None:
    """Why the static stage would stop ``proposal`` applied to ``base`` (None: it passes);
    ``dest`` is a throw-away folder the caller removes."""
    checked = _apply_checked(proposal, base, policy, dest)
    return checked if isinstance(checked, PatchRejected) else None


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


@dataclass(frozen=True)
class Refusal:
    """Why a candidate's applied tree is not worth evaluating: ``reason`` for people, and
    ``duplicate_of``, the earlier candidate whose program it repeats (None: not that)."""

    reason: str
    duplicate_of: int | None = None


# Given a candidate's applied tree, why it is not worth evaluating (a duplicate of something
# tried before, no change to the program), or None when it should go on.
Screen = Callable[[Path], Refusal | None]


def record(
    lineage: Lineage,
    parent: Version,
    text: str,
    *,
    source: CandidateSource,
    proposer_model: str | None,
    policy: PatchPolicy,
    work_dir: Path,
    rationale: str = "",
    screen: Screen | None = None,
) -> Submitted:
    """Record ``text`` as a candidate of ``parent``; stage 1 decides if it goes on.

    On success the applied tree is kept at ``candidate_dir(work_dir, id)/tree``.
    """
    return record_parsed(
        lineage,
        parent,
        parse_proposal(text),
        text,
        source=source,
        proposer_model=proposer_model,
        policy=policy,
        work_dir=work_dir,
        rationale=rationale,
        screen=screen,
    )


def record_parsed(
    lineage: Lineage,
    parent: Version,
    parsed: Proposal | ParseFailure | PatchRejected,
    raw: str,
    *,
    source: CandidateSource,
    proposer_model: str | None,
    policy: PatchPolicy,
    work_dir: Path,
    rationale: str = "",
    screen: Screen | None = None,
    base: Base | None = None,
) -> Submitted:
    """:func:`record` for a proposal parsed already (the edit-operation protocol makes one
    from its JSON; ``PatchRejected``: an operation that could not be carried out). ``raw``
    is kept as what the proposer wrote.

    With ``base``, the proposal applies to that candidate's tree; the static stage checks
    the proposal's own edit, and the recorded patch is the whole change from ``parent``
    (the version the held-out test compares against, and the one promotion checks)."""
    new = NewCandidate(
        parent_id=parent.id,
        source=source,
        proposer_model=proposer_model,
        rationale=rationale[:RATIONALE_LIMIT],
        patch="",
        raw=raw,
        base_id=None if base is None else base.candidate_id,
    )
    if isinstance(parsed, ParseFailure):
        why = (rationale or parsed.rationale)[:RATIONALE_LIMIT]
        cid = lineage.add_unparseable(replace(new, rationale=why, raw=parsed.raw), parsed)
        return Submitted(cid, False, f"unparseable: {parsed.reason}", "")
    if isinstance(parsed, PatchRejected):
        return _rejected(lineage, new, parsed.reason)
    new = replace(new, rationale=(rationale or parsed.rationale)[:RATIONALE_LIMIT])
    work_dir.mkdir(parents=True, exist_ok=True)
    pending = work_dir / f"pending-{secrets.token_hex(6)}"
    try:
        start = lineage.path(parent) if base is None else base.tree
        result = _apply_checked(parsed, start, policy, pending / TREE)
        if isinstance(result, PatchRejected):
            return _rejected(lineage, new, result.reason)
        whole = (
            result.git_diff if base is None else diff_trees(lineage.path(parent), result.dest_dir)
        )
        new = replace(new, patch=whole)
        if not whole:
            return _rejected(
                lineage, new, f"undoes its base c{new.base_id}: no change to {parent.name}"
            )
        if base is not None:
            # What would be promoted is the whole change from the parent (a base's change
            # and this edit, or a merge of two candidates): the limits hold for it, not only
            # for the last edit.
            try:
                static_check(apply_git_diff(lineage.path(parent), whole, pending / "whole"), policy)
            except PatchRejected as exc:
                return _rejected(
                    lineage, new, f"as a whole change from {parent.name}: {exc.reason}"
                )
        refused = screen(result.dest_dir) if screen is not None else None
        if refused is not None:
            new = replace(new, duplicate_of=refused.duplicate_of)
            return _rejected(lineage, new, refused.reason)
        cid = lineage.add_candidate(new)
        final = candidate_dir(work_dir, cid)
        shutil.rmtree(final, ignore_errors=True)  # ids only grow: a leftover of a crash
        pending.rename(final)
        return Submitted(cid, True, "", whole, final / TREE)
    finally:
        shutil.rmtree(pending, ignore_errors=True)


def _rejected(lineage: Lineage, new: NewCandidate, reason: str) -> Submitted:
    verdict = Verdict(decision="reject", stage=Stage.STATIC, reason=reason)
    cid = lineage.add_candidate(
        new, state=CandidateState.REJECTED, stage=Stage.STATIC, verdict=verdict
    )
    return Submitted(cid, False, reason, new.patch)


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


def materialise_base(lineage: Lineage, candidate_id: int, scratch: Path) -> Path:
    """A candidate's tree (its parent version plus its recorded patch) in a fresh folder
    under ``scratch``, for a proposal to build on; the caller removes ``scratch``."""
    cand = lineage.candidate(candidate_id)
    parent = lineage.get(cand.parent_version_id)
    dest = scratch / f"base-c{candidate_id}-{secrets.token_hex(4)}" / TREE
    return apply_git_diff(lineage.path(parent), cand.patch, dest).dest_dir


def merge_candidates(
    lineage: Lineage, parent: Version, first: int, second: int, scratch: Path
) -> tuple[Path, str] | MergeConflict:
    """Both candidates' changes to ``parent`` in one tree: ``first``'s tree (under
    ``scratch``) and the diff that puts ``second``'s change on it, for :func:`record_parsed`
    with ``Base(first, tree)``; a :class:`MergeConflict` when the two changed the same lines."""
    first_tree = materialise_base(lineage, first, scratch)
    first_files = read_tree(first_tree)
    merged = merge_trees(
        read_tree(lineage.path(parent)),
        first_files,
        read_tree(materialise_base(lineage, second, scratch)),
    )
    if isinstance(merged, MergeConflict):
        return merged
    return first_tree, render_git_diff(first_files, merged)
