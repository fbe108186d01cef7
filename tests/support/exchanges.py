"""Task shapes and exchanges for provenance tests: a real BFCL task and a real HumanEval task
shape, a model reply, a request that asks the model (tests/evaluation/test_provenance*.py)."""

from __future__ import annotations

from typing import Any

from daemon.providers.base import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage
from daemon.tasks import Task

QUESTION = "Find the area of a triangle with a base of 10 units and height of 5 units."
TOOL = ToolSpec(
    name="calculate_triangle_area",
    description="Calculate the area of a triangle given its base and height.",
    parameters={
        "type": "object",
        "properties": {
            "base": {"type": "integer"},
            "height": {"type": "integer"},
            "unit": {"type": "string", "default": "units"},
        },
        "required": ["base", "height"],
    },
)
CALL = {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}
BFCL = Task(
    id="t",
    suite="bfcl",
    kind="function_call",
    prompt=[Message(role="user", content=QUESTION)],
    tools=[TOOL],
)
CODE_PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'
CODE = Task(
    id="c",
    suite="humaneval",
    kind="code",
    prompt=[
        Message(role="system", content="You write Python."),
        Message(role="user", content=f"Complete this function:\n{CODE_PROMPT}"),
    ],
    meta={"entry_point": "add", "code_prompt": CODE_PROMPT},
)


def reply(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> ChatResponse:
    return ChatResponse(
        content=content,
        tool_calls=[
            ToolCall(id=f"c{i}", name=c["name"], arguments=c["arguments"])
            for i, c in enumerate(calls or [])
        ],
        usage=Usage(prompt_tokens=10, completion_tokens=5),
        model="m",
    )


def ask(task: Task, *extra: str) -> ChatRequest:
    messages = [*task.prompt, *(Message(role="user", content=e) for e in extra)]
    return ChatRequest(messages=messages, tools=task.tools)
