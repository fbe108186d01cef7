"""The verifier end to end: real BFCL tasks, real sandbox, real gateway and ledger.

Harnesses here embed their behaviour (an oracle holds the answers keyed by question text:
the ground truth never reaches a container, so a test harness can only know answers that
the test itself wrote into it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation.evaluator import Subject, evaluate

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"

POLICY = """
[models]
primary = "scripted:{model}"
[suite]
name = "bfcl:simple,irrelevance"
dev_size = 4
heldout_size = 10
split_seed = "v2"
[sandbox]
wall_s = 60.0
concurrency = 3
"""

ORACLE = """
import json, pathlib

ANSWERS = json.loads((pathlib.Path(__file__).parent / "answers.json").read_text())


def solve(task, ctx):
    question = [m["content"] for m in task["prompt"] if m["role"] == "user"][-1]
    calls = ANSWERS[question]
    if {mode!r} == "wrong":
        calls = [{{"name": c["name"], "arguments": {{k: "not this" for k in c["arguments"]}}}}
                 for c in calls] or [{{"name": "made_up", "arguments": {{}}}}]
    claimed = True if {mode!r} == "claim_all" else {mode!r} == "oracle"
    output = [] if {mode!r} == "claim_all" else calls
    return {{"output": output, "claimed_success": claimed}}
"""


def _harness(tmp_path: Path, mode: str, answers: dict[str, Any]) -> Path:
    folder = tmp_path / mode
    folder.mkdir()
    (folder / "harness.py").write_text(ORACLE.format(mode=mode))
    (folder / "answers.json").write_text(json.dumps(answers))
    return folder


def _question(suite: Any, task_id: str) -> str:
    return str([m.content for m in suite.task(task_id).prompt if m.role == "user"][-1])


def _model(tmp_path: Path) -> Path:
    path = tmp_path / "model.toml"
    path.write_text('mode = "rules"\n[[rules]]\ncontent = "no idea"\n')
    return path


@pytest.mark.anyio
async def test_oracle_scores_all_wrong_scores_none_and_claims_show_the_gap(
    tmp_path: Path, runtime_factory: Any, asset_cache: Path
) -> None:
    async with runtime_factory(POLICY.format(model=_model(tmp_path))) as rt:
        policy = rt.policy.get()
        suite = await rt.load_suite(policy=policy)  # held-out tasks: their counterfactual copies
        ids = rt.splits(policy=policy).heldout
        answers = {_question(suite, t): suite.reference_output(t) for t in ids}
        reports = {}
        for mode in ("oracle", "wrong", "claim_all"):
            subject = Subject(_harness(tmp_path, mode, answers), mode)
            reports[mode] = await evaluate(
                rt,
                subject,
                split="heldout",
                task_ids=ids,
                model=policy.models.primary,
                policy=policy,
            )
    irrelevant = sum(t.startswith("irrelevance") for t in ids)
    assert 0 < irrelevant < len(ids)  # both kinds of task are in the split
    oracle, wrong, claim_all = reports["oracle"], reports["wrong"], reports["claim_all"]
    assert oracle.accuracy == 1.0 and oracle.verification_gap == 0.0
    assert wrong.accuracy == 0.0
    # Claiming success on everything while making no call: right only on irrelevance.
    assert claim_all.claimed_success_rate == 1.0
    assert claim_all.accuracy == pytest.approx(irrelevant / len(ids))
    assert claim_all.verification_gap == pytest.approx(1 - claim_all.accuracy)
    for report in reports.values():
        assert report.n == len(ids) and not report.errors
        assert [t.id for t in report.tasks] == ids


@pytest.mark.anyio
async def test_a_function_nobody_calls_is_reported_never_executed(
    tmp_path: Path, runtime_factory: Any
) -> None:
    harness = tmp_path / "patched"
    shutil.copytree(SEED, harness)
    source = (harness / "harness.py").read_text()
    source = source.replace(
        "def solve(task, ctx):",
        "def rank_candidates(calls):\n"
        "    scored = sorted(calls, key=lambda c: len(c['arguments']))\n"
        "    return scored[::-1]\n\n\n"
        "def solve(task, ctx):",
    )
    (harness / "harness.py").write_text(source)
    async with runtime_factory(POLICY.format(model=_model(tmp_path))) as rt:
        report = await evaluate(
            rt,
            Subject(harness, "patched"),
            split="dev",
            task_ids=rt.splits(policy=rt.policy.get()).dev,
            model=rt.policy.get().models.primary,
            policy=rt.policy.get(),
        )
    never = {n.file: n for n in report.coverage.never_executed}
    assert "rank_candidates" in never["harness.py"].functions
    assert 0 < report.coverage.executed_fraction < 1


@pytest.mark.anyio
async def test_containers_see_opaque_task_ids(tmp_path: Path, runtime_factory: Any) -> None:
    """Suite ids can give answers away (``irrelevance_12``: make no call), so a harness
    sees a per-run token instead; the host keeps the real id in the report."""
    harness = tmp_path / "echo"
    harness.mkdir()
    (harness / "harness.py").write_text(
        "def solve(task, ctx):\n    return {'output': task['id'], 'claimed_success': False}\n"
    )
    async with runtime_factory(POLICY.format(model=_model(tmp_path))) as rt:
        policy = rt.policy.get()
        ids = rt.splits(policy=policy).dev
        report = await evaluate(
            rt,
            Subject(harness, "echo"),
            split="dev",
            task_ids=ids,
            model=policy.models.primary,
            policy=policy,
        )
    seen = [t.output for t in report.tasks]
    assert [t.id for t in report.tasks] == ids
    assert all(isinstance(s, str) and s.startswith("task-") for s in seen)
    assert not set(seen) & set(ids) and len(set(seen)) == len(ids)
