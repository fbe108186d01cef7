"""The code-check boundary as a facility, on real Docker: any program, any trusted checker.

The ``sandbox`` fixture fails a test that leaves a container or a check directory behind.
Cheats written as HumanEval answers are in ``tests/suites/test_code_check_cheats.py``.
"""

from __future__ import annotations

import textwrap

import anyio
import pytest

from sandbox.codecheck.host import run_check
from sandbox.codecheck.spec import CheckVerdict, CodeCheck
from sandbox.errors import SandboxFailure
from tests.sandbox.conftest import SMALL, Sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def _check(sandbox: Sandbox, program: str, checker: str, **kw: float) -> CheckVerdict:
    check = CodeCheck(
        program=textwrap.dedent(program),
        function="f",
        checker_source=textwrap.dedent(checker),
        **kw,
    )
    return await run_check(
        sandbox.engine,
        sandbox.image,
        check,
        limits=SMALL,
        labels=sandbox.labels,
        parent=sandbox.runs_dir,
    )


async def test_any_program_and_checker(sandbox: Sandbox) -> None:
    program = """
        def f(a, b=0, *, scale=1):
            return {"sum": (a + b) * scale, "kinds": [type(a).__name__, type(b).__name__]}
    """
    checker = """
        import math
        def check(f):
            assert f(2, 3) == {"sum": 5, "kinds": ["int", "int"]}
            assert f(1.5, b=0.5, scale=2)["sum"] == 4.0
            assert f("a", "b")["sum"] == "ab"
            assert f((1,), (2,))["sum"] == (1, 2)
            assert math.isnan(f(math.nan)["sum"]) and f(-math.inf)["sum"] == -math.inf
            try:
                f(None)
            except TypeError:
                pass
            else:
                raise AssertionError("a TypeError was expected")
    """
    verdict = await _check(sandbox, program, checker)
    assert verdict.passed and verdict.kind == "passed" and verdict.detail == "ok"
    assert verdict.calls == 7
    wrong = await _check(sandbox, program.replace("(a + b)", "(a - b)"), checker)
    assert not wrong.passed and wrong.kind == "failed"
    assert wrong.detail == "AssertionError: a hidden test failed" and wrong.calls == 1


# The program reports what the candidate side can see and do; the checker (trusted) holds
# what it must see, and checks its own side too.
WORLD = """
    import os, socket

    def f():
        def attempt(action):
            try:
                return action()
            except OSError as exc:
                return type(exc).__name__

        code = sorted(os.listdir("/code"))
        package = sorted(os.listdir("/code/sandbox/codecheck"))
        second = socket.socket(socket.AF_UNIX)
        return {
            "uid": os.getuid(), "gid": os.getgid(), "code": code, "package": package,
            "shared": attempt(lambda: os.listdir("/run/harnessd")),
            "write_shared": attempt(lambda: open("/run/harnessd/x", "w") and "written"),
            "connect_again": attempt(lambda: second.connect("/run/harnessd/check.sock")),
            "harness": sorted(os.listdir("/harness")),
            "mounts": sorted(line.split()[4] for line in open("/proc/self/mountinfo")),
        }
"""
WORLD_CHECK = """
    import os

    def check(f):
        seen = f()
        assert seen["uid"] == seen["gid"] == 65534
        assert seen["code"] == ["program.json", "sandbox"]
        assert [p for p in seen["package"] if p.endswith(".py")] == [
            "__init__.py", "boundary.py", "candidate.py", "codec.py"]
        # Not even listable when the host could give the folder to the trusted uid; and the
        # listener is gone once the candidate has connected.
        assert seen["shared"] in ([], "PermissionError"), seen["shared"]
        assert seen["write_shared"] in ("OSError", "PermissionError")
        assert seen["connect_again"] in ("FileNotFoundError", "ConnectionRefusedError")
        assert seen["harness"] == []
        assert "/code" in seen["mounts"] and "/run/harnessd" in seen["mounts"]
        # And this side: its own uid, its own files, the token nowhere but check.json.
        assert os.getuid() == os.getgid() == 65533
        assert sorted(os.listdir("/code")) == ["check.json", "sandbox"]
        assert "proxy.py" in os.listdir("/code/sandbox/codecheck")
"""


async def test_each_side_sees_only_its_own_files_and_the_socket(sandbox: Sandbox) -> None:
    verdict = await _check(sandbox, WORLD, WORLD_CHECK)
    assert verdict.passed, verdict


async def test_a_trusted_side_without_a_verdict_fails(sandbox: Sandbox) -> None:
    quits = await _check(sandbox, "def f(): return 1\n", "import os\nos._exit(0)\n")
    assert not quits.passed and quits.kind == "no_verdict"
    assert quits.detail == "the trusted side gave no verdict (exit code 0)"
    hoards = "def check(f):\n    h = []\n    while True:\n        h.append(bytearray(2**20))\n"
    oom = await _check(sandbox, "def f(): return 1\n", hoards)
    assert not oom.passed and oom.kind in ("no_verdict", "internal"), oom


async def test_a_broken_checker_is_internal_not_the_candidates_fault(sandbox: Sandbox) -> None:
    verdict = await _check(sandbox, "def f(): return 1\n", "def check(f):\n    f(object())\n")
    assert not verdict.passed and verdict.kind == "internal"
    assert "cannot cross" in verdict.detail
    missing = await _check(sandbox, "def f(): return 1\n", "def checker_with_other_name(f): pass")
    assert missing.kind == "internal" and missing.detail == "the trusted side failed: KeyError"


async def test_time_limits_per_call_and_per_check(sandbox: Sandbox) -> None:
    slow = "import time\ndef f(n):\n    time.sleep(n)\n    return n\n"
    checker = "def check(f):\n    assert f(0) == 0\n    f(30)\n"
    per_call = await _check(sandbox, slow, checker, timeout_s=20.0, call_timeout_s=1.0)
    assert per_call.kind == "timeout" and per_call.detail == "a call took longer than 1 s"
    assert per_call.calls == 2
    total = await _check(sandbox, slow, checker, timeout_s=2.0)
    assert total.kind == "timeout" and total.detail == "the check ran out of time"


async def test_cancelling_a_check_leaves_nothing_behind(sandbox: Sandbox) -> None:
    started = anyio.Event()

    async def watch() -> None:
        for _ in range(1200):  # a condition, polled for at most a minute; not a fixed wait
            if len(await sandbox.containers()) == 2:
                started.set()
                return
            await anyio.sleep(0.05)
        raise AssertionError("the check's two containers never appeared")

    hung = "while True:\n    pass\n"
    async with anyio.create_task_group() as group:
        group.start_soon(watch)

        async def run() -> None:
            await _check(sandbox, hung, "def check(f):\n    f()\n", timeout_s=60.0)

        group.start_soon(run)
        await started.wait()
        group.cancel_scope.cancel()
    assert await sandbox.containers() == []
    assert list(sandbox.runs_dir.iterdir()) == []


async def test_an_engine_failure_is_raised_and_cleaned_up(sandbox: Sandbox) -> None:
    check = CodeCheck(program="def f(): pass\n", function="f", checker_source="")
    with pytest.raises(SandboxFailure, match="no-such-image"):
        await run_check(
            sandbox.engine,
            "harnessd-sandbox:no-such-image",
            check,
            limits=SMALL,
            labels=sandbox.labels,
            parent=sandbox.runs_dir,
        )
    assert list(sandbox.runs_dir.iterdir()) == []
