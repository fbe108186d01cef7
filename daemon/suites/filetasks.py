"""One line of a task file: checked field by field, and the task a harness will see.

The core format (one JSON object per line)::

    {"id": "t1", "prompt": "text, or [{role, content}, ...]",
     "tools": [{"name", "description", "parameters"}],          (optional)
     "expected": <any JSON>,
     "check": {"type": "exact" | "number" | "regex" | "calls" | "python", ...}}

plus two optional fields of our own: ``reference`` (an output that passes, for smoke tests
and the suite's own tests) and ``notes`` (anything, for people: never shown to a harness or
a checker). Every other key is refused, as in policies: a typo must not silently drop a
field. Problems raise :class:`BadKey` naming the key; the reader adds file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.providers.base import Message, ToolSpec
from daemon.suites.filecalls import Calls, bfcl_function, parse_answers
from daemon.suites.filepython import Python, parse_python_rule
from daemon.suites.filerules import (
    CHECK_TYPES,
    BadKey,
    Exact,
    Number,
    Regex,
    parse_host_rule,
    shown,
)
from daemon.tasks import Task, TaskKind

SUITE_TAG = "file"  # what a harness sees as task["suite"]: never the file's name or path
KEYS = ("id", "prompt", "tools", "expected", "check", "reference", "notes")
REQUIRED = ("id", "prompt", "expected", "check")
ROLES = ("system", "user", "assistant")
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./@+-]{0,199}$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
Rule = Exact | Number | Regex | Calls | Python


@dataclass(frozen=True)
class FileTask:
    task: Task  # as the harness sees it
    expected: Any
    rule: Rule
    reference: Any
    has_reference: bool

    @property
    def id(self) -> str:
        return self.task.id


def _prompt(value: Any) -> list[Message]:
    if isinstance(value, str):
        if not value.strip():
            raise BadKey("prompt", "expected non-empty text or a list of messages")
        return [Message(role="user", content=value)]
    if type(value) is not list or not value:
        raise BadKey("prompt", f"expected text or a non-empty list of messages, got {shown(value)}")
    messages = []
    for index, item in enumerate(value):
        key = f"prompt[{index}]"
        if type(item) is not dict or set(item) != {"role", "content"}:
            raise BadKey(key, f'expected {{"role": ..., "content": ...}}, got {shown(item)}')
        if item["role"] not in ROLES:
            raise BadKey(
                f"{key}.role", f"expected one of {', '.join(ROLES)}, got {shown(item['role'])}"
            )
        if not isinstance(item["content"], str):
            raise BadKey(f"{key}.content", f"expected text, got {shown(item['content'])}")
        messages.append(Message(role=item["role"], content=item["content"]))
    return messages


def _tool(value: Any, key: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise BadKey(
            key, f"expected an object with name, description, parameters, got {shown(value)}"
        )
    unknown = sorted(set(value) - {"name", "description", "parameters"})
    if unknown:
        raise BadKey(f"{key}.{unknown[0]}", "unknown key (allowed: name, description, parameters)")
    name = value.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise BadKey(f"{key}.name", f"expected 1-64 of A-Z a-z 0-9 _ -, got {shown(name)}")
    description = value.get("description", "")
    if not isinstance(description, str):
        raise BadKey(f"{key}.description", f"expected text, got {shown(description)}")
    parameters = value.get("parameters", {"type": "object", "properties": {}})
    if type(parameters) is not dict or parameters.get("type", "object") != "object":
        raise BadKey(f"{key}.parameters", 'expected a JSON Schema with "type": "object"')
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", **parameters},
    }


def _tools(value: Any) -> list[dict[str, Any]]:
    if type(value) is not list:
        raise BadKey("tools", f"expected a list of tools, got {shown(value)}")
    tools = [_tool(item, f"tools[{i}]") for i, item in enumerate(value)]
    names = [t["name"] for t in tools]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise BadKey(f"tools[{index}].name", f"{name!r} is already the name of another tool")
    return tools


def _rule(
    data: dict[str, Any], tools: list[dict[str, Any]], base: Path, sources: dict[Path, str]
) -> Rule:
    check = data["check"]
    if type(check) is not dict:
        raise BadKey("check", f'expected an object like {{"type": "exact"}}, got {shown(check)}')
    kind = check.get("type")
    if kind not in CHECK_TYPES:
        raise BadKey("check.type", f"expected one of {', '.join(CHECK_TYPES)}, got {shown(kind)}")
    if kind == "python":
        return parse_python_rule(check, base, sources)
    if kind == "calls":
        if len(check) > 1:
            raise BadKey(
                f"check.{next(k for k in check if k != 'type')}", "a 'calls' check has no options"
            )
        if not tools:
            raise BadKey("tools", "a 'calls' check needs the tools the model may call")
        functions = [bfcl_function(t, f"tools[{i}]") for i, t in enumerate(tools)]
        return Calls(functions, parse_answers(data["expected"], functions))
    return parse_host_rule(kind, check, data["expected"])


def kind_of(rule: Rule) -> TaskKind:
    if isinstance(rule, Calls):
        return "function_call"
    if isinstance(rule, Python) and rule.entry_point is not None:
        return "code"
    return "answer"


def parse_task(data: Any, base: Path, sources: dict[Path, str]) -> FileTask:
    """One line's object as a task; ``base`` is the file's folder (for checker paths)."""
    if type(data) is not dict:
        raise BadKey("(line)", f"expected one JSON object per line, got {shown(data)}")
    for key in data:
        if key not in KEYS:
            raise BadKey(key, f"unknown key (allowed: {', '.join(KEYS)})")
    for key in REQUIRED:
        if key not in data:
            raise BadKey(key, "missing: every task needs " + ", ".join(REQUIRED))
    task_id = data["id"]
    if not isinstance(task_id, str) or not ID.match(task_id):
        raise BadKey(
            "id",
            "expected 1-200 of A-Z a-z 0-9 _ . / @ + - (a letter or digit first), "
            f"got {shown(task_id)}",
        )
    tools = _tools(data.get("tools", []))
    rule = _rule(data, tools, base, sources)
    meta = (
        {"entry_point": rule.entry_point} if isinstance(rule, Python) and rule.entry_point else {}
    )
    task = Task(
        id=task_id,
        suite=SUITE_TAG,
        kind=kind_of(rule),
        prompt=_prompt(data["prompt"]),
        tools=[ToolSpec(**t) for t in tools],
        meta=meta,
    )
    return FileTask(
        task=task,
        expected=data["expected"],
        rule=rule,
        reference=data.get("reference"),
        has_reference="reference" in data,
    )
