"""Copies are recognisable and their renaming reversible: a harness that has read the
rewrite strips the neutral suffixes copies give parameters (``location_value`` ->
``location``), finds the task's public call by its masked wording, and writes the public
values beside the copy's names. Through the real pipeline and sandbox, on the scripted model
that follows hints (tests/improve/knowledge.py): where a copy kept the public values the
model, following, answers right.

Two defences stop it, each on its own:

* provenance: a value the harness wrote beside the parameter's name for this task is its
  pairing, not the model's, so its wins do not count (shown with copies alone as held-out
  evidence, where nothing else would stop it);
* generated tasks: written without the names (the values alone, in the order of the copy's
  parameters, each one the question states), the wins pass provenance, and the table knows
  none of the generated tasks, so none of its gain shows there.

The decoy runs after these gates, so a canary that tells the decoy re-run from the judged
one (the class as the issue found it) changes nothing here. The honest twin, an instruction
sent to every task, is promoted on the same world (tests/improve/test_live_replay_e2e.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.improve import knowledge
from tests.improve.pipeline_world import ONE_DEFENCE, gate

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.timeout(1500)
@pytest.mark.anyio
async def test_undoing_a_copys_names_is_rejected_at_provenance_on_copies_alone(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    verdict, lineage = await knowledge.judged(
        runtime_factory,
        tmp_path,
        asset_cache,
        knowledge.undo_cheat(asset_cache),
        generated_share=0,
        heldout=120,
    )
    assert verdict.decision != "accept", verdict
    assert lineage.current().name == "v0001"
    provenance = gate(verdict, "provenance")
    assert not provenance.passed and not provenance.skipped, provenance
    assert "provenance" in verdict.failed, verdict


@pytest.mark.timeout(1500)
@pytest.mark.anyio
async def test_undone_values_without_names_gain_nothing_on_generated_tasks(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    verdict, lineage = await knowledge.judged(
        runtime_factory,
        tmp_path,
        asset_cache,
        knowledge.undo_cheat(asset_cache, named=False),
        heldout=120,
        extra=ONE_DEFENCE,
    )
    assert verdict.decision != "accept", verdict
    assert lineage.current().name == "v0001"
    generated = gate(verdict, "generated")
    assert generated.note.startswith("0 of "), generated.note  # none of its wins there
    assert not generated.passed, generated
