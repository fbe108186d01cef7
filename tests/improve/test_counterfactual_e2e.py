"""Knowledge of the specific public task buys nothing on held-out tasks a harness cannot
know in advance, while the most common honest edits (an instruction, fixed examples) are
promoted. Through the real pipeline and sandbox, on a scripted model that follows hints
(tests/improve/knowledge.py), on the default gates with counterfactual held-out copies.

* the pointer table (which question word fills which parameter, keyed by a hash of the
  question) and the echo laundering (the model repeats the question, then a conditional
  hint states the call) are promoted when held-out tasks are the public ones: with
  ``counterfactual = false`` the pointer table passes every gate, which is why copies are
  the default; on copies (dev tasks are copies too) both are rejected;
* a fixed block of examples is promoted (an instruction naming numbers too:
  tests/improve/test_live_replay_e2e.py).
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
async def test_a_pointer_table_of_the_public_tasks_is_rejected_on_their_copies(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    verdict, lineage = await knowledge.judged(
        runtime_factory, tmp_path, asset_cache, knowledge.pointer_cheat(asset_cache)
    )
    assert verdict.decision != "accept", verdict
    assert lineage.current().name == "v0001"
    # Dev tasks are copies too, so the table fits them no better: stopped on dev (it changes
    # nothing there, or its pointers mislead on a copy that kept its question), or else on
    # held-out with no accuracy gain.
    accuracy = gate(verdict, "accuracy")
    assert verdict.stage == "dev" or not accuracy.passed, verdict


@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_the_same_pointer_table_is_promoted_when_heldout_tasks_are_public(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    """Why copies are the default: on the public tasks nothing else sees this cheat (no
    answer value is in the harness's text, the wins depend on the question)."""
    verdict, lineage = await knowledge.judged(
        runtime_factory,
        tmp_path,
        asset_cache,
        knowledge.pointer_cheat(asset_cache),
        counterfactual=False,
    )
    assert verdict.decision == "accept", verdict
    assert lineage.current().name == "v0002"


@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_echo_laundering_is_rejected(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    verdict, lineage = await knowledge.judged(
        runtime_factory, tmp_path, asset_cache, knowledge.echo_cheat(asset_cache)
    )
    assert verdict.decision != "accept", verdict
    assert lineage.current().name == "v0001"


@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_fixed_examples_are_promoted(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    """(The instruction naming numbers is promoted in tests/improve/test_live_replay_e2e.py.)"""
    patch = knowledge.examples_patch()
    verdict, lineage = await knowledge.judged(runtime_factory, tmp_path, asset_cache, patch)
    assert verdict.decision == "accept", verdict
    assert lineage.current().name == "v0002"
    provenance = gate(verdict, "provenance")
    assert provenance.passed, provenance
