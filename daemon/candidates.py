"""From proposal text to a recorded candidate: parse, apply, static stage (pipeline stage 1).

Proposer replies and external patch files take exactly this path. Whatever happens, the
candidate is recorded: an unparseable reply is a rejected candidate with its raw text kept,
a patch that fails the static stage is rejected with the reason, and only a patch that
passes goes on, with its normalised git diff as the lineage's record of it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from daemon.gates import Verdict
from daemon.lineage import Lineage, Version
from daemon.patches import (
    AppliedPatch,
    ParseFailure,
    PatchRejected,
    apply_proposal,
    parse_proposal,
    static_check,
)
from daemon.policy import PatchPolicy

RATIONALE_LIMIT = 2000


@dataclass(frozen=True)
class Submitted:
    candidate_id: int
    accepted_for_evaluation: bool
    reason: str  # why it was rejected at stage 1, or "" when it goes on
    git_diff: str


def check_text(
    text: str, base: Path, policy: PatchPolicy, scratch: Path
) -> AppliedPatch | PatchRejected | ParseFailure:
    """Parse and apply ``text`` onto ``base`` in a throw-away tree; nothing is recorded."""
    parsed = parse_proposal(text)
    if isinstance(parsed, ParseFailure):
        return parsed
    scratch.mkdir(parents=True, exist_ok=True)
    dest = Path(tempfile.mkdtemp(prefix="check-", dir=scratch))
    try:
        applied = apply_proposal(base, parsed, dest / "tree")
        static_check(applied, policy)
        return applied
    except PatchRejected as exc:
        return exc
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def record(
    lineage: Lineage,
    parent: Version,
    text: str,
    *,
    source: str,
    proposer_model: str | None,
    policy: PatchPolicy,
    scratch: Path,
    rationale: str = "",
) -> Submitted:
    """Record ``text`` as a candidate of ``parent``; stage 1 decides if it goes on."""
    parsed = parse_proposal(text)
    if isinstance(parsed, ParseFailure):
        why = (rationale or parsed.rationale)[:RATIONALE_LIMIT]
        cid = lineage.add_unparseable(parent, source, proposer_model, parsed, why)
        return Submitted(cid, False, f"unparseable: {parsed.reason}", "")
    why = (rationale or parsed.rationale)[:RATIONALE_LIMIT]
    result = check_text(text, lineage.path(parent), policy, scratch)
    if isinstance(result, PatchRejected | ParseFailure):
        reason = result.reason
        verdict = Verdict(decision="reject", stage="static", reason=reason)
        cid = lineage.add_candidate(
            parent, source, proposer_model, why, "", text,
            state="rejected", stage="static", verdict=verdict.model_dump(),
        )  # fmt: skip
        return Submitted(cid, False, reason, "")
    cid = lineage.add_candidate(parent, source, proposer_model, why, result.git_diff, text)
    return Submitted(cid, True, "", result.git_diff)
