"""Which lines of a harness can run, which did, and which lines a patch added that never ran.

The guest runtime reports, per harness file, the lines that produced a ``sys.settrace``
'line' event (CPython 3.11, the sandbox image's Python). A line can produce one exactly when
some bytecode instruction of it runs after a code object's prologue: the instructions up to
the first ``RESUME`` (a function's ``def`` line) start a frame without a 'line' event, and
the module prologue sits on line 0. Everything else comes from the compiler's line table, so
docstrings, comments, ``else:``/``finally:`` lines and closing brackets never count.

Line coverage cannot tell a one-line function's body from its ``def`` statement: both share a
line, so ``def f(): return 1`` counts as run when the ``def`` ran.
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from daemon.errors import HarnessdError
from daemon.patches.diff import DiffSyntaxError, parse_unified_diff
from daemon.patches.tree import iter_files


class CodemapError(HarnessdError):
    """A file handed to the coverage analysis is not valid Python."""


class NeverExecuted(BaseModel):
    model_config = ConfigDict(frozen=True)

    file: str
    # Inclusive [first, last] line spans; lines between that cannot run do not split a span.
    ranges: list[list[int]]
    # Functions (qualified names) none of whose body ran; nested ones only via their parent.
    functions: list[str]


class CoverageSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    executed_fraction: float
    executable: int
    executed: int
    never_executed: list[NeverExecuted]


class DeadCode(BaseModel):
    model_config = ConfigDict(frozen=True)

    added_executable: int
    dead: int
    fraction: float
    lines: dict[str, list[int]]


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _own_lines(code: types.CodeType) -> set[int]:
    """Lines of ``code`` itself (not nested code) that can produce a 'line' event."""
    # RESUME is two bytes and has no inline cache entries.
    prologue_end = next(
        (ins.offset + 2 for ins in dis.get_instructions(code) if ins.opname == "RESUME"), 0
    )
    return {
        line
        for start, end, line in code.co_lines()
        if line is not None and line > 0 and end > prologue_end and start < end
    }


def _compile(source: str, name: str) -> types.CodeType:
    try:
        return compile(source, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise CodemapError(f"{name}: not valid Python ({exc})") from None


def executable_lines(source: str, name: str = "<harness>") -> set[int]:
    """The lines of ``source`` that can produce a 'line' trace event under CPython 3.11."""
    lines: set[int] = set()
    for code in _code_objects(_compile(source, name)):
        lines |= _own_lines(code)
    return lines


def _functions(source: str, name: str) -> list[tuple[str, set[int]]]:
    """Named functions with the lines of their own bodies, outermost first."""
    found = []
    for code in _code_objects(_compile(source, name)):
        is_function = bool(code.co_flags & inspect.CO_OPTIMIZED)
        if is_function and not code.co_name.startswith("<"):
            found.append((code.co_qualname, _own_lines(code)))
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


def _ranges(missing: set[int], executable: set[int]) -> list[list[int]]:
    ordered = sorted(executable)
    spans: list[list[int]] = []
    previous_missing = False
    for line in ordered:
        if line in missing:
            if previous_missing:
                spans[-1][1] = line
            else:
                spans.append([line, line])
        previous_missing = line in missing
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
    """How much of the harness's own Python ran, and what never did."""
    total = ran_total = 0
    never: list[NeverExecuted] = []
    for name in sorted(sources):
        if not name.endswith(".py"):
            continue
        source = sources[name]
        executable = executable_lines(source, name)
        ran = set(executed.get(name, ())) & executable
        total += len(executable)
        ran_total += len(ran)
        missing = executable - ran
        if missing:
            never.append(
                NeverExecuted(
                    file=name,
                    ranges=_ranges(missing, executable),
                    functions=_never_ran(source, name, ran),
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
    """Of the runnable lines ``git_diff`` added to ``sources``, those that never ran."""
    added_executable = 0
    dead_lines: dict[str, list[int]] = {}
    for name, added in sorted(added_lines(git_diff).items()):
        if not name.endswith(".py") or name not in sources:
            continue
        candidates = added & executable_lines(sources[name], name)
        added_executable += len(candidates)
        dead = sorted(candidates - set(executed.get(name, ())))
        if dead:
            dead_lines[name] = dead
    dead_count = sum(len(lines) for lines in dead_lines.values())
    fraction = dead_count / added_executable if added_executable else 0.0
    return DeadCode(
        added_executable=added_executable, dead=dead_count, fraction=fraction, lines=dead_lines
    )


def merge_coverage(runs: Iterable[Mapping[str, Iterable[int]]]) -> dict[str, set[int]]:
    """The union of several runs' coverage (e.g. every task of a held-out run)."""
    merged: dict[str, set[int]] = {}
    for run in runs:
        for name, lines in run.items():
            merged.setdefault(name, set()).update(lines)
    return merged


def read_sources(tree: Path) -> dict[str, str]:
    """The Python files of a harness tree, by relative path (the coverage report's keys)."""
    return {
        rel: path.read_text(encoding="utf-8")
        for rel, path in iter_files(tree)
        if rel.endswith(".py")
    }
