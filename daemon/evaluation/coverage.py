"""Which statements of a harness ran, which never did, and which statements a patch added.

The unit is the AST statement, not the line: the guest compiles each harness file so that
every statement carries a line number of its own (``sandbox/guest/harnessd_statements.py``,
shared with this module), and reports the numbers that produced a 'line' event. So each of
``a = 1; b = f()`` counts, a one-line function's body is not run just because its ``def``
was, and code that compiles to nothing (under ``if False:``, after ``return`` or ``raise``)
is a statement that never ran, not something that is not there.

What is added is counted in every ``.py`` file of the harness, new files included: a
statement is added when any line of its own text (its header, not a nested body) is a line
the patch added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from daemon import pyast
from daemon.errors import HarnessdError
from daemon.patches.diff import DiffSyntaxError, parse_unified_diff
from daemon.patches.tree import iter_files
from sandbox.guest.harnessd_statements import Statement, parse_numbered


class CodemapError(HarnessdError):
    """A file handed to the coverage analysis is not valid Python."""


class NeverExecuted(BaseModel):
    model_config = ConfigDict(frozen=True)

    file: str
    # Inclusive [first, last] spans of real lines of statements that never ran; statements
    # that ran in between split a span, lines with no statement do not.
    ranges: list[list[int]]
    # Functions (qualified names) none of whose body ran; nested ones only via their parent.
    functions: list[str]


class CoverageSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    executed_fraction: float
    executable: int  # statements
    executed: int
    never_executed: list[NeverExecuted]


class DeadCode(BaseModel):
    model_config = ConfigDict(frozen=True)

    added_executable: int  # statements the patch added
    dead: int  # of those, statements that never ran
    fraction: float
    # Real first lines of the dead statements, per file.
    lines: dict[str, list[int]]


def statements(source: str, name: str) -> list[Statement]:
    """The countable statements of ``source``, numbered as the guest numbers them."""
    try:
        _, found = pyast.serialised(lambda: parse_numbered(source, name))
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise CodemapError(f"{name}: not valid Python ({exc})") from None
    return found


def _functions(source: str, name: str) -> list[tuple[str, set[int]]]:
    """Named functions with the statement numbers of their own bodies, outermost first."""
    import ast

    tree, _ = pyast.serialised(lambda: parse_numbered(source, name))
    found: list[tuple[str, set[int]]] = []

    def body_numbers(node: ast.AST) -> set[int]:
        numbers: set[int] = set()
        for child in ast.walk(node):
            if child is not node and isinstance(child, ast.stmt):
                numbers.add(child.lineno)
        return numbers

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = prefix + child.name
                found.append((qualname, body_numbers(child)))
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def added_lines(git_diff: str) -> dict[str, set[int]]:
    """The new-file line numbers each file gained in ``git_diff`` (a normalised diff)."""
    if not git_diff.strip():
        return {}
    try:
        diffs = parse_unified_diff(git_diff)
    except DiffSyntaxError as exc:
        raise CodemapError(f"cannot read the patch: {exc}") from None
    added: dict[str, set[int]] = {}
    for diff in diffs:
        if diff.new_path is None:
            continue
        lines = added.setdefault(diff.new_path, set())
        for hunk in diff.hunks:
            if hunk.new_start is None:
                raise CodemapError(f"{diff.new_path}: a hunk header has no line numbers")
            number = hunk.new_start
            for line in hunk.lines:
                if line.kind == "+":
                    lines.add(number)
                if line.kind != "-":
                    number += 1
    return added


def python_lines(source: str, diff_lines: set[int]) -> set[int]:
    """The lines Python sees for lines numbered as a diff numbers them.

    A diff breaks lines at ``\n`` only; Python also at a lone ``\r``. So one diff line can
    be several Python lines (the static stage refuses such patches; this keeps the count
    right whatever reaches it).
    """
    if "\r" not in source:
        return set(diff_lines)
    found: set[int] = set()
    python_line = 1
    for number, line in enumerate(source.split("\n"), 1):
        body = line[:-1] if line.endswith("\r") else line  # CRLF is one break for both
        spans = 1 + body.count("\r")
        if number in diff_lines:
            found.update(range(python_line, python_line + spans))
        python_line += spans
    return found


def _ranges(dead: list[Statement], alive: list[Statement]) -> list[list[int]]:
    ran_at = sorted(s.first for s in alive)
    spans: list[list[int]] = []
    for stmt in sorted(dead, key=lambda s: (s.first, s.line)):
        if spans and not any(spans[-1][1] < first < stmt.first for first in ran_at):
            spans[-1][1] = max(spans[-1][1], stmt.last)
        else:
            spans.append([stmt.first, stmt.last])
    return spans


def _never_ran(source: str, name: str, ran: set[int]) -> list[str]:
    dead: list[str] = []
    for qualname, body in _functions(source, name):
        if not body or body & ran:
            continue
        if any(qualname.startswith(parent + ".") for parent in dead):
            continue
        dead.append(qualname)
    return dead


def coverage_summary(
    sources: Mapping[str, str], executed: Mapping[str, Iterable[int]]
) -> CoverageSummary:
    """How much of the harness's own Python ran, statement by statement, and what never did."""
    total = ran_total = 0
    never: list[NeverExecuted] = []
    for name in sorted(sources):
        if not name.endswith(".py"):
            continue
        found = statements(sources[name], name)
        ran = set(executed.get(name, ()))
        alive = [s for s in found if s.line in ran]
        dead = [s for s in found if s.line not in ran]
        total += len(found)
        ran_total += len(alive)
        if dead:
            never.append(
                NeverExecuted(
                    file=name,
                    ranges=_ranges(dead, alive),
                    functions=_never_ran(sources[name], name, ran),
                )
            )
    fraction = ran_total / total if total else 1.0
    return CoverageSummary(
        executed_fraction=fraction, executable=total, executed=ran_total, never_executed=never
    )


def dead_added(
    git_diff: str,
    sources: Mapping[str, str],
    executed: Mapping[str, Iterable[int]],
) -> DeadCode:
    """Of the statements ``git_diff`` added to ``sources`` (any ``.py`` file), those that
    never ran."""
    added_total = dead_total = 0
    dead_lines: dict[str, list[int]] = {}
    for name, added_in_diff in sorted(added_lines(git_diff).items()):
        if not name.endswith(".py") or name not in sources:
            continue
        added = python_lines(sources[name], added_in_diff)
        ran = set(executed.get(name, ()))
        new = [s for s in statements(sources[name], name) if added.intersection(s.own_lines())]
        dead = [s for s in new if s.line not in ran]
        added_total += len(new)
        dead_total += len(dead)
        if dead:
            dead_lines[name] = sorted({s.first for s in dead})
    fraction = dead_total / added_total if added_total else 0.0
    return DeadCode(
        added_executable=added_total, dead=dead_total, fraction=fraction, lines=dead_lines
    )


def merge_coverage(runs: Iterable[Mapping[str, Iterable[int]]]) -> dict[str, set[int]]:
    """The union of several runs' coverage (e.g. every task of a held-out run)."""
    merged: dict[str, set[int]] = {}
    for run in runs:
        for name, lines in run.items():
            merged.setdefault(name, set()).update(lines)
    return merged


def read_sources(tree: Path) -> dict[str, str]:
    """The Python files of a harness tree, by relative path (the coverage report's keys),
    exactly as the guest reads them: bytes decoded, no newline translation."""
    return {
        rel: path.read_bytes().decode("utf-8")
        for rel, path in iter_files(tree)
        if rel.endswith(".py")
    }
