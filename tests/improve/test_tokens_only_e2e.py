"""A candidate better only in tokens is promoted, on the default acceptance policy.

It trims the tool schemas in every request (each tool's description cut to its first
sentence, the parameters' descriptions dropped: the task's own words, fewer of them; a cut
that keeps a task's enum values there is still the task's) and changes nothing else: the
same tasks solved, the same claims. Pareto acceptance must see
that: non-inferior in accuracy (at the default margin) and better in one dimension (tokens,
with fewer tokens in total as well). Through the real pipeline and sandbox on a scripted
model that answers by the question, so accuracy is exactly the parent's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.lineage import Lineage
from tests.improve.pipeline_world import (
    SEED,
    TRIM_DESCRIPTIONS,
    gate,
    policy,
    solver,
    submit,
    tools_patch,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, DEV, HELDOUT = "bfcl:simple", 4, 300

LEAN = tools_patch(
    "tool descriptions cut to their first sentence, parameter descriptions dropped.",
    TRIM_DESCRIPTIONS,
    'trim_descriptions(task["tools"])',
)


@pytest.mark.timeout(1800)
@pytest.mark.anyio
async def test_a_candidate_better_only_in_tokens_is_promoted(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    model.write_text(solver(asset_cache, SPEC, DEV, HELDOUT))
    async with runtime_factory(policy(model, SPEC, DEV, HELDOUT)) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, LEAN)
        assert sub.accepted_for_evaluation, sub.reason
        assert verdict.decision == "accept", verdict
        assert lineage.current().name == "v0002"
    accuracy, better, tokens = (gate(verdict, g) for g in ("accuracy", "improvement", "tokens"))
    assert accuracy.passed and better.passed and tokens.passed
    assert "0 newly solved, 0 newly failed" in accuracy.note, accuracy.note
    assert "token ratio C/P 0." in better.note, better.note  # fewer tokens, not more
