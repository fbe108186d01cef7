"""The seed harness in-process, against a small scripted ctx (the sandbox run is tested elsewhere).

The ctx mirrors the guest runtime's contract (seeds/README.md): ``model.chat`` returns
dicts, ``tools.call`` runs host-side tools, and the three exception classes hang off ctx.
Where a check needs ground truth, the real suites judge the harness's output.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from daemon.suites import load_suite
from daemon.tasks import Task

pytestmark = pytest.mark.unit

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal" / "harness.py"
Reply = dict[str, Any]


def _load_seed() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seed_harness", SEED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # No __pycache__ in the seed folder: new harness versions are copied from it.
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = before
    return module


harness = _load_seed()


class ToolError(Exception):
    pass


class BudgetExhausted(Exception):
    pass


class ModelError(Exception):
    pass


def reply(content: str | None = None, *calls: tuple[str, dict[str, Any]]) -> Reply:
    tool_calls = [{"id": f"call_{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)]
    return {
        "content": content,
        "tool_calls": tool_calls,
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        "finish_reason": "tool_calls" if calls else "stop",
    }


class ScriptedModel:
    """Replies in order; records each request as the gateway would receive it."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        response_schema: dict[str, Any] | None = None,
    ) -> Reply:
        # The request crosses the socket as JSON: anything unserialisable fails here too.
        self.requests.append(json.loads(json.dumps({"messages": messages, "tools": tools})))
        if not self.replies:
            raise BudgetExhausted("no more replies scripted")
        return self.replies.pop(0)


class HostTools:
    def __init__(self, handlers: dict[str, Callable[..., Any]]) -> None:
        self.handlers = handlers
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        if name not in self.handlers:
            raise ToolError(f"no tool named {name}")
        return self.handlers[name](**arguments)


class Ctx:
    ToolError = ToolError
    BudgetExhausted = BudgetExhausted
    ModelError = ModelError

    def __init__(
        self,
        task: dict[str, Any],
        model: ScriptedModel,
        tools: HostTools | None = None,
        turns: list[dict[str, Any]] | None = None,
    ):
        self.task = task
        self.model = model
        self.tools = tools or HostTools({})
        self.scratch = Path("/nonexistent")
        self.turns = list(turns or [])
        self.turns_asked = 0

    def next_turn(self) -> dict[str, Any]:
        self.turns_asked += 1
        return self.turns.pop(0) if self.turns else {"done": True}

    def tokens_left(self) -> int:
        return 4000

    def log(self, *args: Any) -> None:
        pass


def _as_guest_sees(task: Task) -> dict[str, Any]:
    as_json: dict[str, Any] = json.loads(task.model_dump_json())
    return as_json


def _solve(
    task: dict[str, Any],
    replies: list[Reply],
    tools: HostTools | None = None,
    turns: list[dict[str, Any]] | None = None,
) -> Any:
    model = ScriptedModel(replies)
    ctx = Ctx(task, model, tools, turns)
    answer = harness.solve(task, ctx)
    assert ctx.turns == [], "turns left unanswered"
    assert set(answer) == {"output", "claimed_success", "confidence"}
    json.dumps(answer)  # the answer crosses the socket as JSON
    return answer, model


@pytest.fixture(scope="module")
def bfcl(asset_cache: Path) -> Any:
    return load_suite("bfcl:simple,parallel,irrelevance", asset_cache)


@pytest.mark.anyio
async def test_function_call_asks_once_with_the_tools_and_returns_the_calls(bfcl: Any) -> None:
    task = _as_guest_sees(bfcl.task("parallel_0"))
    right = bfcl.reference_output("parallel_0")
    answer, model = _solve(task, [reply(None, *[(c["name"], c["arguments"]) for c in right])])
    assert answer["output"] == right
    assert answer["claimed_success"] is True
    assert len(model.requests) == 1
    assert model.requests[0]["messages"] == task["prompt"]
    assert model.requests[0]["tools"] == task["tools"]
    assert (await bfcl.check("parallel_0", answer["output"], checker=None)).passed


@pytest.mark.anyio
async def test_a_wrong_call_is_returned_as_it_came_and_fails_the_check(bfcl: Any) -> None:
    task = _as_guest_sees(bfcl.task("simple_python_1"))
    answer, _ = _solve(task, [reply(None, ("math_factorial", {"number": 6}))])
    assert answer["output"] == [{"name": "math_factorial", "arguments": {"number": 6}}]
    assert answer["claimed_success"] is True  # naive, as the seed should be
    assert not (await bfcl.check("simple_python_1", answer["output"], checker=None)).passed


@pytest.mark.anyio
async def test_no_call_is_an_empty_list(bfcl: Any) -> None:
    task = _as_guest_sees(bfcl.task("irrelevance_0"))
    answer, model = _solve(task, [reply("None of these tools computes a triangle's area.")])
    assert answer["output"] == []
    assert len(model.requests) == 1
    assert (await bfcl.check("irrelevance_0", answer["output"], checker=None)).passed


CODE_TASK = {
    "id": "HumanEval/x",
    "suite": "humaneval",
    "kind": "code",
    "prompt": [{"role": "user", "content": "Write add(a, b)."}],
    "tools": [],
    "meta": {"entry_point": "add"},
}


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (
            "Here:\n```python\ndef add(a, b):\n    return a + b\n```\nDone.",
            "def add(a, b):\n    return a + b\n",
        ),
        (
            "```py\nx = 1\n```\n```python\ndef add(a, b):\n    return a + b\n```",
            "def add(a, b):\n    return a + b\n",
        ),
        ("```python\ndef add(a, b):\n    return a +", "def add(a, b):\n    return a +"),
        ("def add(a, b):\n    return a + b", "def add(a, b):\n    return a + b"),
    ],
)
def test_code_is_extracted_from_the_reply(content: str, code: str) -> None:
    answer, model = _solve(CODE_TASK, [reply(content)])
    assert answer["output"] == code
    assert answer["claimed_success"] is True
    assert model.requests[0]["tools"] is None


def test_an_empty_reply_claims_nothing() -> None:
    answer, _ = _solve({**CODE_TASK, "kind": "answer"}, [reply(None)])
    assert answer == {"output": "", "claimed_success": False, "confidence": None}


TOOL_TASK = {
    "id": "t1",
    "suite": "demo",
    "kind": "tool_use",
    "prompt": [{"role": "user", "content": "What is the weather in Paris?"}],
    "tools": [
        {
            "name": "weather",
            "description": "Weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ],
    "meta": {},
}


def test_tool_use_runs_the_calls_and_feeds_results_back() -> None:
    tools = HostTools({"weather": lambda city: {"city": city, "sky": "clear"}})
    answer, model = _solve(
        TOOL_TASK,
        [
            reply(None, ("weather", {"city": "Paris"}), ("forecast", {"city": "Paris"})),
            reply("Clear skies in Paris."),
        ],
        tools,
    )
    assert answer["output"] == "Clear skies in Paris."
    assert tools.calls == [("weather", {"city": "Paris"}), ("forecast", {"city": "Paris"})]
    second = model.requests[1]["messages"]
    assert second[1]["role"] == "assistant" and len(second[1]["tool_calls"]) == 2
    assert second[2] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": '{"city": "Paris", "sky": "clear"}',
    }
    assert second[3]["tool_call_id"] == "call_1"
    assert "no tool named forecast" in second[3]["content"]


def test_tool_use_answers_each_turn_then_asks_for_the_next_until_done() -> None:
    tools = HostTools({"weather": lambda city: "sunny", "alert": lambda city: "none"})
    alert = {"name": "alert", "description": "Alerts.", "parameters": {"type": "object"}}
    turns = [{"messages": [{"role": "user", "content": "Any alert there?"}], "tools": [alert]}]
    answer, model = _solve(
        TOOL_TASK,
        [
            reply(None, ("weather", {"city": "Paris"})),
            reply("Sunny."),
            reply(None, ("alert", {"city": "Paris"})),
            reply("No alert."),
        ],
        tools,
        turns,
    )
    assert answer["output"] == "No alert."
    assert tools.calls == [("weather", {"city": "Paris"}), ("alert", {"city": "Paris"})]
    third = model.requests[2]
    assert third["messages"][-1] == {"role": "user", "content": "Any alert there?"}
    assert [t["name"] for t in third["tools"]] == ["alert"]


def test_the_loop_stops_after_max_steps() -> None:
    tools = HostTools({"weather": lambda city: "sunny"})
    endless = [reply(None, ("weather", {"city": "Paris"})) for _ in range(10)]
    answer, model = _solve(TOOL_TASK, endless, tools)
    assert len(model.requests) == harness.MAX_STEPS
    assert answer["output"] == ""
    assert answer["claimed_success"] is False


def test_model_errors_propagate_so_the_run_ends_as_a_crash() -> None:
    class Failing(ScriptedModel):
        def chat(self, *args: Any, **kwargs: Any) -> Reply:
            raise ModelError("provider down")

    task = dict(CODE_TASK)
    with pytest.raises(ModelError, match="provider down"):
        harness.solve(task, Ctx(task, Failing([])))


def test_the_seed_is_small_and_stdlib_only() -> None:
    source = SEED.read_text()
    assert len(source.splitlines()) <= 150
    imports = {
        line.split()[1].split(".")[0]
        for line in source.splitlines()
        if line.startswith(("import ", "from "))
    }
    assert imports <= {"json", "re"}
    for primitive in ("run_loop", "choose_tools", "State", "solve"):
        assert hasattr(harness, primitive)
