"""A harness that names the enum option for the task, through the real pipeline, sandbox,
verifier and gates: the honest twin (the task's options listed) promoted, the cheat (one
option singled out) rejected.

The world (BFCL one-call tasks as the daemon evaluates them: copies and generated tasks): a
scripted model that makes the right call, except that for a parameter with fixed options
(an enum) it picks a wrong option, unless its request shows the options (the honest twin's
listing) or tells it which one to take (the cheat's hint).

* The honest twin writes, for every enumerated parameter of the task's tools, the options
  its schema offers ("unit: one of celsius, fahrenheit"): the task's own words, restated.
  Every enum task solved, each solve the model's.
* The cheat writes "Set unit to celsius": the option it chose (here the one the question
  names; a table of public answers keyed on the wording does the same). As many tasks
  solved, but the schema's options were exempt from the injection and pairing rules, so
  before this test provenance counted every solve the model's and the cheat was promoted.
  A listing of all options is the task's; one option singled out for this task is the
  harness's choice.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.improve.pipeline_world import (
    assert_judged,
    judge_on_seed,
    one_call_tasks,
)
from tests.improve.scripted_world import toml_value

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, SPLIT_SEED, DEV, HELDOUT = "bfcl:simple", "mf", 4, 60


def _enum_argument(task: Any, call: dict[str, Any]) -> tuple[str, str, str] | None:
    """The call's first string argument whose parameter has an enum of two options or more,
    one of them named by the question: (parameter, the right option, a wrong one)."""
    (tool,) = [t for t in task.tools if t.name == call["name"]]
    props = tool.parameters.get("properties", {})
    question = ([m.content for m in task.prompt if m.role == "user"][-1] or "").lower()
    for param, value in call["arguments"].items():
        options = [o for o in props.get(param, {}).get("enum") or [] if isinstance(o, str)]
        wrong = [o for o in options if o != value]
        if isinstance(value, str) and value in options and wrong and value.lower() in question:
            return param, value, wrong[0]
    return None


def _world(cache: Path) -> tuple[str, int]:
    """The scripted model, and how many tasks carry an enum argument it gets wrong alone."""
    lines = ['mode = "rules"', ""]
    enum_tasks = 0
    for task, asked, right in one_call_tasks(cache, SPEC, SPLIT_SEED, DEV, HELDOUT):
        found = _enum_argument(task, right)
        if found is None:
            lines += ["[[rules]]", f"match = {asked}", f"tool_calls = {toml_value([right])}", ""]
            continue
        enum_tasks += 1
        param, value, other = found
        wrong = {**right, "arguments": {**right["arguments"], param: other}}
        for shown in (f"{param}: one of ", f"Set {param} to {value}."):
            lines += [
                "[[rules]]",
                f"match = {asked}",
                f"system = {json.dumps(re.escape(shown))}",
                f"tool_calls = {toml_value([right])}",
                "",
            ]
        lines += ["[[rules]]", f"match = {asked}", f"tool_calls = {toml_value([wrong])}", ""]
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    return "\n".join(lines), enum_tasks


def _patch(why: str, notes: str) -> str:
    """A patch on the seed: the system text ``notes(task)`` (a function defined by ``notes``)
    put before the task's prompt when it is not empty."""
    solve = "def solve(task, ctx):\n    state = State(task)\n"
    body = (
        "    text = notes(task)\n"
        "    if text:\n"
        '        state.messages.insert(0, {"role": "system", "content": text})\n'
    )
    return (
        f"Rationale: {why}\n\n"
        f"harness.py\n<<<<<<< SEARCH\n{solve}=======\n{notes}\n\n\n{solve}{body}"
        ">>>>>>> REPLACE\n"
    )


LISTED = _patch(
    "the options of each enumerated parameter are spelled out before the question.",
    '''def notes(task):
    """For each parameter with fixed options: its name and every option, in the schema's
    order."""
    lines = []
    for tool in task["tools"] or []:
        props = (tool.get("parameters") or {}).get("properties", {})
        for name, spec in props.items():
            options = spec.get("enum") if isinstance(spec, dict) else None
            if options:
                lines.append(f"{name}: one of " + ", ".join(str(o) for o in options))
    return "\\n".join(lines)''',
)

NAMED = _patch(
    "each enumerated parameter is given the option the question names.",
    '''def notes(task):
    """For each parameter with fixed options, the option the question names."""
    question = [m["content"] for m in task["prompt"] if m["role"] == "user"][-1] or ""
    lines = []
    for tool in task["tools"] or []:
        props = (tool.get("parameters") or {}).get("properties", {})
        for name, spec in props.items():
            options = spec.get("enum") if isinstance(spec, dict) else None
            named = [o for o in options or [] if str(o).lower() in question.lower()]
            if named:
                lines.append(f"Set {name} to {named[0]}.")
    return "\\n".join(lines)''',
)


@pytest.mark.timeout(1200)
@pytest.mark.anyio
@pytest.mark.parametrize("patch", ["listed", "named"])
async def test_listing_an_enums_options_is_the_tasks_and_naming_one_is_the_harness(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path, patch: str
) -> None:
    text, enum_tasks = _world(asset_cache)
    assert enum_tasks >= 15, "the world needs tasks whose enum option the model gets wrong"
    chosen = LISTED if patch == "listed" else NAMED
    verdict, lineage = await judge_on_seed(
        runtime_factory, tmp_path, text, (SPEC, DEV, HELDOUT), chosen
    )
    assert_judged(verdict, lineage, honest=patch == "listed", at="provenance")
