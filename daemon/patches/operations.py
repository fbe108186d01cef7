"""Edit operations on named targets (:mod:`daemon.patches.targets`), applied to source text.

An operation names its target by label, never by quoting code, so it cannot fail to find
its place: it either names a target the harness has, or is refused with the reason. Values
are written by the host as Python literals, so a constant edit always compiles; only the
code of a statement edit is the model's own text (one line, re-indented to its place).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from daemon.patches.model import PatchRejected
from daemon.patches.targets import ConstantTarget, StatementTarget, Targets, Value


@dataclass(frozen=True)
class SetConstant:
    target: str  # a constant's label
    value: Value


@dataclass(frozen=True)
class ReplaceStatement:
    target: str  # a statement's label, file:line
    code: str


@dataclass(frozen=True)
class InsertStatement:
    before: str  # a statement's label, file:line
    code: str


Operation = SetConstant | ReplaceStatement | InsertStatement


def literal(constant: ConstantTarget, value: Value) -> str:
    """``value`` as Python source for ``constant``'s literal; PatchRejected if it cannot be."""
    kind = constant.kind
    if kind == "bool" and isinstance(value, bool):
        return repr(value)
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if number == number and abs(number) != float("inf"):
            return repr(number)
    if kind == "text" and isinstance(value, str):
        # JSON's string escapes are all valid in Python, and it never writes a raw newline.
        return json.dumps(value, ensure_ascii=False)
    if kind == "pattern" and isinstance(value, str):
        try:
            re.compile(value)
        except (re.error, RecursionError, OverflowError) as exc:
            raise PatchRejected(
                f"{constant.label}: {value!r} is not a regular expression ({exc})"
            ) from None
        # A raw string reads as written; anything it cannot hold goes through escapes.
        plain = value.isprintable() and '"' not in value and not value.endswith("\\")
        return f'r"{value}"' if plain else json.dumps(value, ensure_ascii=False)
    raise PatchRejected(f"{constant.label} holds a {kind}; {value!r} is not one")


def _one_line(code: str, where: str) -> str:
    """The model's code as one stripped line: its first non-blank line."""
    for line in code.replace("\r", "\n").split("\n"):
        if line.strip():
            return line.strip()
    raise PatchRejected(f"{where}: the operation's code is empty")


def _set_constant(text: str, constant: ConstantTarget, value: Value) -> str:
    lines = text.split("\n")
    (l1, c1), (l2, c2) = constant.start, constant.end
    head = "\n".join([*lines[: l1 - 1], lines[l1 - 1][:c1]])
    tail = "\n".join([lines[l2 - 1][c2:], *lines[l2:]])
    return head + literal(constant, value) + tail


def _replace_lines(text: str, first: int, last: int, new: list[str]) -> str:
    lines = text.split("\n")
    return "\n".join([*lines[: first - 1], *new, *lines[last:]])


def _statement(targets: Targets, label: str) -> StatementTarget:
    statement = targets.statement(label)
    if statement is None:
        raise PatchRejected(f"{label}: no statement starts there")
    return statement


def apply_operation(sources: Mapping[str, str], targets: Targets, op: Operation) -> tuple[str, str]:
    """``(file, its new text)`` after ``op``; PatchRejected naming the problem otherwise.

    ``targets`` must be those of ``sources`` (:func:`daemon.patches.targets.find_targets`).
    """
    if isinstance(op, SetConstant):
        constant = targets.constant(op.target)
        if constant is None:
            raise PatchRejected(f"{op.target}: the harness has no such constant")
        return constant.file, _set_constant(sources[constant.file], constant, op.value)
    if isinstance(op, ReplaceStatement):
        statement = _statement(targets, op.target)
        if not statement.replaceable:
            raise PatchRejected(f"{op.target}: a compound statement is not replaced whole")
        line = statement.indent + _one_line(op.code, op.target)
        new = _replace_lines(sources[statement.file], statement.line, statement.end_line, [line])
        return statement.file, new
    statement = _statement(targets, op.before)
    line = statement.indent + _one_line(op.code, op.before)
    text = sources[statement.file]
    return statement.file, _replace_lines(text, statement.line, statement.line - 1, [line])
