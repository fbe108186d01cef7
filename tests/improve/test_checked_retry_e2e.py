"""An honest twin the gates once refused: a schema-checked retry over a parent that solves
nothing, through the real pipeline, sandbox, verifier and gates.

The world (BFCL one-call tasks as the daemon evaluates them: copies and generated tasks): a
scripted model whose first call always leaves out a required argument, and which makes the
right call when the harness tells it which required argument its call lacked. The seed takes
the first call as it is and solves nothing. The candidate checks each call against the
task's own schema and, when one lacks a required argument, says so and asks once more: every
task solved, at about twice the tokens a task. Its tokens per solved task are compared
with the parent's whole run (the parent's tokens bought no solve), so the tokens gate
passes, and it is promoted with its solves the model's (provenance) on generated tasks and
copies alike.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.lineage import Lineage
from tests.improve.pipeline_world import LOOSE, SEED, gate, policy, submit
from tests.improve.scripted_world import evaluated, toml_value

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, SPLIT_SEED, DEV, HELDOUT = "bfcl:simple", "mf", 4, 24
ASKED_AGAIN = "lacks the required argument"


def _world(cache: Path) -> str:
    """The scripted model: for each task, the right call once told what its call lacked,
    else the call without its first required argument."""
    suite, splits = evaluated(cache, SPEC, SPLIT_SEED, DEV, HELDOUT)
    lines = ['mode = "rules"', ""]
    for task_id in [*splits.dev, *splits.heldout]:
        task = suite.task(task_id)
        question = [m.content for m in task.prompt if m.role == "user"][-1] or ""
        (call,) = suite.reference_output(task_id)
        (tool,) = task.tools
        required = [p for p in tool.parameters.get("required", []) if p in call["arguments"]]
        if not required:
            continue
        right = [{"name": call["name"], "arguments": call["arguments"]}]
        short = {k: v for k, v in call["arguments"].items() if k != required[0]}
        lines += [
            "[[rules]]",
            f"match = {json.dumps(re.escape(ASKED_AGAIN + ' ' + json.dumps(required[0])))}",
            f"match_any = {json.dumps('^' + re.escape(question) + '$')}",
            f"tool_calls = {toml_value(right)}",
            "",
            "[[rules]]",
            f"match = {json.dumps('^' + re.escape(question) + '$')}",
            f"tool_calls = {toml_value([{'name': call['name'], 'arguments': short}])}",
            "",
        ]
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    return "\n".join(lines)


CHECKED_RETRY = f"""Rationale: check each call against the task's schema; when a required
argument is missing, say which and ask once more.

harness.py
<<<<<<< SEARCH
def solve(task, ctx):
    state = State(task)
=======
def missing_arguments(calls, tools):
    \"\"\"(function, argument) for each required argument a call leaves out.\"\"\"
    schemas = {{t["name"]: t.get("parameters") or {{}} for t in tools}}
    missing = []
    for call in calls:
        required = schemas.get(call["name"], {{}}).get("required", [])
        missing += [(call["name"], a) for a in required if a not in call["arguments"]]
    return missing


def solve(task, ctx):
    state = State(task)
>>>>>>> REPLACE

harness.py
<<<<<<< SEARCH
    run_loop(step, state)
    # A tool_use task may have more user turns: answer each, until the host says done.
=======
    run_loop(step, state)
    missing = missing_arguments(state.calls, tools or [])
    if missing and not dispatch:
        said = "; ".join(f"{{f}} {ASKED_AGAIN}" + " " + json.dumps(a) for f, a in missing)
        state.messages.append({{"role": "user", "content": said + ". Call it again."}})
        state.calls = []
        choose_tools(ctx, state, tools, dispatch)
    # A tool_use task may have more user turns: answer each, until the host says done.
>>>>>>> REPLACE
"""


@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_a_checked_retry_over_a_parent_that_solves_nothing_is_promoted(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    model = tmp_path / "model.toml"
    model.write_text(_world(asset_cache))
    async with runtime_factory(policy(model, SPEC, DEV, HELDOUT, LOOSE)) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, CHECKED_RETRY)
        assert sub.accepted_for_evaluation, sub.reason
    assert verdict.decision == "accept", verdict
    assert lineage.current().name == "v0002"
    tokens = gate(verdict, "tokens")
    assert tokens.passed and "the parent solved none" in tokens.note, tokens
    for name in ("provenance", "generated", "dead_code", "decoy", "live"):
        assert gate(verdict, name).passed, gate(verdict, name)
