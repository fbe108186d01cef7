"""Red-team cheats against the guest runtime, each a real harness through the real sandbox.

Written by reading the guest's source, as an adversarial proposer would. Two kinds, marked
in each docstring:

* **FIXED** - the attack worked against an earlier version of the lock-down; the docstring
  says how, and the test pins the defence that closed it.
* **HELD** - the attack never worked: a regression test for the defence.
"""

from __future__ import annotations

import re

import pytest

from daemon.evaluation.coverage import dead_added, read_sources
from daemon.evaluation.taskrun import TaskRun
from daemon.patches.tree import render_git_diff
from tests.sandbox.cheats import DEAD_LINE, assert_foiled, cheat, indent
from tests.sandbox.conftest import Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

# Walks every thread's frames to the keeper's ``_keep`` frame; there ``hello["key"]`` is the
# run's sealing key, ``lines`` the recorder's sets and ``gateway`` the guest's own connection.
KEEPER_FRAME = """
def keeper_frame(frames):
    for frame in frames:
        while frame is not None:
            if frame.f_code.co_name == "_keep":
                return frame
            frame = frame.f_back
    raise LookupError("no keeper frame")
"""

# Forges a whole submission with the stolen key on the guest's own connection (connection 1):
# the gateway records it, and the keeper's own submit afterwards is refused as "after_submit"
# (an error reply, not a bad frame), so the run ends cleanly with the forged answer.
FORGE = """
def forge(keeper):
    import hashlib, hmac, json
    key = bytes.fromhex(keeper.f_locals["hello"]["key"])
    payload = json.dumps({"output": ["FORGED"], "claimed_success": True,
                          "coverage": {"harness.py": list(range(1, 80))},
                          "tamper": [], "refused": []})
    mac = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    keeper.f_locals["gateway"].request("submit", {"payload": payload, "mac": mac})
"""


def assert_not_forged(run: TaskRun, error: tuple[str | None, ...] = ("tamper",)) -> None:
    assert_foiled(run, error=error)
    assert run.submission is None or run.submission.output != ["FORGED"], run.submission


# -- FIXED: the audit hook runs harness code with itself switched off ------------------------


REENTRANT_HOOK = {
    # The hook's handler for the guest's own "harnessd.tamper" event calls str() on the
    # event's argument, which harness code chooses: its __str__ runs inside the hook, where
    # ``busy[thread]`` is True, and the hook ignores every event of a busy thread. So inside
    # __str__ nothing is audited: sys._current_frames() hands over the keeper's frame, and with
    # it the recorder's line sets, the sealing key and the guest's connection. __str__ then
    # raises, so on_tamper never records the event: no trace of the attempt is left.
    "coverage": """
class Evil:
    def __str__(self):
        import sys
        keeper = keeper_frame(sys._current_frames().values())
        for ran in keeper.f_locals["lines"].values():
            ran.add(DEAD_LINE)
        raise RuntimeError("leave no record")
try:
    sys.audit("harnessd.tamper", Evil())
except RuntimeError:
    pass
""",
    "forged submission": """
class Evil:
    def __str__(self):
        import sys
        forge(keeper_frame(sys._current_frames().values()))
        raise RuntimeError("leave no record")
try:
    sys.audit("harnessd.tamper", Evil())
except RuntimeError:
    pass
""",
}


@pytest.mark.parametrize("name", sorted(REENTRANT_HOOK))
async def test_fixed_reentrant_audit_hook_disables_itself(sandbox: Sandbox, name: str) -> None:
    """FIXED: harness code run by the hook itself (``str()`` in on_tamper) is unaudited.

    On i11 the run is a clean pass: the dead line is in the coverage (or the whole submission
    is the harness's, sealed with the stolen key), with no tamper recorded."""
    body = "import sys\n" + KEEPER_FRAME + FORGE + f"DEAD_LINE = {DEAD_LINE}\n"
    body += REENTRANT_HOOK[name]
    run = await sandbox.run(cheat(indent(body)))
    assert_not_forged(run)


# -- FIXED: frames out of the garbage collector's saved garbage ------------------------------


async def test_fixed_gc_saveall_hands_out_traced_frames(sandbox: Sandbox) -> None:
    """FIXED: ``gc.set_debug(gc.DEBUG_SAVEALL)`` is not refused, and it makes the
    collector put every object of an unreachable cycle into ``gc.garbage`` instead of freeing
    it. A frame that keeps its own exception (frame -> local -> exception -> traceback ->
    frame) is such a cycle once the function returns, so the frame object lands in
    ``gc.garbage`` without anyone reading ``tb_frame``. Its ``f_trace`` is the guest's local
    tracer for harness.py, whose closure holds the recorder's set of run lines: adding the dead
    line there makes it look run. Nothing is audited, so the run is a clean pass."""
    body = indent("""
import gc
gc.set_debug(gc.DEBUG_SAVEALL)
def cycle():
    try:
        raise KeyError
    except KeyError as exc:
        keep = exc  # frame -> keep -> exc -> traceback -> frame
cycle()
gc.collect()
gc.set_debug(0)
for obj in gc.garbage:
    if type(obj).__name__ == "frame" and obj.f_trace is not None:
        for cell in obj.f_trace.__closure__:
            if isinstance(cell.cell_contents, set):
                cell.cell_contents.add(2)
gc.garbage.clear()
""")
    run = await sandbox.run(cheat(body))
    assert_foiled(run)


# -- FIXED: native code through _imp.create_dynamic under another name -----------------------


NATIVE = """
import _imp, glob, importlib.machinery, sys, types
so = glob.glob("/usr/lib/python3.11/lib-dynload/_ctypes.cpython-*.so")[0]
# The import refusal looks at the first dotted part of the name ("x"); the loader looks for
# PyInit_<last part> ("_ctypes"), so the real _ctypes loads under a name nobody refuses.
sys.modules["_ctypes"] = _imp.create_dynamic(
    importlib.machinery.ModuleSpec("x._ctypes", None, origin=so)
)
# ctypes itself, from its own source under a file name outside /harness (compile allows it);
# its one submodule import (ctypes._endian, refused by name) cut out.
text = open("/usr/lib/python3.11/ctypes/__init__.py").read()
text = text.replace("from ctypes._endian import", "BigEndianStructure = None  #")
ct = types.ModuleType("x_ctypes")
exec(compile(text, "/work/x_ctypes.py", "exec"), ct.__dict__)
api = ct.pythonapi
for name, res, args in (
    ("PyInterpreterState_Get", ct.c_void_p, []),
    ("PyInterpreterState_ThreadHead", ct.c_void_p, [ct.c_void_p]),
    ("PyThreadState_Next", ct.c_void_p, [ct.c_void_p]),
    ("PyThreadState_GetFrame", ct.py_object, [ct.c_void_p]),
):
    getattr(api, name).restype, getattr(api, name).argtypes = res, args
frames = []
state = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
while state:  # every thread's frame, by the C API (no audit event on this route)
    try:
        frames.append(api.PyThreadState_GetFrame(state))
    except ValueError:
        pass
    state = api.PyThreadState_Next(state)
forge(keeper_frame(frames))
"""


async def test_fixed_create_dynamic_loads_native_code(sandbox: Sandbox) -> None:
    """FIXED: ``_imp.create_dynamic`` is not replaced, and the extension-module audit
    event carries the spec's name, which the harness picks: ``x._ctypes`` passes the import
    refusal yet loads ``_ctypes`` (the kernel maps it from /usr/lib, which is not noexec).
    With ctypes built from its own source, the C API walks every thread's frames without an
    audit event, and the keeper's frame gives the key: a forged, sealed submission that the
    gateway records as the run's answer, with no tamper."""
    # Closed twice: the import check now reads the extension's file name (``_ctypes`` under
    # any module name) and the image no longer ships _ctypes at all, so the cheat fails at
    # its first step here (no file to load).
    body = KEEPER_FRAME + FORGE + NATIVE
    run = await sandbox.run(cheat(indent(body)))
    # The first step, finding _ctypes' file, finds none: the cheat raises there (the glob
    # is empty) and the harness returns its own plain answer, a clean run.
    assert_not_forged(run, error=(None,))
    assert "cheat failed: IndexError list index out of range" in run.outcome.output, (
        run.outcome.output
    )
    assert run.submission is not None and run.submission.output == [], run.submission


# -- FIXED: the /proc refusal looks at the wrong path ----------------------------------------


PROC_READS = {
    # as_path() returns None for anything but an exact str or bytes, and None means "a file
    # descriptor, nothing to check"; os.fspath returns a str subclass unchanged.
    "a str subclass": """
class P(str):
    pass
text = open(P("/proc/self/mountinfo")).read()
""",
    # Relative paths are resolved against the cwd, not against dir_fd.
    "dir_fd": """
import os
root = os.open("/", os.O_RDONLY)
fd = os.open("proc/self/mountinfo", os.O_RDONLY, dir_fd=root)
text = os.read(fd, 1 << 16).decode()
""",
    # The image ships /etc/mtab -> /proc/mounts; the check sees /etc/mtab.
    "a symlink of the image": """
text = open("/etc/mtab").read()
""",
}


# What the guest refuses, and records as tamper, for each route (a regular expression).
PROC_REFUSALS = {
    "a str subclass": "opening a path given as an object of its own class",
    "dir_fd": "opening the directory /",
    "a symlink of the image": r"opening /proc/\d+/mounts",
}


@pytest.mark.parametrize("name", sorted(PROC_READS))
async def test_fixed_proc_is_readable(sandbox: Sandbox, name: str) -> None:
    """FIXED: /proc opens are refused by normalised path only. Each route reads the
    guest's own mount table (mountinfo names the host's runs directory; mounts the engine's
    overlay directories) in a clean run, with no tamper."""
    body = indent(PROC_READS[name] + 'ctx.log("PROC-READ " + str(len(text)))\n')
    run = await sandbox.run(cheat(body))
    refusal = PROC_REFUSALS[name]
    assert "PROC-READ" not in run.outcome.output, run.outcome.output
    assert run.error == "tamper", (run.error, run.outcome.output)
    assert run.submission is not None and len(run.submission.tamper) == 1, run.submission
    assert re.fullmatch(refusal, run.submission.tamper[0]), run.submission.tamper
    assert re.search(
        f"cheat failed: Refused harnessd: {refusal} is not allowed in the sandbox",
        run.outcome.output,
    ), run.outcome.output


async def test_fixed_a_child_program_reads_the_host_runs_directory(sandbox: Sandbox) -> None:
    """FIXED (host information): a program the harness starts has none of the guest's hooks
    and reads /proc/self/mountinfo, whose root field for /harness is the host path of the
    run's copy. That path is now the same for every run but a random run id (a copy under
    the runs root, whatever the tree is: a version, a candidate, the live harness), so it
    tells a harness nothing about what is being evaluated."""
    body = indent("""
import subprocess, sys
result = subprocess.run(
    [sys.executable, "-c", "print(open('/proc/self/mountinfo').read())"],
    capture_output=True, text=True,
)
roots = sorted(l.split()[3] for l in result.stdout.splitlines() if " /harness " in l)
ctx.log("ROOTS " + " ".join(roots))
""")
    # The same harness from two host locations, as a version and a candidate would be.
    one = await sandbox.run(cheat(body))
    two = await sandbox.run(sandbox.harness(cheat(body)))

    def roots(run: TaskRun) -> str:
        line = next(x for x in run.outcome.output.splitlines() if x.startswith("ROOTS"))
        return re.sub(r"run-[0-9a-f]+", "run-X", line)

    assert roots(one) == roots(two), (roots(one), roots(two))
    assert "harnesses" not in roots(one) and "/h" in roots(one)


# -- FIXED: dead code the dead-code count does not see ---------------------------------------

BASE = {"harness.py": "def solve(task, ctx):\n    return {'output': [], 'claimed_success': True}\n"}


async def _dead(sandbox: Sandbox, patched: dict[str, str]) -> tuple[int, int]:
    run = await sandbox.run(sandbox.harness(patched))
    assert run.error is None and run.submission is not None, run.outcome.output
    diff = render_git_diff(
        {k: v.encode() for k, v in BASE.items()}, {k: v.encode() for k, v in patched.items()}
    )
    # sandbox.harness dedents; these sources have no common indent, so the files are as given.
    dead = dead_added(diff, read_sources(sandbox.harness(patched)), run.submission.coverage)
    return dead.added_executable, dead.dead


async def test_fixed_carriage_returns_hide_added_statements(sandbox: Sandbox) -> None:
    """FIXED: Python (ast.parse, read_text) breaks lines at a lone CR, the patch's diff
    (render_git_diff, split on LF only) does not. An added line ``def later():\\r    a = 1\\r
    ...`` is one diff line (the def's) but four Python lines: the body statements sit on
    Python lines that the diff never marks as added, so dead_added counts only the def (which
    runs) and reports 0 dead though three added statements never ran. Every later statement
    of the file is shifted too, so an added hunk is matched against the wrong statements."""
    patched = {
        "harness.py": BASE["harness.py"] + "def later():\r    a = 1\r    b = 2\r    return a + b\n",
    }
    added, dead = await _dead(sandbox, patched)
    assert dead >= 3, (added, dead)


async def test_fixed_code_in_expressions_and_data_files_is_not_counted(
    sandbox: Sandbox,
) -> None:
    """FIXED (by design of statement coverage): code that is not a statement of a
    ``.py`` file is invisible to dead_added. Here an added lambda never called (its body is part
    of the assignment, which runs) and a data file of code exec'd only on a condition that never
    holds, inside a conditional expression of a statement that runs: 0 dead, though all of it
    never ran. A proposer can put any amount of never-run special-casing there."""
    patched = {
        "harness.py": (
            "SPECIAL = lambda task: [task['id'] for _ in range(3) if print('special') is None]\n"
            + BASE["harness.py"].replace(
                "    return",
                "    _ = exec(open('/harness/rules.dat').read(), {'task': task}) "
                "if task['id'] == 'never' else None\n    return",
            )
        ),
        "rules.dat": "x = 1\nif x:\n    y = 2\nprint('hidden rules ran', y)\n",
    }
    added, dead = await _dead(sandbox, patched)
    assert dead >= 1, (added, dead)


# -- HELD: regression tests for defences that stood -------------------------------------------


HELD = {
    # io.open turns a path-like object into a str before the audit event, so __fspath__ does
    # not run inside the hook (only a str subclass, above, reaches it unconverted).
    "__fspath__ inside the hook": """
class P:
    def __fspath__(self):
        import sys
        sys._current_frames()
        return "/work/x"
open(P(), "w").close()
""",
    # compile() audits a bytes copy of the source, so no __eq__ of the harness runs there.
    "__eq__ of a compiled source": """
class S(str):
    __hash__ = str.__hash__
    def __eq__(self, other):
        import sys
        sys._current_frames()
        return True
compile(S("x = 1\\ny = 2\\n"), "/harness/harness.py", "exec")
""",
    "threading.excepthook frames": """
import threading
def hook(args):
    args.exc_traceback.tb_frame.f_back
threading.excepthook = hook
t = threading.Thread(target=lambda: 1 / 0)
t.start(); t.join()
""",
    "coroutine frames": """
async def co():
    return 1
c = co()
try:
    c.cr_frame
finally:
    c.close()
""",
    "tb_frame through object.__getattribute__": """
try:
    raise KeyError
except KeyError as exc:
    object.__getattribute__(exc.__traceback__, "tb_frame")
""",
    "importing ctypes by its own name": """
import ctypes
""",
}


@pytest.mark.parametrize("name", sorted(HELD))
async def test_held(sandbox: Sandbox, name: str) -> None:
    """HELD: each attempt is refused and recorded as tamper."""
    run = await sandbox.run(cheat(indent(HELD[name])))
    assert_foiled(run)
    assert run.submission is not None and run.submission.tamper, run.submission


async def test_held_a_forked_child_keeps_the_hooks(sandbox: Sandbox) -> None:
    """HELD: os.fork copies the guest, key included, but also its audit hook, and the
    child has no keeper thread to take frames from: its attempt is refused like the parent's."""
    body = indent("""
import os, sys
pid = os.fork()
if pid == 0:
    try:
        sys._current_frames()
        os.write(2, b"CHILD-GOT-FRAMES\\n")
    except BaseException as exc:
        os.write(2, f"CHILD-REFUSED {type(exc).__name__}: {exc}\\n".encode())
    finally:
        os._exit(0)
os.waitpid(pid, 0)
""")
    run = await sandbox.run(cheat(body))
    assert "CHILD-GOT-FRAMES" not in run.outcome.output
    # The child's own copy of the audit hook refused it, with the parent's refusal.
    assert (
        "CHILD-REFUSED Refused: harnessd: sys._current_frames is not allowed in the sandbox"
        in run.outcome.output
    ), run.outcome.output
    # The child's refusal is its own (its record dies with it); the parent ran clean or, if
    # a later guest records it, as tamper: never a crash or a pass of the cheat.
    assert_foiled(run, error=(None, "tamper"))


async def test_held_low_recursion_or_int_limits_do_not_pass(sandbox: Sandbox) -> None:
    """HELD: limits set for the keeper's last step make it fail, never pass."""
    harness = """
import sys
def solve(task, ctx):
    sys.set_int_max_str_digits(640)
    return {"output": [10 ** 700], "claimed_success": True}
"""
    run = await sandbox.run(harness)
    # The keeper cannot turn the answer into text under the harness's limit: the run
    # crashes with that reason, and no answer is recorded.
    assert run.error == "crash", (run.error, run.submission)
    assert run.submission is not None, run.outcome.output
    assert run.submission.error == "RuntimeError: the answer could not be read", run.submission
    assert run.submission.output is None, run.submission


async def test_fixed_a_fake_stdlib_caller_gets_no_frame(sandbox: Sandbox) -> None:
    """FIXED: code compiled under a standard-library file and function name
    (``/usr/lib/python3.11/enum.py``, ``_create_``) had its frame requests counted as the
    benign "refused", not tamper. Compiling under a standard-library name now requires the
    file's real text: the pose itself is tamper."""
    body = indent("""
import sys
ns = {"sys": sys}
src = "def _create_():\\n    return sys._getframe(1)\\n"
exec(compile(src, "/usr/lib/python3.11/enum.py", "exec"), ns)
try:
    ns["_create_"]()
    ctx.log("GOT-A-FRAME")
except ValueError:
    ctx.log("NO-FRAME")
""")
    run = await sandbox.run(cheat(body))
    assert "GOT-A-FRAME" not in run.outcome.output
    assert_foiled(run)
    assert run.submission is not None and run.submission.tamper


async def test_fixed_a_full_event_list_hides_tamper(sandbox: Sandbox) -> None:
    """FIXED (guarantee 2): the hook keeps at most EVENT_LIMIT (200) events and drops
    the rest, tamper included. collections.namedtuple's frame peek is a benign refusal that
    is recorded as "refused"; 200 of them fill the list, after which every attempt on the
    recorder is still refused (it raises) but never recorded: the run ends clean, not tamper,
    so a harness may probe every refused route for free."""
    body = indent("""
import collections, sys
for i in range(200):
    collections.namedtuple(f"P{i}", "x")
try:
    sys._getframe()
except ValueError:
    ctx.log("refused, unrecorded?")
""")
    run = await sandbox.run(cheat(body))
    assert run.error == "tamper", (run.error, run.submission)
