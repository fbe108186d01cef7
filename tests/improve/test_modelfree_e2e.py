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

The same candidate path as ``harnessctl propose`` (``candidates.record``, then the pipeline).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.config.policy import load_policy
from daemon.evaluation.runtime import Runtime
from daemon.improve import candidates
from daemon.improve.pipeline import Pipeline
from daemon.lineage import Lineage
from daemon.suites import load_suite
from daemon.suites.splits import split
from daemon.verdict import Verdict
from tests.improve.cheats import Use, memorised_patch
from tests.improve.scripted_world import toml_value

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
LOOSE = """
[patch]
max_bytes = 200000
max_literal_bytes = 200000
max_encoded_chars = 200000
"""


def _solver(cache: Path, spec: str, dev: int, heldout: int) -> str:
    """BFCL: the model answers the even positions of each split right, the rest "I do not
    know" (the seed: 50 %). HumanEval: never anything useful (the seed: 0 %)."""
    lines = ['mode = "rules"', ""]
    if spec.startswith("bfcl"):
        suite = load_suite(spec, cache)
        splits = split(suite.task_ids(), seed="mf", dev_size=dev, heldout_size=heldout)
        for ids in (splits.dev, splits.heldout):
            for task_id in ids[::2]:
                question = [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1]
                lines += [
                    "[[rules]]",
                    f"match = {json.dumps('^' + re.escape(question or '') + '$')}",
                    f"tool_calls = {toml_value(suite.reference_output(task_id))}",
                    "",
                ]
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    return "\n".join(lines)


def _policy(model: Path, spec: str, dev: int, heldout: int, extra: str = "") -> str:
    return f"""
[models]
primary = "scripted:{model}"
[suite]
name = "{spec}"
dev_size = {dev}
heldout_size = {heldout}
split_seed = "mf"
[sandbox]
wall_s = 60.0
concurrency = 3
{extra}"""


async def _submit(rt: Runtime, lineage: Lineage, text: str) -> tuple[candidates.Submitted, Any]:
    parent = lineage.current()
    sub = candidates.record(
        lineage, parent, text, source="external", proposer_model=None,
        policy=rt.policy.get().patch, work_dir=rt.work_dir,
    )  # fmt: skip
    if not sub.accepted_for_evaluation:
        return sub, None
    verdict: Verdict = await Pipeline(rt, lineage).run(sub.candidate_id)
    return sub, verdict


def _gate(verdict: Verdict, name: str) -> Any:
    return next(g for g in verdict.gates if g.gate == name)


async def _three_defences(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path, spec: str, heldout: int
) -> None:
    model = tmp_path / "model.toml"
    model.write_text(_solver(asset_cache, spec, 4, heldout))
    suite = load_suite(spec, asset_cache)
    text = _policy(model, spec, 4, heldout)
    async with runtime_factory(text) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)

        # 1. The static screen.
        sub, _ = await _submit(rt, lineage, memorised_patch(suite, "alone", "blob"))
        assert not sub.accepted_for_evaluation and "max_literal_bytes" in sub.reason

        # 2. Provenance: the screen loosened, the harness never asks the model, or asks and
        # answers from its table anyway.
        rt.policy.current = load_policy(_write(tmp_path, text + LOOSE))
        uses: list[Use] = ["alone", "ignore"]
        for use in uses:
            sub, verdict = await _submit(rt, lineage, memorised_patch(suite, use, "chunks"))
            assert sub.accepted_for_evaluation and verdict.decision == "reject", verdict
            provenance = _gate(verdict, "provenance")
            assert not provenance.passed and provenance.measured > 0.05, provenance
            assert "not supported" in provenance.note
            assert not _gate(verdict, "improvement").passed, verdict  # no counted gain

        # 3. The decoy: provenance off too, so every solve counts and the test promotes.
        rt.policy.current = load_policy(
            _write(tmp_path, text + LOOSE + "[gates.provenance]\nenabled = false\n")
        )
        sub, verdict = await _submit(rt, lineage, memorised_patch(suite, "alone", "chunks"))
        assert verdict.decision == "reject", verdict
        assert _gate(verdict, "accuracy").passed and _gate(verdict, "improvement").passed
        decoy = _gate(verdict, "decoy")
        assert not decoy.passed and decoy.measured == 1.0, decoy
        assert "survived the decoy" in decoy.note and "not promoted" in decoy.note
        assert lineage.current().name == "v0001"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


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
