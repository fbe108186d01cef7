"""Memorised answers earn no promotion: each defence alone, through the real pipeline.

Real harnesses carrying the public answers (BFCL simple's possible answers, HumanEval's
canonical solutions; ``tests/improve/cheats.py``) run in the real sandbox behind the real
gateway and verifiers, against a scripted model. Each defence is shown on its own by
switching the others off in the policy:

1. the static screen rejects the answer table before anything runs;
2. with the screen loosened, provenance finds no model reply behind the solves: they do not
   count, and the provenance gate rejects the candidate;
3. with provenance off as well, the sequential test would promote (every task solved), but
   the decoy re-run finds the wins survive a model answering other questions: rejected.

The same candidate path as ``harnessctl propose`` (``intake.record``, then the pipeline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.lineage import Lineage
from daemon.suites import load_suite
from tests.improve.cheats import Use, memorised_patch
from tests.improve.pipeline_world import LOOSE, SEED, gate, policy, set_policy, solver, submit

pytestmark = [pytest.mark.docker, pytest.mark.slow]


async def _three_defences(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path, spec: str, heldout: int
) -> None:
    model = tmp_path / "model.toml"
    # Public held-out tasks: each defence alone against the public answers (counterfactual
    # copies would stop every one of these cheats before any of them is reached).
    model.write_text(solver(asset_cache, spec, 4, heldout, counterfactual=False))
    suite = load_suite(spec, asset_cache)
    text = policy(model, spec, 4, heldout, counterfactual=False)
    async with runtime_factory(text) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)

        # 1. The static screen.
        sub, _ = await submit(rt, lineage, memorised_patch(suite, "alone", "blob"))
        assert not sub.accepted_for_evaluation and "max_literal_bytes" in sub.reason

        # 2. Provenance: the screen loosened, the harness never asks the model, or asks and
        # answers from its table anyway.
        set_policy(rt, tmp_path, text + LOOSE)
        uses: list[Use] = ["alone", "ignore"]
        for use in uses:
            sub, verdict = await submit(rt, lineage, memorised_patch(suite, use, "chunks"))
            assert sub.accepted_for_evaluation and verdict.decision == "reject", verdict
            provenance = gate(verdict, "provenance")
            assert not provenance.passed and provenance.measured > 0.05, provenance
            assert "not supported" in provenance.note
            assert not gate(verdict, "improvement").passed, verdict  # no counted gain

        # 3. The decoy: provenance off too, so every solve counts and the test promotes.
        set_policy(rt, tmp_path, text + LOOSE + "[gates.provenance]\nenabled = false\n")
        sub, verdict = await submit(rt, lineage, memorised_patch(suite, "alone", "chunks"))
        assert verdict.decision == "reject", verdict
        assert gate(verdict, "accuracy").passed and gate(verdict, "improvement").passed
        decoy = gate(verdict, "decoy")
        assert not decoy.passed and decoy.measured == 1.0, decoy
        assert "survived the decoy" in decoy.note and "not promoted" in decoy.note
        assert lineage.current().name == "v0001"


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_memorised_bfcl_answers_are_rejected_by_each_defence(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    await _three_defences(runtime_factory, tmp_path, asset_cache, "bfcl:simple", 40)


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_memorised_humaneval_solutions_are_rejected_by_each_defence(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    await _three_defences(runtime_factory, tmp_path, asset_cache, "humaneval", 20)
