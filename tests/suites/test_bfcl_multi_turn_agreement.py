"""Our BFCL multi-turn checker decides as bfcl-eval's own does, on ground truth and on
perturbed trajectories (a sample; the prototype's full run agreed on 7,188 of 7,188).

The reference side is bfcl-eval's ``multi_turn_checker``, imported straight from the pinned
wheel (zip import; its package and constants ``__init__``s are empty) in a subprocess of its
own. It ``eval()``s call strings: here they are rendered by this test from trusted ground
truth and its perturbations, never by a harness.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.config.assets import WHEELS, fetch_wheel
from daemon.suites.bfcl_multi_turn import CATEGORIES
from daemon.suites.toolenv import bfcl_data
from daemon.suites.toolenv.bfcl_api import BfclWheel
from daemon.suites.toolenv.bfcl_run import check, replay

Traj = list[list[tuple[str, dict[str, Any]]]]

REFERENCE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from importlib import resources
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

def load(rel):
    text = (resources.files("bfcl_eval") / "data" / rel).read_text()
    return {e["id"]: e for e in (json.loads(l) for l in text.splitlines() if l)}

entries, answers = {}, {}
for cat in sys.argv[2].split(","):
    entries.update(load(f"BFCL_v4_{cat}.json"))
    truth = load(f"possible_answer/BFCL_v4_{cat}.json")
    answers.update({k: v["ground_truth"] for k, v in truth.items()})
g = vars(multi_turn_utils)
for line in sys.stdin:
    job = json.loads(line)
    k, entry, gt = job["k"], entries[job["id"]], answers[job["id"]]
    turns = job["turns"]
    if len(turns) != len(gt):  # eval_runner's pre-check (its module has heavy imports)
        out = {"k": k, "valid": False, "error_type": "multi_turn:force_terminated"}
    else:
        steps = [[[c] for c in t] for t in turns]  # one call per step
        r = multi_turn_checker(steps, gt, entry, job["category"], f"m{k}x")
        out = {"k": k, "valid": r["valid"], "error_type": r.get("error_type")}
    for key in [key for key in g if key.startswith(f"m{k}x_")]:
        del g[key]  # BFCL keeps instances in module globals keyed by model name + id
    sys.stdout.write(json.dumps(out) + "\n")
"""


def _bfcl_string(name: str, arguments: dict[str, Any]) -> str:
    """BFCL's ``convert_to_function_call`` rendering of a structured call."""
    return f"{name}(" + ",".join(f"{k}={v!r}" for k, v in arguments.items()) + ")"


def _perturb(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    return {**value, "_x": 1} if isinstance(value, dict) else "x"


def variants(task_id: str, gt: Traj) -> dict[str, Traj]:
    rng = random.Random(task_id)
    out: dict[str, Traj] = {"gt": gt, "empty": [[] for _ in gt], "truncated": gt[:-1]}
    nonempty = [i for i, t in enumerate(gt) if t]

    def copy() -> Traj:
        return [list(t) for t in gt]

    t = copy()
    i = rng.choice(nonempty)
    del t[i][rng.randrange(len(t[i]))]
    out["drop_call"] = t
    with_args = [(i, j) for i, turn in enumerate(gt) for j, c in enumerate(turn) if c[1]]
    if with_args:
        t = copy()
        i, j = rng.choice(with_args)
        name, args = t[i][j]
        key = rng.choice(sorted(args))
        t[i][j] = (name, {**args, key: _perturb(args[key])})
        out["change_arg"] = t
    t = copy()
    i = rng.choice(nonempty)
    j = rng.randrange(len(t[i]))
    t[i].insert(j + 1, t[i][j])
    out["extra_call"] = t
    t = copy()
    t[nonempty[0]][:0] = [("not_a_tool", {"x": 1}), (gt[nonempty[0]][0][0], {"bogus_kw": 1})]
    out["noise_errors"] = t
    later = [i for i in nonempty if i > 0]
    if later:
        t = copy()
        i = rng.choice(later)
        t[i - 1].append(t[i].pop(0))
        out["move_call_earlier"] = t
    return out


def test_our_checker_agrees_with_bfcl_evals_on_a_sample(asset_cache: Path) -> None:
    path = fetch_wheel(asset_cache, "bfcl-eval")
    wheel = BfclWheel(path, WHEELS["bfcl-eval"].sha256, asset_cache / "bfcl-eval")
    docs = bfcl_data.load_func_docs(wheel.read)
    jobs: list[dict[str, Any]] = []
    ours: list[tuple[str, str, bool, str | None]] = []
    for category in CATEGORIES:
        for task in bfcl_data.load_tasks(wheel.read, category)[3::25]:
            classes = wheel.api_classes(task.involved_classes)
            gt: Traj = [
                [(c["name"], c["arguments"]) for c in turn]
                for turn in bfcl_data.ground_truth_calls(task, docs)
            ]
            truth = replay(task, classes, gt)
            for name, traj in variants(task.id, gt).items():
                verdict = check(task, truth, replay(task, classes, traj))
                ours.append((task.id, name, verdict.valid, verdict.error_type))
                turns = [[_bfcl_string(n, a) for n, a in turn] for turn in traj]
                jobs.append({"k": len(jobs), "id": task.id, "category": category, "turns": turns})
    proc = subprocess.run(
        [sys.executable, "-c", REFERENCE, str(path), ",".join(CATEGORIES)],
        input="".join(json.dumps(j) + "\n" for j in jobs),
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(theirs) == len(jobs)
    disagree = [
        (tid, name, valid, error, ref["valid"], ref["error_type"])
        for (tid, name, valid, error), ref in zip(ours, theirs, strict=True)
        if (valid, error) != (ref["valid"], ref["error_type"])
    ]
    assert disagree == []
    kinds = {name for _, name, _, _ in ours}
    assert {"gt", "empty", "drop_call", "change_arg", "move_call_earlier"} <= kinds
    # Both verdicts occur among the perturbations (the comparison is not all one answer).
    assert {valid for _, name, valid, _ in ours if name != "gt"} == {True, False}


pytestmark = [pytest.mark.unit, pytest.mark.slow]
