"""Statement coverage: the numbering checked against a real tracer, summaries, dead code.

The corpora below are test-owned code, compiled with the guest's statement numbering and
executed in-process under a real tracer (and, for the version check, inside the sandbox
image's own Python 3.11). A statement whose first line is marked ``# dead`` is one the run
never reaches; every other counted statement runs.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import docker
import pytest

from daemon.evaluation.coverage import (
    CodemapError,
    added_lines,
    coverage_summary,
    dead_added,
    merge_coverage,
    read_sources,
    statements,
)
from daemon.patches import apply_proposal, parse_proposal
from daemon.patches.model import Proposal
from sandbox.guest import harnessd_statements
from sandbox.image import image_tag
from tests.patches.conftest import HARNESS_PY, STEPS_PY

CORPUS = '''\
"""Module docstring."""
import functools

CONSTANT = (
    1,
    2,
)


def decorator(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@decorator
def branches(x):
    """Docstring."""
    if x > 0:
        result = "pos"
    elif x < 0:
        result = "neg"  # dead
    else:
        result = "zero"
    try:
        if x > 100:
            raise ValueError(x)  # dead
    except ValueError:
        result = "big"  # dead
    finally:
        result += "!"
    return result


def loops(n):
    total = 0
    for i in range(n):
        if i % 2:
            continue
        total += i
    while total > 100:
        total -= 1  # dead
    else:
        total += 0
    squares = [i * i for i in range(n) if i]
    pairs = {
        k: v
        for k, v in zip("ab", (1, 2))
    }
    return total, squares, pairs


def gen(limit):
    yield from range(limit)
    value = yield "end"
    return value


async def coro(x):
    return x * 2


class Shape:
    sides = 0

    def __init__(self, name):
        self.name = name

    @property
    def label(self):
        return f"{self.name}:{self.sides}"

    def unused(self):
        return "never"  # dead

    @staticmethod
    def one_liner(): return 1


def never_called(a,
                 b):
    c = a + b  # dead
    return c  # dead


def matcher(obj):
    match obj:
        case {"kind": "a"}:
            return 1
        case [x, y]:
            return x + y  # dead
        case _:
            return 0


def multi_line_call():
    return dict(
        a=1,
        b=len(
            "xyz"
        ),
    )


def raising():
    try:
        return 1 / 0
    except ZeroDivisionError as exc:
        del exc
        return -1


def evasions():
    a = 1; b = 2; c = never_called(a, b) if False else 0  # noqa: E702
    if False:
        hidden = 1  # dead
    while False:
        also_hidden = 2  # dead
    try:
        pass
    except KeyError: swallowed = 1  # dead
    return a + b + c
    after_return = 3  # dead


def one_line_dead(): return 4  # dead


with open("/dev/null") as handle:
    handle.read()

lam = lambda v: v + 1
assert lam(1) == 2
branches(5)
branches(0)
loops(5)
list(gen(2))
pending = coro(3)
try:
    pending.send(None)
except StopIteration:
    pass
Shape("sq").label
Shape.one_liner()
matcher({"kind": "a"})
matcher(42)
multi_line_call()
raising()
evasions()
'''

SMALL = """\
def used(x):
    return x + 1


def unused(y):
    # a comment
    z = y * 2

    return z

def outer():
    def inner():
        return 1
    return inner

class K:
    def m(self):
        return 2

used(1)
"""

# The guest runtime's numbering and tracer, in miniature: statement numbers of one file.
TRACE_SCRIPT = """
import json, sys, types
numbering, source, name = json.loads(sys.stdin.read())
statements = types.ModuleType("harnessd_statements")
sys.modules["harnessd_statements"] = statements  # dataclasses looks its module up
exec(compile(numbering, "harnessd_statements.py", "exec"), statements.__dict__)
tree, _ = statements.parse_numbered(source, name)
seen = set()
def tracer(frame, event, arg):
    if frame.f_code.co_filename != name:
        return None
    if event == "line":
        seen.add(frame.f_lineno)
    return tracer
code = compile(tree, name, "exec")
sys.settrace(tracer)
try:
    exec(code, {"__name__": "traced"})
finally:
    sys.settrace(None)
print(json.dumps(sorted(seen)))
"""

pytestmark = pytest.mark.unit


def trace(source: str, name: str = "traced.py") -> set[int]:
    """Run ``source`` numbered as the guest numbers it, under a real 'line' tracer; return
    the statement numbers that fired."""
    seen: set[int] = set()

    def tracer(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if frame.f_code.co_filename != name:
            return None
        if event == "line":
            seen.add(frame.f_lineno)
        return tracer

    tree, _ = harnessd_statements.parse_numbered(source, name)
    code = compile(tree, name, "exec")
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        exec(code, {"__name__": "traced"})
    finally:
        sys.settrace(previous)
    return seen


def marked_dead(source: str) -> set[int]:
    return {n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# dead")}


def dead_statements(source: str, ran: set[int]) -> set[int]:
    """First lines of the counted statements that did not run."""
    return {s.first for s in statements(source, "traced.py") if s.line not in ran}


def test_every_statement_that_runs_fires_and_exactly_the_marked_ones_do_not() -> None:
    ran = trace(CORPUS)
    assert dead_statements(CORPUS, ran) == marked_dead(CORPUS)


def test_statements_sharing_a_line_are_told_apart() -> None:
    source = "x = 1; y = 2\ndef f(): return 3\nif x: z = 4\nelse: w = 5\n"
    found = statements(source, "s.py")
    assert [(s.first, s.kind) for s in found] == [
        (1, "Assign"),
        (1, "Assign"),
        (2, "FunctionDef"),
        (2, "Return"),
        (3, "If"),
        (3, "Assign"),
        (4, "Assign"),
    ]
    assert len({s.line for s in found}) == len(found)  # one number each
    ran = trace(source, "s.py")
    assert dead_statements(source, ran) == {2, 4}  # f's body and the else branch


def test_docstrings_declarations_and_bare_annotations_are_not_counted() -> None:
    source = (
        '"""Module."""\ndef f():\n    """Doc."""\n    global G\n    v: int\n    return 1\n'
        'class C:\n    """Doc."""\n    a: int\n'
    )
    kinds = [s.kind for s in statements(source, "d.py")]
    assert kinds == ["FunctionDef", "Return", "ClassDef", "AnnAssign"]


@pytest.mark.docker
def test_the_sandbox_python_numbers_and_traces_the_same_statements() -> None:
    """The guest runs the image's CPython 3.11.x; its line events must match the host's."""
    # The real sandbox image (scripts/setup builds it); no engine or image is a failure here.
    client = docker.from_env()
    numbering = Path(harnessd_statements.__file__).read_text()
    with tempfile.TemporaryDirectory(prefix="hd-cov-", dir="/tmp") as folder:
        payload = Path(folder) / "payload.json"
        payload.write_text(json.dumps([numbering, CORPUS, "traced.py"]))
        payload.chmod(0o644)
        Path(folder).chmod(0o755)
        output = client.containers.run(
            image_tag(),
            ["sh", "-c", 'python3 -c "$0" < /in/payload.json', TRACE_SCRIPT],
            network_disabled=True,
            remove=True,
            user="65534:65534",
            mem_limit="128m",
            volumes={folder: {"bind": "/in", "mode": "ro"}},
        )
    client.close()
    in_guest = set(json.loads(output.decode()))
    assert in_guest == trace(CORPUS)
    assert dead_statements(CORPUS, in_guest) == marked_dead(CORPUS)


def test_coverage_summary_reports_ranges_and_outermost_dead_functions() -> None:
    executed = {"harness.py": trace(SMALL), "notes.md": {1}}
    summary = coverage_summary({"harness.py": SMALL, "notes.md": "# not python"}, executed)
    assert summary.executable == 13
    assert summary.executed == 7
    assert summary.executed_fraction == pytest.approx(7 / 13)
    (entry,) = summary.never_executed
    assert entry.file == "harness.py"
    assert entry.ranges == [[7, 9], [12, 14], [18, 18]]
    assert entry.functions == ["unused", "outer", "K.m"]
    dumped = summary.model_dump()["never_executed"][0]
    assert set(dumped) == {"file", "ranges", "functions"}


def test_coverage_summary_of_a_file_that_never_ran_and_of_nothing() -> None:
    summary = coverage_summary({"harness.py": SMALL, "helpers/x.py": "A = 1\n"}, {})
    assert summary.executed_fraction == 0.0
    assert [e.file for e in summary.never_executed] == ["harness.py", "helpers/x.py"]
    assert summary.never_executed[0].ranges == [[1, 20]]
    assert coverage_summary({}, {}).executed_fraction == 1.0


def test_invalid_python_is_a_clear_error() -> None:
    with pytest.raises(CodemapError, match=r"broken\.py: not valid Python"):
        coverage_summary({"broken.py": "def (:\n"}, {})


def test_added_lines_counts_new_file_line_numbers() -> None:
    diff = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,4 @@\n x = 1\n+y = 2\n"
        " z = 3\n-w = 4\n+w = 5\n@@ -10,2 +11,3 @@\n q = 1\n+r = 2\n s = 3\n"
        "diff --git a/b.py b/b.py\nnew file mode 100644\n--- /dev/null\n+++ b/b.py\n"
        "@@ -0,0 +1,2 @@\n+one = 1\n+two = 2\n"
        "diff --git a/c.py b/c.py\ndeleted file mode 100644\n--- a/c.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-gone = 1\n"
    )
    assert added_lines(diff) == {"a.py": {2, 4, 12}, "b.py": {1, 2}}
    assert added_lines("") == {}


@pytest.fixture
def base_harness(tmp_path: Path) -> Path:
    root = tmp_path / "base"
    (root / "helpers").mkdir(parents=True)
    (root / "harness.py").write_text(HARNESS_PY)
    (root / "helpers" / "steps.py").write_text(STEPS_PY)
    return root


def test_dead_added_counts_added_statements(base_harness: Path, tmp_path: Path) -> None:
    text = (
        "harness.py\n<<<<<<< SEARCH\ndef solve(task, ctx):\n    seen = []\n=======\n"
        "def never_used(values):\n    # only a comment here\n    total = sum(values)\n\n"
        "    return total\n\n\ndef solve(task, ctx):\n    seen = []\n    seen.append(-1)\n"
        ">>>>>>> REPLACE\n"
    )
    proposal = parse_proposal(text)
    assert isinstance(proposal, Proposal)
    applied = apply_proposal(base_harness, proposal, tmp_path / "cand")
    sources = read_sources(tmp_path / "cand")
    assert set(sources) == {"harness.py", "helpers/steps.py"}
    harness = sources["harness.py"]
    sys.path.insert(0, str(tmp_path / "cand"))
    try:
        ran = trace(harness + "\nsolve({}, None)\n", "harness.py")
    finally:
        sys.path.remove(str(tmp_path / "cand"))
        for name in ("helpers.steps", "helpers"):
            sys.modules.pop(name, None)
    lines = harness.splitlines()
    body = {lines.index("    total = sum(values)") + 1, lines.index("    return total") + 1}
    dead = dead_added(applied.git_diff, sources, {"harness.py": ran})
    assert dead.lines == {"harness.py": sorted(body)}
    # def line (ran at import), two body lines (dead), seen.append (ran).
    assert (dead.added_executable, dead.dead) == (4, 2)
    assert dead.fraction == pytest.approx(0.5)


def test_dead_added_with_no_runnable_additions_is_zero() -> None:
    diff = "--- a/a.py\n+++ b/a.py\n@@ -1,1 +1,2 @@\n x = 1\n+# just a comment\n"
    result = dead_added(diff, {"a.py": "x = 1\n# just a comment\n"}, {})
    assert (result.added_executable, result.dead, result.fraction, result.lines) == (0, 0, 0.0, {})


def test_merge_coverage_unions_runs() -> None:
    merged = merge_coverage([{"harness.py": [1, 2]}, {"harness.py": {2, 5}, "b.py": [3]}, {}])
    assert merged == {"harness.py": {1, 2, 5}, "b.py": {3}}
