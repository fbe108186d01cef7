"""Cheating harnesses through the evaluator (what ``harnessd eval`` runs): real HumanEval
tasks, the real guest runtime and gateway, the real code-check boundary.

The harnesses never call the model: each answers every task with the same cheat (lying
objects, a forged verdict), with ``claimed_success`` True. Each must score what the same
harness scores without its cheat, with the reason in every task's detail, while an honest
harness that knows the answers scores everything (the answers are written into it by the
test: the ground truth never reaches a container otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import EvalReport
from tests.suites.cheats import CHEATS

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

POLICY = """
[models]
primary = "scripted:{model}"
[suite]
name = "humaneval"
dev_size = 4
heldout_size = 10
split_seed = "forged-code-checks"
[sandbox]
wall_s = 60.0
concurrency = 3
"""

ANSWERING = """
import json, pathlib

ANSWERS = json.loads((pathlib.Path(__file__).parent / "answers.json").read_text())


def solve(task, ctx):
    answer = ANSWERS.get(task["meta"]["code_prompt"])
    if answer is None:
        answer = ANSWERS["*"].replace("{entry}", task["meta"]["entry_point"])
    return {"output": answer, "claimed_success": True}
"""

WITHOUT_CHEAT = "def {entry}(*args, **kwargs):\n    return None\n"


def _harness(tmp_path: Path, name: str, answers: dict[str, str]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "harness.py").write_text(ANSWERING)
    (folder / "answers.json").write_text(json.dumps(answers))
    return folder


async def test_cheating_harnesses_score_what_they_score_without_the_cheat(
    tmp_path: Path, runtime_factory: Any, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    model.write_text('mode = "rules"\n[[rules]]\ncontent = "no idea"\n')
    harnesses = {
        "lying_objects": {"*": CHEATS["lying_object"][0]},
        "forged_verdict": {"*": CHEATS["token_from_frames_and_memory"][0]},
        "forged_from_files": {"*": CHEATS["token_from_files_and_environment"][0]},
        "without_cheat": {"*": WITHOUT_CHEAT},
    }
    reports: dict[str, EvalReport] = {}
    async with runtime_factory(POLICY.format(model=model)) as rt:
        policy = rt.policy.get()
        ids = rt.splits(policy=policy).heldout
        suite = await rt.load_suite(policy=policy)  # held-out tasks: their counterfactual copies
        oracle = {"*": WITHOUT_CHEAT}
        oracle.update({str(suite.task(i).meta["code_prompt"]): suite.expected(i) for i in ids})
        harnesses["honest"] = oracle
        for name, answers in harnesses.items():
            subject = Subject(_harness(tmp_path, name, answers), name)
            reports[name] = await evaluate(
                rt,
                subject,
                split="heldout",
                task_ids=ids,
                model=policy.models.primary,
                policy=policy,
            )
    for report in reports.values():
        assert report.n == len(ids) and not report.errors
        assert report.model_calls_per_task == 0  # none of them ever asked the model
    assert reports["honest"].accuracy == 1.0
    baseline = reports["without_cheat"].accuracy
    assert baseline == 0.0
    reasons = {
        "lying_objects": "refused: the candidate's result is not plain data",
        "forged_verdict": "crashed: the candidate's process ended or hung up",
        "forged_from_files": "crashed: the candidate's process ended or hung up",
    }
    for name, reason in reasons.items():
        report = reports[name]
        assert report.accuracy <= baseline, (name, [t.detail for t in report.tasks])
        assert report.claimed_success_rate == 1.0 and report.verification_gap == 1.0
        assert all(reason in t.detail for t in report.tasks), [t.detail for t in report.tasks]
