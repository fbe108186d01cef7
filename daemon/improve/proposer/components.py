"""The component move: one of the daemon's generic harness components, chosen on dev evidence.

A 135M proposer cannot write a function, but the failures it is shown often have a cause a
few lines of generic harness code remove: the model repeats one call, names a function the
task did not offer, adds an argument the function does not declare, or makes several calls
where the task wanted one. Each component here is such a change, written once by the
project as a wrapper of one of the seed's primitives (``answer``, ``choose_tools``),
appended to the harness so that it applies to any version that still has the primitive.
Like DSPy's modules, the proposer composes what it cannot write; what it chooses is which,
from evidence.

The evidence is the daemon's, from the base's dev report only: for each component, how many
failed dev tasks show the symptom it removes (:func:`evidence`). Only components with some
evidence, not already in the base (each carries a marker line) and whose program was not
tried on the base are offered, and the reply's grammar is an enum of exactly those. The
patch that results is an ordinary patch: every gate judges it (a component that removes no
failure changes nothing on dev and is stopped there; one that hurts fails the dev screen).

Task-independent by construction: no component reads a task's question or names a task,
suite or value; each transforms the calls the model made, using only the task's own tool
schemas, or (``one_call_per_reply``) asks the model for one call in every reply that
offers tools, which suits suites whose tasks want one call a reply and costs those that
want several in one (the held-out test tells).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemon import pyast

MARKER = "# harnessd component: "


def _calls(output: Any) -> list[dict[str, Any]] | None:
    """``output`` as a list of calls with dict arguments (None: not a function-call answer)."""
    if not isinstance(output, list):
        return None
    calls = [c for c in output if isinstance(c, dict) and isinstance(c.get("name"), str)]
    return calls if len(calls) == len(output) else None


def _tools(tools: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Each offered tool's declared parameter names."""
    out: dict[str, set[str]] = {}
    for tool in tools:
        props = (tool.get("parameters") or {}).get("properties") or {}
        out[str(tool.get("name"))] = set(props)
    return out


def _repeats(calls: list[dict[str, Any]], tools: dict[str, set[str]], expected: int) -> bool:
    keys = [json.dumps(c, sort_keys=True, default=str) for c in calls]
    return len(set(keys)) < len(keys)


def _unoffered(calls: list[dict[str, Any]], tools: dict[str, set[str]], expected: int) -> bool:
    return any(c["name"] not in tools for c in calls)


def _undeclared(calls: list[dict[str, Any]], tools: dict[str, set[str]], expected: int) -> bool:
    return any(
        isinstance(c.get("arguments"), dict) and set(c["arguments"]) - tools.get(c["name"], set())
        for c in calls
        if c["name"] in tools
    )


def _too_many(calls: list[dict[str, Any]], tools: dict[str, set[str]], expected: int) -> bool:
    return expected == 1 and len(calls) > 1


def _not_one(calls: list[dict[str, Any]], tools: dict[str, set[str]], expected: int) -> bool:
    # None at all is what a reply cut off by max_tokens leaves: under a grammar a small
    # model repeats its call until the tokens run out, and the unfinished list holds none.
    return expected == 1 and len(calls) != 1


Symptom = Callable[[list[dict[str, Any]], dict[str, set[str]], int], bool]


@dataclass(frozen=True)
class Component:
    key: str
    summary: str  # what it does, for the proposer
    symptom: Symptom  # does a failed dev task's answer show what it removes?
    code: str  # appended to harness.py (after the marker line)
    primitive: str = "answer"  # the seed's function it wraps

    def text(self) -> str:
        return f"{MARKER}{self.key}\n{self.code.strip()}\n"


COMPONENTS: tuple[Component, ...] = (
    Component(
        "unique_calls",
        "drop exact repeats of a function call (the first is kept)",
        _repeats,
        '''
import json

_answer_before_unique_calls = answer


def answer(task, state):
    """The answer without exact repeats of a call."""
    output = _answer_before_unique_calls(task, state)
    if isinstance(output, list):
        output = list({json.dumps(c, sort_keys=True, default=str): c for c in output}.values())
    return output
''',
    ),
    Component(
        "offered_tools_only",
        "drop calls to functions the task did not offer",
        _unoffered,
        '''
_answer_before_offered_tools_only = answer


def answer(task, state):
    """The answer without calls to functions the task did not offer (anything that is not
    a call is left as it is)."""
    output = _answer_before_offered_tools_only(task, state)
    if isinstance(output, list):
        offered = {tool.get("name") for tool in task["tools"]}
        output = [c for c in output if not isinstance(c, dict) or c.get("name") in offered]
    return output
''',
    ),
    Component(
        "declared_arguments_only",
        "drop arguments a called function does not declare",
        _undeclared,
        '''
_answer_before_declared_arguments_only = answer


def answer(task, state):
    """The answer without arguments the called function does not declare (a call to a
    function not offered, or whose arguments are no mapping, is left as it is)."""
    output = _answer_before_declared_arguments_only(task, state)
    if isinstance(output, list):
        declared = {
            tool.get("name"): set((tool.get("parameters") or {}).get("properties") or {})
            for tool in task["tools"]
        }
        output = [
            {
                **c,
                "arguments": {k: v for k, v in c["arguments"].items() if k in declared[c["name"]]},
            }
            if isinstance(c, dict)
            and isinstance(c.get("arguments"), dict)
            and c.get("name") in declared
            else c
            for c in output
        ]
    return output
''',
    ),
    Component(
        "first_call_only",
        "keep only the first function call (every task: for suites whose tasks want one)",
        _too_many,
        '''
_answer_before_first_call_only = answer


def answer(task, state):
    """The answer's first call only."""
    output = _answer_before_first_call_only(task, state)
    if isinstance(output, list):
        output = output[:1]
    return output
''',
    ),
    Component(
        "one_call_per_reply",
        "ask the model for one function call per reply (its list of calls closes after the "
        "first, so it cannot repeat a call until its tokens run out; for tasks that want one "
        "call)",
        _not_one,
        '''
_choose_tools_before_one_call_per_reply = choose_tools


class _OneCallModel:
    """``ctx.model`` asking for one call per reply whenever tools are offered."""

    def __init__(self, model):
        self._model = model

    def chat(
        self,
        messages,
        tools=None,
        max_tokens=512,
        temperature=0.0,
        response_schema=None,
        parallel_tool_calls=None,
    ):
        if parallel_tool_calls is None:
            parallel_tool_calls = not tools
        return self._model.chat(
            messages,
            tools=tools,
            max_tokens=max_tokens,
            temperature=temperature,
            response_schema=response_schema,
            parallel_tool_calls=parallel_tool_calls,
        )


class _OneCallContext:
    """``ctx`` with that model; everything else is ``ctx``'s own."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.model = _OneCallModel(ctx.model)

    def __getattr__(self, name):
        if name == "_ctx" or name.startswith("__"):  # not set yet (a copy): no recursion
            raise AttributeError(name)
        return getattr(self._ctx, name)


def choose_tools(ctx, state, tools, dispatch):
    """The model asked for one call per reply."""
    return _choose_tools_before_one_call_per_reply(_OneCallContext(ctx), state, tools, dispatch)
''',
        primitive="choose_tools",
    ),
)
BY_KEY = {c.key: c for c in COMPONENTS}


@dataclass(frozen=True)
class Evidence:
    """A component the move may offer, and how many failed dev tasks show its symptom."""

    key: str
    summary: str
    failed_tasks: int


@dataclass(frozen=True)
class FailedAnswer:
    """A failed dev task as the evidence reads it: the harness's answer, the task's tools
    (as the harness saw them) and how many calls the verifier expected (0: not known)."""

    output: Any
    tools: Sequence[Mapping[str, Any]]
    expected_calls: int


def _functions(source: str) -> set[str]:
    """The functions ``source`` (a harness file) defines at its top level (a method, a comment
    or a string of a name is no such definition); none if it does not parse."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def wraps(source: str) -> bool:
    """Whether ``source`` defines ``answer``, which components are appended beside (one that
    wraps another primitive needs that one in the same file too)."""
    return "answer" in _functions(source)


def present(source: str) -> set[str]:
    """The components already in a harness file (by their marker lines)."""
    return {line[len(MARKER) :].strip() for line in source.splitlines() if line.startswith(MARKER)}


def evidence(failed: Sequence[FailedAnswer], source: str) -> list[Evidence]:
    """The components a base whose harness file is ``source`` may take, with the failed dev
    tasks that show each one's symptom; those with none, or already present, or with no
    primitive to wrap in ``source``, are left out."""
    defined = _functions(source)
    if "answer" not in defined:
        return []
    have = present(source)
    out = []
    for c in COMPONENTS:
        if c.key in have or c.primitive not in defined:
            continue
        count = 0
        for f in failed:
            calls = _calls(f.output)
            if calls is not None and c.symptom(calls, _tools(f.tools), f.expected_calls):
                count += 1
        if count:
            out.append(Evidence(c.key, c.summary, count))
    return out


def with_component(source: str, key: str) -> str:
    """``source`` (a harness file) with component ``key`` appended."""
    return source.rstrip("\n") + "\n\n\n" + BY_KEY[key].text()


SYSTEM = """\
You improve an agent harness by adding ONE of the daemon's components: small, generic pieces
of harness code. You see each component with how many failed development tasks show the
problem it removes, and the failed tasks themselves. Choose the component that would fix the
most failures without breaking solved tasks. Reply with JSON:

{"component": NAME, "rationale": WHY}"""


def schema(offered: Sequence[Evidence], rationale_chars: int) -> dict[str, Any]:
    """Only the offered components' names: the grammar lets nothing else through."""
    return {
        "type": "object",
        "properties": {
            "component": {"enum": [e.key for e in offered]},
            "rationale": {"type": "string", "maxLength": rationale_chars},
        },
        "required": ["component", "rationale"],
    }


def section(offered: Sequence[Evidence]) -> str:
    lines = [
        f"- {e.key}: {e.summary} (failed dev tasks showing it: {e.failed_tasks})" for e in offered
    ]
    return "\n".join(lines) or "none"
