"""Edit targets read from a harness, and operations on them that cannot miss their place."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from daemon.patches import PatchRejected
from daemon.patches.identity import fingerprint, patched_fingerprint
from daemon.patches.operations import (
    InsertStatement,
    ReplaceStatement,
    SetConstant,
    apply_operation,
)
from daemon.patches.targets import find_targets, reached_targets
from daemon.patches.tree import render_git_diff

pytestmark = pytest.mark.unit

SEED = (Path(__file__).resolve().parents[2] / "seeds" / "minimal" / "harness.py").read_text()

SOURCE = '''\
"""A harness."""

import re

LIMIT = 3  # how many
RATE: float = 0.5
LOUD = False
HELLO = "Say hi."
WORD = re.compile(r"\\w+", re.I)
LIMIT_TWICE = 1
LIMIT_TWICE = 2
__version__ = "1"


def solve(task, ctx):
    """Docstring."""
    total = 0; other = 1
    items = [
        1,
        2,
    ]
    if task:
        return {"output": items}
    elif ctx:
        pass
    return {"output": None}
'''


def _line(text: str, number: int) -> str:
    return text.split("\n")[number - 1]


def test_constants_of_every_kind_with_their_comments() -> None:
    targets = find_targets({"harness.py": SOURCE})
    found = {c.label: (c.kind, c.value, c.comment) for c in targets.constants}
    assert found == {
        "LIMIT": ("int", 3, "how many"),
        "RATE": ("float", 0.5, ""),
        "LOUD": ("bool", False, ""),
        "HELLO": ("text", "Say hi.", ""),
        "WORD": ("pattern", "\\w+", ""),
    }  # a name assigned twice, and dunders, are not tunable values


def test_statements_skip_docstrings_elifs_and_shared_lines() -> None:
    targets = find_targets({"harness.py": SOURCE})
    by_line = {s.line: s for s in targets.statements}
    lines = SOURCE.split("\n")
    assert not any('"""' in lines[n - 1] for n in by_line)
    assert 17 not in by_line  # "total = 0; other = 1": two statements on one line
    assert not any(lines[n - 1].strip().startswith("elif") for n in by_line)
    items = by_line[18]
    assert (items.end_line, items.indent, items.replaceable) == (21, "    ", True)
    assert not by_line[22].replaceable  # an if statement is compound


def test_seed_targets_are_its_tunable_constants() -> None:
    targets = find_targets({"harness.py": SEED})
    labels = {c.label: c.kind for c in targets.constants}
    assert labels == {
        "MAX_STEPS": "int",
        "MAX_TOKENS": "int",
        "INSTRUCTIONS": "text",
        "CODE_BLOCK": "pattern",
    }


@pytest.mark.parametrize(
    ("label", "value", "expected"),
    [
        ("LIMIT", 8, "LIMIT = 8  # how many"),
        ("RATE", 2, "RATE: float = 2.0"),
        ("LOUD", True, "LOUD = True"),
        ("HELLO", 'Be "brief".\nNo tricks \\ at all', None),
        ("WORD", "[a-z]+\\d", 'WORD = re.compile(r"[a-z]+\\d", re.I)'),
        ("WORD", 'say "x"', None),
    ],
)
def test_setting_a_constant_writes_a_literal_of_its_kind(
    label: str, value: object, expected: str | None
) -> None:
    sources = {"harness.py": SOURCE}
    targets = find_targets(sources)
    constant = targets.constant(label)
    assert constant is not None
    file, text = apply_operation(sources, targets, SetConstant(label, value))  # type: ignore[arg-type]
    assert file == "harness.py"
    compile(text, file, "exec")
    line = _line(text, constant.start[0])
    if expected is not None:
        assert line == expected
    # The new program holds exactly the value, and nothing else changed.
    after = {c.label: c.value for c in find_targets({file: text}).constants}
    assert after[label] == (float(value) if label == "RATE" else value)  # type: ignore[arg-type]
    assert len(text.split("\n")) == len(SOURCE.split("\n"))


@pytest.mark.parametrize(
    ("op", "why"),
    [
        (SetConstant("NOPE", 1), "no such constant"),
        (SetConstant("LIMIT", "three"), "holds a int"),
        (SetConstant("LOUD", 1), "holds a bool"),
        (SetConstant("WORD", "(unclosed"), "not a regular expression"),
        (ReplaceStatement("harness.py:22", "pass"), "compound statement"),
        (ReplaceStatement("harness.py:17", "pass"), "no statement starts there"),
        (InsertStatement("other.py:1", "pass"), "no statement starts there"),
        (ReplaceStatement("harness.py:18", "  \n "), "code is empty"),
    ],
)
def test_operations_that_cannot_be_carried_out_say_why(op: object, why: str) -> None:
    sources = {"harness.py": SOURCE}
    with pytest.raises(PatchRejected, match=why):
        apply_operation(sources, find_targets(sources), op)  # type: ignore[arg-type]


def test_replace_takes_the_whole_statement_and_insert_its_indentation() -> None:
    sources = {"harness.py": SOURCE}
    targets = find_targets(sources)
    _, replaced = apply_operation(
        sources, targets, ReplaceStatement("harness.py:18", "   items = [3]  \nignored")
    )
    assert "    items = [3]\n    if task:" in replaced
    _, inserted = apply_operation(
        sources, targets, InsertStatement("harness.py:23", "items = items[:1]")
    )
    assert "    if task:\n        items = items[:1]\n        return" in inserted
    for text in (replaced, inserted):
        compile(text, "harness.py", "exec")


def test_fingerprint_ignores_comments_and_layout_but_not_code() -> None:
    base = {"harness.py": SOURCE.encode(), "notes.md": b"x"}
    relaid = SOURCE.replace("# how many", "# a comment").replace("\n\n\ndef", "\n\n\n\ndef")
    assert fingerprint({**base, "harness.py": relaid.encode()}) == fingerprint(base)
    changed = SOURCE.replace("LIMIT = 3", "LIMIT = 4")
    assert fingerprint({**base, "harness.py": changed.encode()}) != fingerprint(base)
    assert fingerprint({**base, "notes.md": b"y"}) != fingerprint(base)
    diff = render_git_diff(base, {**base, "harness.py": changed.encode()})
    assert patched_fingerprint(base, diff) == fingerprint({**base, "harness.py": changed.encode()})


def _lines_run(source: str, task: dict[str, object]) -> set[int]:
    """The lines of ``source`` that run when its ``solve`` answers ``task`` (a model that
    calls the task's first tool once)."""
    module = types.ModuleType("traced_harness")
    code = compile(source, "traced_harness.py", "exec")
    ran: set[int] = set()

    def trace(frame: types.FrameType, event: str, arg: object) -> object:
        if frame.f_code.co_filename == "traced_harness.py" and event == "line":
            ran.add(frame.f_lineno)
        return trace

    class Model:
        def chat(self, messages: object, **kwargs: object) -> dict[str, object]:
            return {"content": "", "tool_calls": [{"id": "1", "name": "f", "arguments": {}}]}

    ctx = types.SimpleNamespace(model=Model(), ToolError=RuntimeError)
    sys.settrace(trace)
    try:
        exec(code, module.__dict__)
        module.solve(task, ctx)
    finally:
        sys.settrace(None)
    return ran


def test_reached_targets_leave_out_what_a_run_never_reached() -> None:
    # The seed on a function-call task (BFCL's kind): no fenced code is extracted and no
    # tool result is added, so CODE_BLOCK and the lines of extract_code and add_tool_result
    # cannot change what it does there.
    task = {"kind": "function_call", "prompt": [{"role": "user", "content": "q"}], "tools": []}
    ran = _lines_run(SEED, task)
    targets = find_targets({"harness.py": SEED})
    reached = reached_targets(targets, {"harness.py": SEED}, {"harness.py": ran})
    assert [c.label for c in reached.constants] == ["MAX_STEPS", "MAX_TOKENS", "INSTRUCTIONS"]
    lines = SEED.split("\n")
    never = {
        s.line
        for s in targets.statements
        if "CODE_BLOCK.findall" in lines[s.line - 1] or "json.dumps(result)" in lines[s.line - 1]
    }
    assert len(never) == 2
    assert never.isdisjoint(s.line for s in reached.statements)
    assert {s.line for s in reached.statements} == {s.line for s in targets.statements} & ran
    # On a code task the pattern is read, so it is offered again.
    code_task = {**task, "kind": "code"}
    ran_code = _lines_run(SEED, code_task)
    again = reached_targets(targets, {"harness.py": SEED}, {"harness.py": ran_code})
    assert "CODE_BLOCK" in [c.label for c in again.constants]


def test_reached_targets_keep_everything_when_no_coverage_was_recorded() -> None:
    targets = find_targets({"harness.py": SEED})
    assert reached_targets(targets, {"harness.py": SEED}, {}) == targets
    assert reached_targets(targets, {"harness.py": SEED}, {"harness.py": []}) == targets
