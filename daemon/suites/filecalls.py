"""The ``calls`` rule of file suites: BFCL's function-call checker on a task's own tools.

A task's tools are JSON Schema (as a harness sees them); BFCL's checker reads BFCL's type
names, so each tool is also kept as a BFCL function doc (``number`` -> ``float``, ``object``
-> ``dict``). ``expected`` lists the calls with BFCL-style allowed values per argument:
``[{"name": "f", "arguments": {"x": [1, 2], "unit": ["cm", ""]}}]`` (``""`` among them:
the argument may be left out), or BFCL's own ``[{"f": {"x": [1, 2]}}]``. ``[]`` means no
tool should be called. One expected call is checked like BFCL's ``multiple`` category
(exactly one call, of the named tool), several like ``parallel`` (as many calls, any order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from daemon.suites.bfcl import as_bfcl_calls, concrete
from daemon.suites.bfcl_checker import Answer, check_calls
from daemon.suites.filerules import BadKey, shown
from daemon.tasks import CheckResult

# JSON Schema type -> BFCL's type name (bfcl_checker's _PYTHON_TYPES).
_BFCL_TYPES = {
    "string": "string",
    "integer": "integer",
    "number": "float",
    "boolean": "boolean",
    "array": "array",
    "object": "dict",
}


def _bfcl_type(schema: Any, key: str, *, nested: bool) -> dict[str, Any]:
    if type(schema) is not dict:
        raise BadKey(key, f"expected a JSON Schema object, got {shown(schema)}")
    kind = schema.get("type")
    if kind not in _BFCL_TYPES:
        raise BadKey(
            f"{key}.type",
            f"a 'calls' check needs one of {', '.join(_BFCL_TYPES)}, got {shown(kind)}",
        )
    out: dict[str, Any] = {"type": _BFCL_TYPES[kind]}
    if kind == "array" and not nested:
        out["items"] = _bfcl_type(schema.get("items"), f"{key}.items", nested=True)
    return out


def bfcl_function(tool: dict[str, Any], key: str) -> dict[str, Any]:
    """A tool (name, description, JSON Schema parameters) as the doc BFCL's checker reads."""
    parameters = tool["parameters"]
    properties = parameters.get("properties") or {}
    if type(properties) is not dict:
        raise BadKey(f"{key}.parameters.properties", "expected an object of parameter schemas")
    required = parameters.get("required") or []
    if type(required) is not list or any(r not in properties for r in required):
        raise BadKey(f"{key}.parameters.required", "expected a list of names among the properties")
    return {
        "name": tool["name"],
        "parameters": {
            "type": "dict",
            "properties": {
                name: _bfcl_type(schema, f"{key}.parameters.properties.{name}", nested=False)
                for name, schema in properties.items()
            },
            "required": list(required),
        },
    }


def _expected_call(item: Any, key: str) -> tuple[str, Any]:
    if type(item) is dict and set(item) == {"name", "arguments"}:
        return item["name"], item["arguments"]
    if type(item) is dict and len(item) == 1:
        ((name, arguments),) = item.items()
        return name, arguments
    raise BadKey(key, f'expected {{"name": ..., "arguments": {{...}}}}, got {shown(item)}')


def parse_answers(expected: Any, functions: list[dict[str, Any]]) -> list[Answer]:
    """``expected`` as BFCL possible answers, checked against the task's tools."""
    if type(expected) is not list:
        raise BadKey("expected", f"a 'calls' check needs a list of calls, got {shown(expected)}")
    by_name = {f["name"]: f for f in functions}
    answers: list[Answer] = []
    for index, item in enumerate(expected):
        key = f"expected[{index}]"
        name, arguments = _expected_call(item, key)
        if name not in by_name:
            raise BadKey(f"{key}.name", f"{shown(name)} is not one of the task's tools")
        if type(arguments) is not dict:
            raise BadKey(f"{key}.arguments", f"expected an object, got {shown(arguments)}")
        params = by_name[name]["parameters"]
        for param, allowed in arguments.items():
            where = f"{key}.arguments.{param}"
            if param not in params["properties"]:
                raise BadKey(where, f"tool {name!r} has no parameter {param!r}")
            if type(allowed) is not list or not allowed:
                raise BadKey(
                    where,
                    'expected a non-empty list of allowed values, e.g. ["Paris"] ("" among '
                    f"them: may be left out), got {shown(allowed)}",
                )
        for param in params["required"]:
            if param not in arguments:
                raise BadKey(
                    f"{key}.arguments", f"tool {name!r} requires {param!r}: list its allowed values"
                )
        answers.append({name: arguments})
    return answers


@dataclass(frozen=True)
class Calls:
    functions: list[dict[str, Any]]
    answers: list[Answer]

    @property
    def category(self) -> str:
        if not self.answers:
            return "irrelevance"
        return "multiple" if len(self.answers) == 1 else "parallel"

    def check(self, output: Any, expected: Any) -> CheckResult:
        calls = as_bfcl_calls(self.functions, output)
        verdict = check_calls(self.category, self.functions, calls, self.answers)
        detail = "ok" if verdict.valid else f"{verdict.error_type}: {verdict.error}"
        return CheckResult(passed=verdict.valid, detail=detail)

    def reference(self) -> list[dict[str, Any]]:
        """The calls made of each argument's first allowed value that is not ``""``."""
        calls = []
        for answer in self.answers:
            for name, allowed_by_param in answer.items():
                arguments = {}
                for param, allowed in allowed_by_param.items():
                    present = [value for value in allowed if value != ""]
                    if present:
                        arguments[param] = concrete(present[0])
                calls.append({"name": name, "arguments": arguments})
        return calls
