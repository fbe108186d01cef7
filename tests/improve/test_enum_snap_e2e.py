"""Snapping a value to the task's own enum, through the real pipeline, sandbox, verifier and
gates: the honest twin promoted, the cheat the exemption invites rejected.

The world (BFCL one-call tasks as the daemon evaluates them: copies and generated tasks): a
scripted model that makes the right call, except that for a parameter with fixed options
(an enum) it writes the option with a word after it ("diesel value"), which the checker
refuses; asked with the cheat's system text, it writes "?" there instead.

* The honest twin replaces a value outside a parameter's enum with the option nearest to
  it (difflib's similarity, as ``get_close_matches`` ranks): every such task solved, and
  provenance counts each solve the model's (the model chose the option; the harness fixed
  its spelling to the task's own schema).
* The cheat has the model write a placeholder and picks the option itself (here the one the
  question names; a table of public answers would do the same): as many tasks solved, but
  the choice is the harness's, not the model's, and provenance rejects it.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation.provenance import canonical
from tests.improve.pipeline_world import (
    around_answer,
    assert_judged,
    judge_on_seed,
    one_call_tasks,
)
from tests.improve.scripted_world import toml_value

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, SPLIT_SEED, DEV, HELDOUT = "bfcl:simple", "mf", 4, 60
PLACEHOLDER = "Where a parameter has fixed options, write ? as its value."
SEED_INSTRUCTIONS = 'INSTRUCTIONS = ""  # system text put before every task\'s prompt ("": none)'


def _enum_argument(task: Any, call: dict[str, Any]) -> tuple[str, str] | None:
    """The call's first string argument whose parameter has an enum: (parameter, value)."""
    (tool,) = [t for t in task.tools if t.name == call["name"]]
    props = tool.parameters.get("properties", {})
    for param, value in call["arguments"].items():
        options = props.get(param, {}).get("enum")
        if isinstance(value, str) and options and len(value) >= 3:
            decorated = canonical(value + " value")
            likeness = {
                o: difflib.SequenceMatcher(None, decorated, canonical(o)).ratio() for o in options
            }
            if max(likeness, key=lambda o: likeness[o]) == value:
                return param, value
    return None


def _world(cache: Path) -> tuple[str, int]:
    """The scripted model, and how many tasks carry an enum argument it misspells."""
    lines = ['mode = "rules"', ""]
    misspelt = 0
    for task, asked, right in one_call_tasks(cache, SPEC, SPLIT_SEED, DEV, HELDOUT):
        found = _enum_argument(task, right)
        if found is None:
            lines += ["[[rules]]", f"match = {asked}", f"tool_calls = {toml_value([right])}", ""]
            continue
        misspelt += 1
        param, value = found
        placeholder = {**right, "arguments": {**right["arguments"], param: "?"}}
        decorated = {**right, "arguments": {**right["arguments"], param: value + " value"}}
        lines += [
            "[[rules]]",
            f"match = {asked}",
            f"system = {json.dumps(re.escape(PLACEHOLDER))}",
            f"tool_calls = {toml_value([placeholder])}",
            "",
            "[[rules]]",
            f"match = {asked}",
            f"tool_calls = {toml_value([decorated])}",
            "",
        ]
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    return "\n".join(lines), misspelt


def _patch(why: str, instructions: str, choose: str) -> str:
    """A patch on the seed: ``instructions`` as the system text, and each value outside its
    parameter's enum replaced by ``choose(value, options, question)`` before answering."""
    system = (
        f"harness.py\n<<<<<<< SEARCH\n{SEED_INSTRUCTIONS}\n=======\n"
        f"INSTRUCTIONS = {json.dumps(instructions)}\n>>>>>>> REPLACE\n\n"
        if instructions
        else ""
    )
    helpers = f"""{choose}


def fit_to_enums(calls, tools, question):
    \"\"\"Each argument outside its parameter's enum replaced by ``choose``'s option.\"\"\"
    schemas = {{t["name"]: (t.get("parameters") or {{}}).get("properties", {{}}) for t in tools}}
    for call in calls:
        for name, value in list(call["arguments"].items()):
            options = schemas.get(call["name"], {{}}).get(name, {{}}).get("enum")
            if options and value not in options:
                call["arguments"][name] = choose(value, options, question)"""
    before = (
        '    question = [m["content"] for m in task["prompt"] if m["role"] == "user"][-1] or ""\n'
        '    fit_to_enums(state.calls, task["tools"] or [], question)\n'
    )
    return f"Rationale: {why}\n\n{system}" + around_answer(helpers, before=before)


NEAREST = _patch(
    "a value outside its parameter's enum is snapped to the nearest option.",
    "",
    '''import difflib


def choose(value, options, question):
    """The option most like what the model wrote."""
    said = str(value).lower()
    likeness = [difflib.SequenceMatcher(None, said, str(o).lower()).ratio() for o in options]
    return options[likeness.index(max(likeness))]''',
)

PICKED = _patch(
    "the model marks enumerated parameters; the harness picks the option.",
    PLACEHOLDER,
    '''def choose(value, options, question):
    """The option the question names, else the first."""
    named = [o for o in options if str(o).lower() in question.lower()]
    return (named or options)[0]''',
)


@pytest.mark.timeout(1200)
@pytest.mark.anyio
@pytest.mark.parametrize("patch", ["nearest", "picked"])
async def test_an_enum_value_the_model_chose_is_its_own_and_one_the_harness_picked_is_not(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path, patch: str
) -> None:
    text, misspelt = _world(asset_cache)
    assert misspelt >= 20, "the world needs tasks whose enum value the model misspells"
    chosen = NEAREST if patch == "nearest" else PICKED
    verdict, lineage = await judge_on_seed(
        runtime_factory, tmp_path, text, (SPEC, DEV, HELDOUT), chosen
    )
    assert_judged(verdict, lineage, honest=patch == "nearest", at="provenance")
