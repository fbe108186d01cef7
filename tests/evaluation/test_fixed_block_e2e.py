"""The fixed block is judged on the judged run: a line is the harness's design only if every
task of that run got it. Real BFCL tasks (held-out ones as the daemon evaluates them), the
real sandbox, gateway and provenance; a scripted model that answers every task right.

The cheat: a table of rows ("base=10") pairing each task's values with their parameters,
sent whole to every dev task (so every row is in the dev run's fixed block) and, on a judged
run, only the task's own row. Its honest twin sends the same rows to every judged task too:
a block the judged run also got whole is its design.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation.evaluator import Subject, evaluate
from tests.improve.scripted_world import toml_value

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow]

POLICY = """
[models]
primary = "scripted:{model}"
[suite]
name = "bfcl:simple"
dev_size = 4
heldout_size = 10
split_seed = "fixed-block"
[sandbox]
wall_s = 60.0
concurrency = 3
"""

HARNESS = """
import json, pathlib

ROWS = json.loads((pathlib.Path(__file__).parent / "rows.json").read_text())
MODE = (pathlib.Path(__file__).parent / "mode.txt").read_text().strip()


def solve(task, ctx):
    question = task["prompt"][-1]["content"]
    rows = [line for rows in ROWS.values() for line in rows] if MODE == "all" else ROWS[question]
    system = "Answer with one call.\\n" + "\\n".join(rows)
    messages = [{"role": "system", "content": system}, *task["prompt"]]
    reply = ctx.model.chat(messages, tools=task["tools"], max_tokens=256)
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in reply["tool_calls"]]
    return {"output": calls, "claimed_success": bool(calls)}
"""


def _shown(report: Any) -> list[tuple[str, bool, bool | None, str, str]]:
    return [(t.id, t.passed, t.supported, t.provenance, t.detail) for t in report.tasks]


def _harness(tmp_path: Path, name: str, mode: str, rows: dict[str, list[str]]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "harness.py").write_text(HARNESS)
    (folder / "rows.json").write_text(json.dumps(rows))
    (folder / "mode.txt").write_text(mode)
    return folder


async def test_a_per_task_row_hidden_in_the_dev_block_is_not_the_harness_design(
    tmp_path: Path, runtime_factory: Any, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    async with runtime_factory(POLICY.format(model=model)) as rt:
        policy = rt.policy.get()
        ids = rt.splits(policy=policy).heldout
        suite = await rt.load_suite(policy=policy)
        rules, rows = ['mode = "rules"', ""], {}
        for task_id in ids:
            question = suite.task(task_id).prompt[-1].content or ""
            (call,) = suite.reference_output(task_id)
            rows[question] = [f"{k}={json.dumps(v)}" for k, v in call["arguments"].items()]
            rules += [
                "[[rules]]",
                f"match = {json.dumps('^' + re.escape(question) + '$')}",
                f"tool_calls = {toml_value([call])}",
                "",
            ]
        model.write_text("\n".join([*rules, "[[rules]]", 'content = "no idea"', ""]))

        async def run(mode: str, fixed: frozenset[str] | None) -> Any:
            name = f"{mode}-{'found' if fixed is None else 'handed'}"
            subject = Subject(_harness(tmp_path, name, mode, rows), mode)
            return await evaluate(
                rt,
                subject,
                split="heldout",
                task_ids=ids,
                model=policy.models.primary,
                policy=policy,
                fixed=fixed,
            )

        # What the dev run hands on: every row was in every task's first request.
        dev = await run("all", None)
        block = frozenset(dev.fixed_lines)
        assert all(t.passed and t.supported for t in dev.tasks), _shown(dev)
        assert len(block) > len(ids)  # every task's rows, and the instruction
        # The cheat: each judged task gets only its own rows.
        own = await run("own", block)
        assert all(t.passed for t in own.tasks)
        assert all(t.supported is False for t in own.tasks), [t.provenance for t in own.tasks]
        assert own.fixed_lines == ["Answer with one call."]
        # The honest twin: the same block sent whole to the judged run is its design.
        whole = await run("all", block)
        assert all(t.passed and t.supported for t in whole.tasks), _shown(whole)
