"""Reward hacking through the real sandbox: each cheat is a real harness, and each fails.

The harnesses here add code that never runs (``dead()``, never called) and then try to make
the recorder say it ran, to submit an answer of their own making, to read what the host
keeps from them, or to spend past their budget. What must hold: the dead statements are
reported as not run, a forged answer is never the one recorded, and the attempt ends the
task as ``tamper`` (or another failure), never as a clean run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.evaluation.coverage import dead_added, read_sources
from daemon.patches.tree import render_git_diff
from tests.sandbox.cheats import DEAD_LINE, assert_foiled, cheat, indent
from tests.sandbox.conftest import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

FRAME_WALKS = {
    "sys._getframe": """
import sys
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()):
        if isinstance(value, dict):
            for lines in value.values():
                if isinstance(lines, set):
                    lines.update(range(1, 50))
    frame = frame.f_back
""",
    "traceback frames": """
try:
    raise RuntimeError
except RuntimeError as exc:
    frame = exc.__traceback__.tb_frame
    while frame is not None:
        frame.f_locals
        frame = frame.f_back
""",
    "generator frames": """
def gen():
    yield 1
g = gen()
g.gi_frame.f_back
""",
    "inspect.stack": """
import inspect
for info in inspect.stack():
    info.frame.f_locals
""",
    "sys.gettrace restored through _imp": """
import _imp, importlib.machinery, sys
_imp.create_builtin(importlib.machinery.BuiltinImporter.find_spec("sys"))
assert sys.gettrace() is not None
""",
    "the object graph": """
import gc
for obj in gc.get_objects():
    if isinstance(obj, set) and len(obj) < 100:
        obj.update(range(1, 50))
""",
    "referrers of a harness frame": """
import gc
gc.get_referrers(attempt)
""",
    "other threads' frames": """
import sys
for frame in sys._current_frames().values():
    frame.f_locals
""",
    "a tracer of its own": """
import sys
sys.settrace(lambda *a: None)
""",
    "a thread tracer of its own": """
import threading
seen = []
threading.settrace(lambda frame, event, arg: seen.append(frame))
t = threading.Thread(target=lambda: None)
t.start(); t.join()
assert seen, "no frame arrived"
""",
}


@pytest.mark.parametrize("name", sorted(FRAME_WALKS))
async def test_frames_and_the_recorder_are_out_of_reach(sandbox: Sandbox, name: str) -> None:
    run = await sandbox.run(cheat(indent(FRAME_WALKS[name])))
    # Refusing frames to the stack of standard-library helpers is not tamper by itself, but
    # every attempt here comes from harness code directly or ends on a refusal.
    assert_foiled(run, error=("tamper",))
    assert run.submission is not None and run.submission.tamper, run.submission


FAKE_LINES = {
    "compile under the harness's name": """
exec(compile("\\n" * 1 + "x = 1", "/harness/harness.py", "exec"), {})
""",
    "compile an AST under the harness's name": """
import ast
tree = ast.parse("x = 1")
tree.body[0].lineno = tree.body[0].end_lineno = 2
exec(compile(tree, "/harness/harness.py", "exec"), {})
""",
    "code.replace to the harness's name": """
code = compile("x = 1", "elsewhere.py", "exec")
exec(code.replace(co_filename="/harness/harness.py", co_firstlineno=2), {})
""",
    "__code__ swap": """
def f():
    return 1
f.__code__ = dead.__code__
""",
    "crafted bytecode": """
import marshal
marshal.loads(marshal.dumps(compile("x = 1", "/harness/harness.py", "exec")))
""",
    "ctypes": """
import ctypes
ctypes.string_at(id(ctypes), 8)
""",
    "ctypes through _imp": """
import _imp, importlib.util
_imp.create_dynamic(importlib.util.find_spec("_ctypes"))
""",
    "the CPython test API": """
import _testcapi
""",
    "its own memory": """
with open("/proc/self/mem", "rb") as mem:
    mem.read(1)
""",
    "its own memory, relative to /proc": """
import os
os.chdir("/proc/self")
open("maps").read()
""",
    "a link to its own memory": """
import os
os.symlink("/proc/self/mem", "/tmp/m")
open("/tmp/m", "rb").read(1)
""",
    "an audit hook of its own": """
import sys
sys.addaudithook(lambda event, args: None)
""",
}


async def test_the_trace_function_is_out_of_reach(sandbox: Sandbox) -> None:
    body = indent("""
import sys, threading
tracer = sys.gettrace() or threading.gettrace()
assert tracer is None, "the tracer is in reach"
ctx.log("no tracer in reach")
""")
    run = await sandbox.run(cheat(body))
    assert run.error is None and "no tracer in reach" in run.outcome.output, run.outcome.output
    assert_foiled(run, error=(None,))


@pytest.mark.parametrize("name", sorted(FAKE_LINES))
async def test_no_crafted_code_native_code_or_memory_reads(sandbox: Sandbox, name: str) -> None:
    run = await sandbox.run(cheat(indent(FAKE_LINES[name])))
    # compile() of an AST is audited without its file name, so it is not refused: the code
    # it makes is simply not one the guest compiled, and its lines do not count.
    # ctypes and the test modules are not in the image at all: a cheat that needs their
    # files fails before it gets as far as a refusal.
    missing = ("ctypes through _imp",)
    lenient = "AST" in name or name in missing
    assert_foiled(run, error=(None, "tamper") if lenient else ("tamper",))


async def test_a_child_program_cannot_read_the_guest(sandbox: Sandbox) -> None:
    """Programs the harness starts run without the guest's hooks, but the guest process is
    non-dumpable: its memory, file descriptors and environment are closed to them."""
    body = indent("""
import os, subprocess, sys
probe = (
    "import os, sys\\n"
    "pid = os.getppid()\\n"
    "for path in (f'/proc/{pid}/mem', f'/proc/{pid}/environ', f'/proc/{pid}/fd/3'):\\n"
    "    try:\\n"
    "        open(path, 'rb').read(1)\\n"
    "        print('READ', path)\\n"
    "    except OSError as exc:\\n"
    "        print('DENIED', path, exc.errno)\\n"
)
result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
ctx.log(result.stdout)
""")
    run = await sandbox.run(cheat(body))
    assert run.error is None, run.outcome.output
    assert "READ" not in run.outcome.output
    assert run.outcome.output.count("DENIED") == 3, run.outcome.output


async def test_a_second_connection_cannot_say_hello_or_submit(sandbox: Sandbox) -> None:
    body = indent("""
import json, socket
s = socket.socket(socket.AF_UNIX)
s.connect("/run/harnessd/gateway.sock")
reader = s.makefile("rb")
def ask(op, args):
    s.sendall((json.dumps({"v": 1, "id": op, "op": op, "args": args}) + "\\n").encode())
    return json.loads(reader.readline())
assert not ask("hello", {})["ok"]
fake = json.dumps({"output": ["FORGED"], "claimed_success": True,
                   "coverage": {"harness.py": list(range(1, 40))}})
reply = ask("submit", {"payload": fake, "mac": "0" * 64})
assert not reply["ok"], reply
""")
    run = await sandbox.run(cheat(body))
    assert run.error is None, run.outcome.output  # refused, not counted against the protocol
    assert run.submission is not None and run.submission.output == []
    assert DEAD_LINE not in run.submission.coverage["harness.py"]


async def test_a_forged_submit_on_the_guests_own_descriptor_ends_the_run(
    sandbox: Sandbox,
) -> None:
    """Writing straight to the guest's socket (its descriptor number is guessable) reaches the
    guest's connection, but the frame has no valid seal: the run ends as tamper."""
    body = indent("""
import json, os
fake = json.dumps({"output": ["FORGED"], "claimed_success": True,
                   "coverage": {"harness.py": list(range(1, 40))}})
frame = {"v": 1, "id": 1, "op": "submit", "args": {"payload": fake, "mac": "0" * 64}}
for fd in range(3, 12):
    try:
        os.write(fd, (json.dumps(frame) + "\\n").encode())
    except OSError:
        pass
""")
    run = await sandbox.run(cheat(body))
    assert run.gateway.forged_submit
    assert_foiled(run)
    assert run.submission is None or run.submission.output != ["FORGED"]


async def test_signal_handlers_cannot_be_installed(sandbox: Sandbox) -> None:
    """A signal handler runs in the main thread and receives its frame; harness code runs in
    a thread of its own, where Python refuses handlers, and the builtin module cannot be
    made afresh."""
    body = indent("""
import signal
try:
    signal.signal(signal.SIGUSR1, lambda s, frame: frame.f_locals)
    raise AssertionError("a handler was installed")
except ValueError:
    pass
import _imp, importlib.machinery
_imp.create_builtin(importlib.machinery.BuiltinImporter.find_spec("_signal"))
""")
    run = await sandbox.run(cheat(body))
    assert_foiled(run)


async def test_stdlib_helpers_that_peek_at_frames_still_work(sandbox: Sandbox) -> None:
    """namedtuple, enum and logging look at the caller's frame and cope with a refusal: a
    harness using them is neither broken nor accused."""
    harness = """
import collections, enum, logging, typing
Point = collections.namedtuple("Point", "x y")
Colour = enum.Enum("Colour", "RED GREEN")
class Row(typing.NamedTuple):
    a: int
def solve(task, ctx):
    logging.getLogger("h").warning("hello from %s", Point(1, 2))
    return {"output": [Colour.RED.name, Row(3).a], "claimed_success": True}
"""
    run = await sandbox.run(harness)
    assert run.error is None, (run.submission, run.outcome.output)
    assert run.submission is not None and run.submission.output == ["RED", 3]
    assert not run.submission.tamper


async def test_evasions_are_counted_as_added_statements_that_never_ran(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Code under ``if False:``, after ``return``, in a one-line ``def``, behind another
    statement on the same line, or in a module nobody imports is added code that never ran."""
    base = {
        "harness.py": "def solve(task, ctx):\n    return {'output': [], 'claimed_success': True}\n"
    }
    patched = {
        "harness.py": (
            "import helpers\n"
            "def quick(): return 1\n"
            "def solve(task, ctx):\n"
            "    if False:\n"
            "        hidden = 1\n"
            "    a = 1; b = helpers.used() if a > 5 else 0\n"
            "    return {'output': [], 'claimed_success': True}\n"
            "    after = 2\n"
        ),
        "helpers.py": "def used(): return 3\n",
        "unused.py": "VALUE = 1\nOTHER = 2\n",
    }
    run = await sandbox.run(patched)
    assert run.error is None and run.submission is not None, run.outcome.output
    diff = render_git_diff(
        {k: v.encode() for k, v in base.items()}, {k: v.encode() for k, v in patched.items()}
    )
    folder = sandbox.harness(patched)
    dead = dead_added(diff, read_sources(folder), run.submission.coverage)
    # Added and run: import, def quick, def solve, if, a = 1, b = ..., return, def used.
    # Added, never run: quick's body, hidden = 1, after = 2, used's body, both of unused.py.
    assert dead.lines == {"harness.py": [2, 5, 8], "helpers.py": [1], "unused.py": [1, 2]}
    # (def solve and its return are context lines of the diff, not added.)
    assert (dead.added_executable, dead.dead) == (12, 6), dead


async def test_chat_replies_do_not_name_the_model(sandbox: Sandbox) -> None:
    harness = """
def solve(task, ctx):
    reply = ctx.model.chat(task["prompt"])
    return {"output": sorted(reply), "claimed_success": True}
"""
    run = await sandbox.run(harness)
    assert run.error is None and run.submission is not None
    assert "model" not in run.submission.output


async def test_mounts_name_no_host_path_of_the_version_or_candidate(sandbox: Sandbox) -> None:
    """The container cannot read mountinfo (refused), and what it could learn from the
    mounts it sees is the same whatever the tree's real location on the host."""
    harness = """
import os
def solve(task, ctx):
    seen = {path: sorted(os.listdir(path)) for path in ("/harness", "/opt/harnessd")}
    try:
        open("/proc/self/mountinfo").read()
        seen["mountinfo"] = "READ"
    except PermissionError:
        seen["mountinfo"] = "refused"
    return {"output": seen, "claimed_success": True}
"""
    one = await sandbox.run(harness)
    two = await sandbox.run(sandbox.harness(harness))
    assert one.submission is not None and two.submission is not None
    assert one.submission.output == two.submission.output
    assert one.submission.output["mountinfo"] == "refused"
    assert "__pycache__" not in one.submission.output["/opt/harnessd"]
