"""The edit protocol for small models: one typed operation on a named target, under a grammar.

A 135M model cannot copy a line of code exactly, so it is never asked to: the harness's
targets (:mod:`daemon.patches.targets`) are listed, and the reply's JSON schema offers only
those. Every reply the grammar lets through names a real target, so it applies; a constant
gets a value of its own type written by the host, so it compiles; only the one line of a
statement edit is the model's own code. The operations:

* ``set``: a constant to a new value. Numbers and switches choose from a few values around
  the current one (those already tried on this version are left out); prompt texts and
  patterns take any text.
* ``replace``: a simple statement by one line of code.
* ``insert``: one line of code before a statement inside a function.

Larger models keep the free-text protocol (search/replace blocks or unified diffs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from daemon.patches import ParseFailure, PatchRejected, Proposal
from daemon.patches.diff import parse_unified_diff
from daemon.patches.operations import (
    InsertStatement,
    Operation,
    ReplaceStatement,
    SetConstant,
    apply_operation,
)
from daemon.patches.targets import ConstantTarget, Targets, Value
from daemon.patches.tree import render_git_diff

RATIONALE_CHARS = 200
CODE_CHARS = 120
# Under the static stage's longest-encoded-run screen, so that prose never trips it.
TEXT_CHARS = 240
# What a reply may need at most, kept free of the prompt in the model's context: the longest
# the schema allows (a text value and a rationale, framing) at a pessimistic 1.5 characters
# a token. A reply cut short is no JSON and is lost.
REPLY_TOKENS = 400

SYSTEM = """\
You improve an agent harness: the Python code around a language model that solves tasks.
You see the harness with line numbers, its edit targets, how it did on development tasks
and what was tried before. Propose ONE edit that makes it solve more tasks, spend fewer
tokens, or claim success only when it is right. Reply with JSON:

{"edit": {"op": "set", "name": CONSTANT, "value": NEW VALUE}, "rationale": WHY}
{"edit": {"op": "replace", "line": "FILE:LINE", "code": ONE LINE OF PYTHON}, "rationale": WHY}
{"edit": {"op": "insert", "before": "FILE:LINE", "code": ONE LINE OF PYTHON}, "rationale": WHY}

"set" gives a constant a new value, "replace" rewrites the statement starting on that line,
"insert" adds a line before it (indentation is added for you). Do not repeat an edit that
was already tried."""


_FACTORS = (0.25, 0.5, 0.75, 1.5, 2.0, 4.0)


def alternatives(constant: ConstantTarget) -> list[Value]:
    """Values offered for a number or switch: a few steps either side of the current one."""
    value = constant.value
    if constant.kind == "bool":
        return [not value]
    if constant.kind == "int" and isinstance(value, int):
        if abs(value) <= 8:
            steps = {value - 2, value - 1, value + 1, value + 2, 2 * value, 4 * value}
            whole = sorted(v for v in steps if v >= 0 or value < 0)
        else:
            whole = sorted({round(value * f) for f in _FACTORS})
        return [v for v in whole if v != value]
    if constant.kind == "float" and isinstance(value, int | float):
        if value == 0:
            return [0.1, 0.5, 1.0]
        fractional = sorted({float(f"{value * f:.3g}") for f in _FACTORS})
        return [v for v in fractional if v != value]
    return []


def _free_text(constant: ConstantTarget) -> dict[str, Any]:
    limit = TEXT_CHARS if constant.kind == "text" else CODE_CHARS
    return {"type": "string", "maxLength": limit}


def _branch(op: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"op": {"const": op}, **fields},
        "required": ["op", *fields],
    }


def statement_labels(targets: Targets) -> tuple[list[str], list[str]]:
    """Which statements ``replace`` and ``insert`` may name: statements inside functions
    (module-level lines are imports and constants, which ``set`` covers)."""
    inside = [s for s in targets.statements if s.indent]
    return [s.label for s in inside if s.replaceable], [s.label for s in inside]


def operations_schema(
    targets: Targets, offered: Callable[[Operation], bool] = lambda op: True
) -> dict[str, Any]:
    """The reply's JSON schema; ``offered`` drops operations known to lead nowhere new
    (a constant's value already tried on this version)."""
    branches: list[dict[str, Any]] = []
    for constant in targets.constants:
        if constant.kind in ("text", "pattern"):
            value: dict[str, Any] = _free_text(constant)
        else:
            values = [v for v in alternatives(constant) if offered(SetConstant(constant.label, v))]
            if not values:
                continue
            value = {"enum": values}
        branches.append(_branch("set", {"name": {"const": constant.label}, "value": value}))
    replaceable, insertable = statement_labels(targets)
    code = {"type": "string", "maxLength": CODE_CHARS}
    if replaceable:
        branches.append(_branch("replace", {"line": {"enum": replaceable}, "code": code}))
    if insertable:
        branches.append(_branch("insert", {"before": {"enum": insertable}, "code": code}))
    return {
        "type": "object",
        "properties": {
            "edit": {"anyOf": branches},
            "rationale": {"type": "string", "maxLength": RATIONALE_CHARS},
        },
        "required": ["edit", "rationale"],
    }


def _shown(value: Value) -> str:
    return json.dumps(value, ensure_ascii=False)


def targets_section(sources: Mapping[str, str], targets: Targets) -> str:
    """The harness as the protocol shows it: numbered source, then its constants."""
    parts = []
    for name, text in sorted(sources.items()):
        numbered = "\n".join(f"{i:3d}| {line}" for i, line in enumerate(text.split("\n"), 1))
        parts.append(f"{name}\n{numbered.rstrip()}")
    constants = []
    for c in targets.constants:
        what = {"text": "prompt text", "pattern": "regular expression"}.get(c.kind, c.kind)
        comment = f" ({c.comment})" if c.comment else ""
        options = alternatives(c)
        choice = f"; choose from {', '.join(_shown(v) for v in options)}" if options else ""
        constants.append(f"- {c.label} = {_shown(c.value)}: {what}{comment}{choice}")
    parts.append("# Constants you can set\n" + ("\n".join(constants) or "none"))
    return "\n\n".join(parts)


def _operation(edit: Any) -> Operation:
    if not isinstance(edit, dict):
        raise TypeError("edit is not an object")
    op = edit.get("op")
    if op == "set":
        return SetConstant(str(edit["name"]), edit["value"])
    if op == "replace":
        return ReplaceStatement(str(edit["line"]), str(edit["code"]))
    if op == "insert":
        return InsertStatement(str(edit["before"]), str(edit["code"]))
    raise KeyError(f"unknown op {op!r}")


def read_reply(content: str) -> tuple[Operation, str] | ParseFailure:
    """A reply's operation and rationale, or a ParseFailure when it is not the protocol's
    JSON (e.g. cut off, or another protocol's text)."""
    try:
        # Not strict: llama.cpp's JSON grammar lets raw control characters into strings.
        data = json.loads(content, strict=False)
        return _operation(data["edit"]), str(data.get("rationale", "")).strip()
    except (ValueError, KeyError, TypeError) as exc:
        return ParseFailure(f"not an edit operation ({exc})", content)


def to_proposal(
    content: str, sources: Mapping[str, str], targets: Targets
) -> Proposal | ParseFailure | PatchRejected:
    """The reply as a patch of ``sources``: a Proposal (a normalised diff), a ParseFailure
    when it is not the protocol's JSON (e.g. cut off), or PatchRejected when the operation
    cannot be carried out (its reason says why)."""
    read = read_reply(content)
    if isinstance(read, ParseFailure):
        return read
    op, rationale = read
    try:
        file, new_text = apply_operation(sources, targets, op)
    except PatchRejected as exc:
        return exc
    diff = render_git_diff({file: sources[file].encode("utf-8")}, {file: new_text.encode("utf-8")})
    edits = tuple(parse_unified_diff(diff)) if diff else ()  # () changes nothing: refused later
    return Proposal(rationale=rationale, edits=edits, format="diff")


def preview(sources: Mapping[str, str], targets: Targets, op: Operation) -> dict[str, str]:
    """``sources`` after ``op`` (for duplicate checks before anything is asked)."""
    file, new_text = apply_operation(sources, targets, op)
    return {**sources, file: new_text}
