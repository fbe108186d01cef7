"""Edit targets of a harness: the places a model may change, found by reading its code.

A model too small to copy lines exactly can still pick from a list, so the edit protocol for
small models (``daemon.improve.edit_protocol``) names these targets instead of quoting code.
They are read from the harness's Python files, which are parsed, never run:

* **constants**: module-level ``NAME = <literal>`` with an int, float, bool or str literal,
  and ``NAME = re.compile(<str literal>, ...)``. A str constant is prompt text; the pattern
  of a ``re.compile`` is a regular expression.
* **statements**: every statement except docstrings and ``elif`` branches, by file and first
  line, with its indentation. A simple statement (an assignment, a call, ``return``...) on
  lines of its own may be replaced; a statement may have a new one inserted before it.
"""

from __future__ import annotations

import ast
import io
import math
import tokenize
import warnings
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from daemon import pyast
from sandbox.guest.harnessd_statements import COMPOUND_STATEMENTS

ConstantKind = Literal["int", "float", "bool", "text", "pattern"]
Value = int | float | bool | str
Position = tuple[int, int]  # (1-based line, 0-based column in characters)


@dataclass(frozen=True)
class ConstantTarget:
    file: str
    name: str
    label: str  # how the protocol names it: NAME, or file:NAME when two files share a name
    kind: ConstantKind
    value: Value
    start: Position  # the literal's span in the file
    end: Position
    comment: str  # the comment on its line, if any (what the constant is for)


@dataclass(frozen=True)
class StatementTarget:
    file: str
    line: int  # first line (its first decorator for a decorated definition)
    end_line: int
    indent: str
    replaceable: bool  # a simple statement alone on its lines

    @property
    def label(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Targets:
    constants: tuple[ConstantTarget, ...]
    statements: tuple[StatementTarget, ...]

    def constant(self, label: str) -> ConstantTarget | None:
        return next((c for c in self.constants if c.label == label), None)

    def statement(self, label: str) -> StatementTarget | None:
        return next((s for s in self.statements if s.label == label), None)


def _parse(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pyast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    """ast's UTF-8 byte offset as a character offset into the line."""
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def _comments(source: str) -> dict[int, str]:
    found: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                found[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def _literal(node: ast.expr) -> tuple[ConstantKind, ast.Constant] | None:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return "bool", node
        if isinstance(value, int):
            return "int", node
        if isinstance(value, float) and math.isfinite(value):
            return "float", node
        if isinstance(value, str):
            return "text", node
        return None
    is_compile = (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "compile"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "re"
    )
    if is_compile and isinstance(node, ast.Call) and node.args:
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return "pattern", first
    return None


def _constants(file: str, source: str, tree: ast.Module) -> list[ConstantTarget]:
    lines = source.split("\n")
    comments = _comments(source)
    assigned: dict[str, int] = {}
    found: list[ConstantTarget] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name) or target.id.startswith("__"):
            continue
        assigned[target.id] = assigned.get(target.id, 0) + 1
        literal = _literal(value)
        if literal is None or literal[1].end_lineno is None or literal[1].end_col_offset is None:
            continue
        kind, const = literal
        end_line, end_col = const.end_lineno, const.end_col_offset
        assert end_line is not None and end_col is not None
        assert isinstance(const.value, int | float | str)  # as _literal checked
        found.append(
            ConstantTarget(
                file=file,
                name=target.id,
                label=target.id,
                kind=kind,
                value=const.value,
                start=(const.lineno, _char_col(lines, const.lineno, const.col_offset)),
                end=(end_line, _char_col(lines, end_line, end_col)),
                comment=comments.get(node.lineno, ""),
            )
        )
    # A name assigned twice at module level is not one tunable value.
    return [c for c in found if assigned[c.name] == 1]


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of docstring statements."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.add(id(body[0]))
    return found


def _elifs(tree: ast.Module) -> set[int]:
    return {
        id(node.orelse[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and len(node.orelse) == 1
        and isinstance(node.orelse[0], ast.If)
        and node.orelse[0].col_offset == node.col_offset
    }


def _statements(file: str, source: str, tree: ast.Module) -> list[StatementTarget]:
    lines = source.split("\n")
    skipped = _docstrings(tree) | _elifs(tree)
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and id(n) not in skipped]
    starts: dict[int, int] = {}
    for node in nodes:
        starts[node.lineno] = starts.get(node.lineno, 0) + 1
    found: list[StatementTarget] = []
    for node in nodes:
        decorators = getattr(node, "decorator_list", [])
        first = min([node.lineno, *(d.lineno for d in decorators)])
        text = lines[first - 1]
        indent = text[: len(text) - len(text.lstrip())]
        alone = starts[node.lineno] == 1 and len(indent) == _char_col(
            lines, node.lineno, node.col_offset
        )
        if not alone or node.end_lineno is None:
            continue  # shares its line (``a; b``, ``if x: y``): not addressable by line
        rest = lines[node.end_lineno - 1][
            _char_col(lines, node.end_lineno, node.end_col_offset or 0) :
        ].strip()
        ends_alone = not rest or rest.startswith("#")
        found.append(
            StatementTarget(
                file=file,
                line=first,
                end_line=node.end_lineno,
                indent=indent,
                replaceable=not isinstance(node, COMPOUND_STATEMENTS) and ends_alone,
            )
        )
    return sorted(found, key=lambda s: s.line)


def find_targets(sources: Mapping[str, str]) -> Targets:
    """The targets of a harness's Python files (``{relative path: source}``); a file that
    does not parse has none."""
    constants: list[ConstantTarget] = []
    statements: list[StatementTarget] = []
    for file in sorted(sources):
        tree = _parse(sources[file])
        if tree is None:
            continue
        constants.extend(_constants(file, sources[file], tree))
        statements.extend(_statements(file, sources[file], tree))
    names = [c.name for c in constants]
    labelled = tuple(
        c if names.count(c.name) == 1 else replace(c, label=f"{c.file}:{c.name}") for c in constants
    )
    return Targets(labelled, tuple(statements))


def _statement_uses(tree: ast.Module) -> dict[str, set[int]]:
    """Each name read in the module, by the first lines of the statements that read it (a
    name inside a nested statement's body counts for that statement, not for its parent)."""
    uses: dict[str, set[int]] = {}

    def expressions(node: ast.AST, line: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                continue  # its own statement, visited by the walk with its own line
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                uses.setdefault(child.id, set()).add(line)
            elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Load):
                uses.setdefault(child.attr, set()).add(line)  # another module's NAME
            expressions(child, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            decorators = getattr(node, "decorator_list", [])
            expressions(node, min([node.lineno, *(d.lineno for d in decorators)]))
    return uses


def reached_targets(
    targets: Targets, sources: Mapping[str, str], executed: Mapping[str, Iterable[int]]
) -> Targets:
    """The targets through which an edit can change what the harness does on runs that
    executed ``executed`` (``{file: statement lines that ran}``, a dev report's coverage):
    statements that ran (a line put in or before one that never ran never runs either, and
    the dead-code gate rejects it), and constants read by a statement that ran. With no
    executed line at all (no coverage was recorded) every target is kept."""
    ran = {file: set(lines) for file, lines in executed.items()}
    if not any(ran.values()):
        return targets
    reads: dict[str, set[tuple[str, int]]] = {}
    for file in sorted(sources):
        tree = _parse(sources[file]) if file.endswith(".py") else None
        for name, lines in ({} if tree is None else _statement_uses(tree)).items():
            reads.setdefault(name, set()).update((file, line) for line in lines)
    constants = tuple(
        c
        for c in targets.constants
        if any(line in ran.get(file, ()) for file, line in reads.get(c.name, ()))
    )
    statements = tuple(s for s in targets.statements if s.line in ran.get(s.file, ()))
    return Targets(constants, statements)


def without_constants(targets: Targets, labels: Collection[str]) -> Targets:
    """``targets`` less the constants named by ``labels``."""
    return Targets(tuple(c for c in targets.constants if c.label not in labels), targets.statements)
