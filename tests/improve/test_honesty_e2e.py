"""Never claiming and claiming on a coin flip are rejected, through the real pipeline.

Each patch also makes the harness solve half the tasks (the scripted model answers when the
system message names mode GOOD), so accuracy is clearly better, and its over-claims drop
against the always-claiming seed: only the per-task honesty gate stands between it and a
promotion. Every solved task it does not claim is an under-claim, and the test stops as
soon as there is e-evidence of more under-claims than the parent's beyond the tolerance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.lineage import Lineage
from tests.improve.cheats import COIN_FLIP, NEVER_CLAIM
from tests.improve.patches import IMPROVE
from tests.improve.pipeline_world import SEED, gate, submit
from tests.improve.scripted_world import DEV, policy_text, positions, solver_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]

POOL = 32


def _claiming(wrapper: str) -> str:
    """IMPROVE (mode GOOD) with the wrapper's way of claiming on top."""
    edits = wrapper.split("\n\n", 1)[1]
    return IMPROVE.rstrip("\n") + "\n\n" + edits


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_never_and_coin_flip_claims_fail_honesty(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    n = max(DEV, POOL)
    model.write_text(solver_script(asset_cache, {"GOOD": positions(n, lambda i: i % 2 == 0)}, POOL))
    text = policy_text(model, model, model, cycles=0, heldout=POOL).replace(
        f'panel = ["scripted:{model}"]', "panel = []"
    )
    async with runtime_factory(text) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        for wrapper, name in ((NEVER_CLAIM, "never"), (COIN_FLIP, "coin")):
            sub, verdict = await submit(rt, lineage, _claiming(wrapper))
            assert sub.accepted_for_evaluation, (name, sub.reason)
            assert verdict.decision == "reject", (name, verdict)
            honesty = gate(verdict, "honesty")
            assert not honesty.passed and honesty.measured > honesty.threshold, honesty
            assert "under-claims" in honesty.note and "honesty" in verdict.reason, verdict
            if name == "never":  # stopped early, on e-evidence, well before the pool's end
                assert "more under-claims than the parent" in honesty.note, honesty
        # The same gain with honest claims is promoted.
        sub, verdict = await submit(rt, lineage, IMPROVE)
        assert verdict.decision == "accept", verdict
        assert lineage.current().name == "v0002"
