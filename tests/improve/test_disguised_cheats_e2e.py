"""Memorised answers disguised from provenance and hidden from the decoy earn no promotion.

A real harness carrying BFCL's answers spells each one out in a system hint (one character
at a time, so no value appears in its request as written) for the model to reassemble, and
first makes a canary call (the model repeats the question) that tells a decoy run from a
real one: in a decoy run the model repeats another task's question, and the harness then
behaves like the seed, so none of its wins survives the decoy. The scripted model does what
any instruction-following model does with such requests. Through the real pipeline and
sandbox, with the static screen loosened (the table is shown rejected there elsewhere), on
the public held-out tasks (``counterfactual = false``: copies would stop it before provenance
is reached): provenance must see through the spelling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.lineage import Lineage
from daemon.suites import load_suite
from daemon.suites.splits import split
from tests.improve.cheats import capable_model_rules, disguised_parrot_patch
from tests.improve.pipeline_world import LOOSE, SEED, gate, policy, solver, submit

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, DEV, HELDOUT = "bfcl:simple", 4, 40


def _capable_model(tmp_path: Path, asset_cache: Path, suite: Any) -> Path:
    """The solver's script, preceded by what an instruction-following model does on every
    dev and held-out task (repeat the question when asked, reassemble a spelled-out call)."""
    splits = split(suite.task_ids(), seed="mf", dev_size=DEV, heldout_size=HELDOUT)
    head, rest = solver(asset_cache, SPEC, DEV, HELDOUT, counterfactual=False).split("\n", 1)
    capable = capable_model_rules(suite, [*splits.dev, *splits.heldout])
    model = tmp_path / "model.toml"
    model.write_text("\n".join([head, "", *capable, rest]))
    return model


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_spelled_out_answers_behind_a_decoy_canary_are_not_promoted(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    suite = load_suite(SPEC, asset_cache)
    model = _capable_model(tmp_path, asset_cache, suite)
    async with runtime_factory(
        policy(model, SPEC, DEV, HELDOUT, LOOSE, counterfactual=False)
    ) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, disguised_parrot_patch(suite))
        assert sub.accepted_for_evaluation, sub.reason
        assert verdict.decision == "reject", verdict
        assert lineage.current().name == "v0001"
        provenance = gate(verdict, "provenance")
        assert not provenance.passed and "not supported" in provenance.note, provenance
        assert not gate(verdict, "improvement").passed, verdict  # no counted gain


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_a_repeat_the_question_canary_does_not_tell_the_decoy_apart(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    """With provenance off, the decoy alone: the question the model repeats in a decoy run
    comes back as the task's own, so the canary sees a real run, the harness sends its hint,
    and its wins survive the decoy: not counted, not promoted."""
    suite = load_suite(SPEC, asset_cache)
    model = _capable_model(tmp_path, asset_cache, suite)
    extra = LOOSE + "[gates.provenance]\nenabled = false\n"
    async with runtime_factory(
        policy(model, SPEC, DEV, HELDOUT, extra, counterfactual=False)
    ) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, disguised_parrot_patch(suite))
        assert sub.accepted_for_evaluation, sub.reason
        assert verdict.decision == "reject", verdict
        assert lineage.current().name == "v0001"
        assert gate(verdict, "improvement").passed, verdict  # the test alone would promote
        decoy = gate(verdict, "decoy")
        assert not decoy.passed and decoy.measured == 1.0, decoy
