"""The optional compute-matched gate through the real pipeline: a candidate that spends more
tokens than its parent is held against the parent's majority vote over k runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation import results
from daemon.lineage import Lineage
from tests.improve.patches import IMPROVE
from tests.improve.pipeline_world import SEED, gate, submit
from tests.improve.scripted_world import DEV, policy_text, positions, solver_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]

POOL = 24
COSTLY = (
    IMPROVE.rstrip("\n")
    + """

harness.py
<<<<<<< SEARCH
    run_loop(step, state)
=======
    run_loop(step, state)
    ctx.model.chat(state.messages[:2], tools=task["tools"])
    ctx.model.chat(state.messages[:2], tools=task["tools"])
>>>>>>> REPLACE
"""
)


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_more_tokens_must_beat_the_parents_vote_at_the_same_tokens(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    n = max(DEV, POOL)
    model.write_text(solver_script(asset_cache, {"GOOD": positions(n, lambda i: i % 2 == 0)}, POOL))
    text = (
        policy_text(model, model, model, cycles=0, heldout=POOL).replace(
            f'panel = ["scripted:{model}"]', "panel = []"
        )
        + "\n[gates.tokens]\nmax_token_ratio = 10.0\n[gates.compute_matched]\nenabled = true\n"
    )
    async with runtime_factory(text) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        seed = lineage.init_seed(SEED)
        _, verdict = await submit(rt, lineage, COSTLY)
        matched = gate(verdict, "compute_matched")
        assert matched.enabled and matched.passed, verdict
        assert matched.measured > matched.threshold == 0.0 and "k=" in matched.note, matched
        k = int(matched.note.split("k=")[1].split(";")[0])
        assert k >= 2  # three calls per task against one: the vote takes k parent runs
        runs = results.runs_of(rt.store, version_id=seed.id)
        assert sum(r.split == "matched" for r in runs) == k - 1
        assert verdict.decision == "accept", verdict
