"""A candidate is not promoted for saving tokens while it spends more of them in total.

The token dimension's e-process is about the typical relative saving per task: a harness
that is much cheaper on most tasks and far costlier on a few passes it while spending more
in total. This one strips the tool schemas' descriptions on nine tasks in ten (about half
the prompt) and sends a long preamble on the tenth (eight times the parent's tokens): about
1.3x the parent's tokens overall, under the token cap, at the parent's accuracy. Through the
real pipeline and sandbox on a scripted model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.lineage import Lineage
from tests.improve.pipeline_world import (
    SEED,
    STRIP_DESCRIPTIONS,
    gate,
    policy,
    solver,
    submit,
    tools_patch,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, DEV, HELDOUT = "bfcl:simple", 4, 80

BUDGETED = """def budgeted(task, state):
    if hashlib.sha256(json.dumps(task["prompt"]).encode()).digest()[0] < 26:
        state.messages.insert(0, {"role": "system", "content": "Think about the tools. " * 300})
        return task["tools"]
    return strip_descriptions(task["tools"])
"""
LEAN_AND_BLOATED = tools_patch(
    "lean tool schemas on most tasks, a long preamble on a few.",
    STRIP_DESCRIPTIONS + "\n\n" + BUDGETED,
    "budgeted(task, state)",
    imports="import hashlib\n",
)


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_cheaper_on_most_tasks_but_costlier_in_total_is_not_promoted(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    # The public tasks' copies only: what stripping their long descriptions saves is what
    # the figures above were measured on (generated tasks' schemas are short).
    model.write_text(solver(asset_cache, SPEC, DEV, HELDOUT, generated_share=0.0))
    # A wide margin, so that non-inferiority at equal accuracy is reached within 80 tasks.
    extra = "[acceptance]\nmargin = 0.1\n"
    async with runtime_factory(policy(model, SPEC, DEV, HELDOUT, extra, generated_share=0.0)) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, LEAN_AND_BLOATED)
        assert sub.accepted_for_evaluation, sub.reason
        assert verdict.decision == "reject", verdict
        assert lineage.current().name == "v0001"
        tokens = gate(verdict, "tokens")
        assert not tokens.passed and tokens.measured > 1.0, tokens
        assert tokens.threshold == 1.0 and "not fewer tokens in total" in tokens.note, tokens
        assert gate(verdict, "accuracy").passed and gate(verdict, "improvement").passed
