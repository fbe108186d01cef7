"""The component move: which components a base is offered (evidence from failed dev tasks,
not present, a primitive to wrap), what each does to an answer once appended to the seed,
and how a reply becomes a patch (only offered components; the grammar names only those)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from daemon.improve.proposer import components, edit_protocol, moves
from daemon.improve.proposer.components import COMPONENTS, FailedAnswer, evidence
from daemon.patches import PatchRejected, Proposal
from daemon.patches.apply import apply_edits
from daemon.patches.targets import Targets, find_targets

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal" / "harness.py"
TOOLS = [
    {
        "name": "area",
        "description": "Area of a rectangle.",
        "parameters": {
            "type": "object",
            "properties": {"width": {"type": "number"}, "height": {"type": "number"}},
            "required": ["width", "height"],
        },
    },
    {"name": "volume", "description": "Volume.", "parameters": {"type": "object"}},
]
RIGHT = {"name": "area", "arguments": {"width": 2, "height": 3}}


def _failed(output: Any, expected: int = 1) -> FailedAnswer:
    return FailedAnswer(output, TOOLS, expected)


def _keys(found: list[components.Evidence]) -> dict[str, int]:
    return {e.key: e.failed_tasks for e in found}


@pytest.mark.unit
def test_each_component_is_offered_only_where_a_failed_dev_task_shows_its_symptom() -> None:
    seed = SEED.read_text()
    assert _keys(evidence([_failed([RIGHT])], seed)) == {}
    assert _keys(evidence([_failed([RIGHT, RIGHT]), _failed([RIGHT, RIGHT])], seed)) == {
        "unique_calls": 2,
        "first_call_only": 2,
        "one_call_per_reply": 2,
    }
    ghost = {"name": "perimeter", "arguments": {}}
    assert _keys(evidence([_failed([RIGHT, ghost])], seed)) == {
        "offered_tools_only": 1,
        "first_call_only": 1,
        "one_call_per_reply": 1,
    }
    # No call where one was expected: what a reply cut off by max_tokens leaves.
    assert _keys(evidence([_failed([]), _failed([], expected=0)], seed)) == {
        "one_call_per_reply": 1
    }
    extra = {"name": "area", "arguments": {"width": 2, "height": 3, "unit": "m"}}
    assert _keys(evidence([_failed([extra], expected=0)], seed)) == {"declared_arguments_only": 1}
    # Not function calls (code, text): no component's symptom.
    assert evidence([_failed("def f(): pass"), _failed(None)], seed) == []


@pytest.mark.unit
def test_a_component_already_in_the_base_or_nothing_to_wrap_is_not_offered() -> None:
    seed = SEED.read_text()
    repeated = [_failed([RIGHT, RIGHT])]
    with_it = components.with_component(seed, "unique_calls")
    assert components.present(with_it) == {"unique_calls"}
    assert _keys(evidence(repeated, with_it)) == {"first_call_only": 1, "one_call_per_reply": 1}
    wrapped_away = seed.replace("def answer(task, state):", "def final(task, state):")
    assert evidence(repeated, wrapped_away) == []
    # A base without the primitive a component wraps is not offered that one.
    no_chooser = seed.replace("choose_tools", "ask_model")
    assert _keys(evidence(repeated, no_chooser)) == {"unique_calls": 1, "first_call_only": 1}


def _answer_with(keys: list[str], output: Any, tools: list[dict[str, Any]] = TOOLS) -> Any:
    """The seed's ``answer`` after appending ``keys``, run on ``output`` (our own code: the
    seed and the project's components)."""
    source = SEED.read_text()
    for key in keys:
        source = components.with_component(source, key)
    scope: dict[str, Any] = {}
    exec(compile(source, "harness.py", "exec"), scope)

    state = SimpleNamespace(calls=output, reply={"content": ""})
    return scope["answer"]({"kind": "function_call", "tools": tools}, state)


@pytest.mark.unit
def test_each_component_changes_the_answer_as_it_says_and_they_compose() -> None:
    ghost = {"name": "perimeter", "arguments": {"side": 1}}
    extra = {"name": "area", "arguments": {"width": 2, "height": 3, "unit": "m"}}
    other = {"name": "volume", "arguments": {"side": 1}}
    assert _answer_with(["unique_calls"], [RIGHT, RIGHT, other, RIGHT]) == [RIGHT, other]
    assert _answer_with(["offered_tools_only"], [ghost, RIGHT]) == [RIGHT]
    # "volume" declares no properties: its arguments are dropped; area keeps its own.
    assert _answer_with(["declared_arguments_only"], [extra, other]) == [
        RIGHT,
        {"name": "volume", "arguments": {}},
    ]
    assert _answer_with(["first_call_only"], [RIGHT, other]) == [RIGHT]
    every = [c.key for c in COMPONENTS]
    assert _answer_with(every, [ghost, extra, extra, other]) == [RIGHT]
    # A code or text task's answer is left alone.
    source = components.with_component(SEED.read_text(), "unique_calls")
    scope: dict[str, Any] = {}
    exec(compile(source, "harness.py", "exec"), scope)

    state = SimpleNamespace(calls=[], reply={"content": "```python\ndef f():\n    return 1\n```"})
    assert scope["answer"]({"kind": "code", "tools": []}, state) == "def f():\n    return 1\n"


@pytest.mark.unit
def test_no_component_names_a_task_a_suite_or_a_value() -> None:
    """Generic by construction: what a component reads is the task's kind and tools and
    the calls the model made, never a question, an id or a suite."""
    for c in COMPONENTS:
        assert not re.search(r"prompt|question|\bid\b|bfcl|humaneval|simple_", c.code), c.key
        assert 'task["' not in c.code.replace('task["tools"]', "")


@pytest.mark.unit
def test_a_component_reply_becomes_a_patch_only_for_an_offered_component() -> None:
    sources = {"harness.py": SEED.read_text()}
    found = evidence([_failed([RIGHT, RIGHT])], sources["harness.py"])
    offer = moves.Offer("component", components=tuple(found))
    schema = edit_protocol.reply_schema(edit_protocol_targets(sources), offer)
    assert schema["properties"]["component"]["enum"] == [
        "unique_calls",
        "first_call_only",
        "one_call_per_reply",
    ]
    reply = json.dumps({"component": "unique_calls", "rationale": "the model repeats calls"})
    made = edit_protocol.to_proposal(reply, sources, edit_protocol_targets(sources), offer)
    assert isinstance(made, Proposal) and made.rationale == "the model repeats calls"
    after = apply_edits({"harness.py": sources["harness.py"].encode()}, made.edits)
    assert (after["harness.py"] or b"").decode() == components.with_component(
        sources["harness.py"], "unique_calls"
    )
    not_offered = json.dumps({"component": "offered_tools_only", "rationale": "x"})
    refused = edit_protocol.to_proposal(not_offered, sources, edit_protocol_targets(sources), offer)
    assert isinstance(refused, PatchRejected) and "was not offered" in str(refused)
    assert moves.possible(["component"], None, [], found) == ["component"]
    assert moves.possible(["component"], None, [], []) == []


def edit_protocol_targets(sources: dict[str, str]) -> Targets:
    return find_targets(sources)


@pytest.mark.unit
def test_only_a_top_level_answer_is_wrapped() -> None:
    seed = SEED.read_text()
    renamed = seed.replace("def answer(task, state):", "def final(task, state):")
    for source in (
        renamed + "\nclass Helper:\n    def answer(task, state):\n        return None\n",
        renamed + '\nNOTE = """def answer(task, state):"""\n',
        "def answer(task, state:\n",  # does not parse
    ):
        assert not components.wraps(source)
        assert evidence([_failed([RIGHT, RIGHT])], source) == []
        sources = {"harness.py": source}
        reply = json.dumps({"component": "unique_calls", "rationale": "r"})
        offer = moves.Offer("component", components=(components.Evidence("unique_calls", "", 1),))
        made = edit_protocol.to_proposal(reply, sources, Targets((), ()), offer)
        assert isinstance(made, PatchRejected) and "answer(task, state)" in str(made)


@pytest.mark.unit
def test_components_leave_what_is_not_a_call_alone() -> None:
    """A model's odd output (no name, arguments as text, a bare string) passes through
    every component without an error; a call naming no offered function is dropped."""
    odd = ["text", {"name": "area", "arguments": "width=2"}, None]
    every = [c.key for c in COMPONENTS if c.key != "first_call_only"]
    nameless = {"arguments": {"x": 1}}
    assert _answer_with(every, [*odd, nameless, RIGHT, RIGHT]) == [*odd, RIGHT]
    assert _answer_with(["unique_calls"], [{"name": "area", "arguments": {"w": {1, 2}}}] * 2) == [
        {"name": "area", "arguments": {"w": {1, 2}}}
    ]


class _Model:
    """``ctx.model`` recording what each call asked for; it answers one call, twice."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def chat(self, messages: Any, **options: Any) -> dict[str, Any]:
        self.asked.append(options)
        call = {"id": "c1", **RIGHT}
        calls = [call] if options.get("parallel_tool_calls") is False else [call, call]
        return {"content": "", "tool_calls": calls if options.get("tools") else []}


class _Tools:
    def __init__(self) -> None:
        self.called: list[str] = []

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        self.called.append(name)
        return "done"


@pytest.mark.unit
def test_one_call_per_reply_asks_the_model_for_one_call_and_leaves_the_rest_of_ctx() -> None:
    """The seed with the component: every ask that offers tools says
    ``parallel_tool_calls=False`` (the model then writes one call); one without tools is sent
    as before; host-side tools still run through ``ctx.tools``."""
    source = components.with_component(SEED.read_text(), "one_call_per_reply")
    scope: dict[str, Any] = {}
    exec(compile(source, "harness.py", "exec"), scope)

    model, tools = _Model(), _Tools()
    ctx = SimpleNamespace(model=model, tools=tools, ToolError=RuntimeError, next_turn=dict)
    task = {"kind": "function_call", "prompt": [{"role": "user", "content": "q"}], "tools": TOOLS}
    assert scope["solve"](task, ctx)["output"] == [RIGHT]
    sent = {"max_tokens": 512, "temperature": 0.0, "response_schema": None}
    assert model.asked == [{"tools": TOOLS, **sent, "parallel_tool_calls": False}]
    # Host-side tools: the call runs through the real ctx.tools, the loop goes on.
    ctx.next_turn = lambda: {"done": True}
    scope["solve"]({**task, "kind": "tool_use"}, ctx)
    assert tools.called and all(a["parallel_tool_calls"] is False for a in model.asked)
    # No tools offered: several calls allowed, as the model's own default.
    model.asked.clear()
    scope["solve"]({**task, "kind": "text", "tools": []}, ctx)
    assert model.asked == [{"tools": None, **sent, "parallel_tool_calls": True}]
    # A harness that asks positionally, or says what it wants, is served the same way.
    proxy = scope["_OneCallContext"](ctx)
    model.asked.clear()
    proxy.model.chat([], TOOLS, 256)
    proxy.model.chat([], TOOLS, parallel_tool_calls=True)
    assert [(a["max_tokens"], a["parallel_tool_calls"]) for a in model.asked] == [
        (256, False),
        (512, True),
    ]
    # A copy of the proxy (no _ctx yet while it is rebuilt) does not recurse.
    assert copy.copy(proxy).tools is tools
