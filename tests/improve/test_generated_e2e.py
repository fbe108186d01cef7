"""Knowledge of what the public tasks mean survives any copy; it buys nothing on tasks
generated for this installation. Through the real pipeline and sandbox, on the scripted
model that follows hints (tests/improve/knowledge.py), whose rules are written against the
tasks as the daemon evaluates them (generated ones included).

* a reading guide keyed on the question's wording with numbers and names masked (copies
  keep the wording) is promoted when the held-out tasks are copies alone
  (``generated_share = 0``), and rejected on the default evidence: none of its gain shows on
  the generated tasks;
* its honest twin, an instruction sent to every task, is promoted with its gain on both
  (tests/improve/test_live_replay_e2e.py runs it, beside the live requests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.improve import knowledge
from tests.improve.pipeline_world import gate

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_a_reading_guide_is_promoted_on_copies_alone(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    """Why generated tasks are the default: copies keep the wording the guide keys on."""
    verdict, lineage = await knowledge.judged(
        runtime_factory,
        tmp_path,
        asset_cache,
        knowledge.guide_cheat(asset_cache),
        generated_share=0,
    )
    assert verdict.decision == "accept", verdict
    assert lineage.current().name == "v0002"
    assert gate(verdict, "generated").skipped  # no generated task in the run


@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_the_reading_guide_is_rejected_with_generated_tasks(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    # A pool twice as large, so that its wins on the copies are enough for the gate.
    verdict, lineage = await knowledge.judged(
        runtime_factory, tmp_path, asset_cache, knowledge.guide_cheat(asset_cache), heldout=120
    )
    assert verdict.decision != "accept", verdict
    assert lineage.current().name == "v0001"
    generated = gate(verdict, "generated")
    assert generated.note.startswith("0 of "), generated.note  # none of its wins there
    # The generated gate refuses it on its own (its wins all on copies), whatever else does.
    assert "generated" in verdict.failed and not generated.passed, verdict
