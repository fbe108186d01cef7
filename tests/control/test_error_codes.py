"""Every deliberate error reaches the client with a code of its own and its message; only
an exception that is not a ``HarnessdError`` (a bug) is ``internal``."""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import daemon
from daemon.control import ctl
from daemon.control.error_codes import WIRE_CODES, wire_code
from daemon.control.protocol import ControlError, ErrorCode
from daemon.control.server import _dispatch, serve_control
from daemon.errors import BudgetExceeded, HarnessdError, SetupError

pytestmark = pytest.mark.unit

# Run as a child process of the daemon, never imported by it (it imports ray).
_NOT_IMPORTED = ("daemon.cluster.ray_driver",)


def _all_subclasses(root: type) -> set[type]:
    found: set[type] = set()
    todo = [root]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _unmapped(classes: set[type]) -> list[str]:
    return sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if c not in WIRE_CODES and not issubclass(c, ControlError)
    )


def _daemon_errors() -> set[type]:
    for info in pkgutil.walk_packages(daemon.__path__, "daemon."):
        if info.name not in _NOT_IMPORTED:
            importlib.import_module(info.name)
    return {c for c in _all_subclasses(HarnessdError) if c.__module__.startswith("daemon.")}


def test_every_harnessd_error_has_its_own_row_in_the_table() -> None:
    classes = _daemon_errors()
    assert {SetupError, BudgetExceeded} <= classes  # the walk found them
    assert not _unmapped(classes), (
        f"HarnessdError subclasses without a wire code: {_unmapped(classes)}; "
        "add each to daemon/control/error_codes.py"
    )


def test_the_check_fails_for_an_unmapped_error() -> None:
    class Unmapped(SetupError):
        pass

    assert _unmapped({Unmapped, SetupError}) == [f"{__name__}.{Unmapped.__qualname__}"]
    # At run time it still travels with its parent's code, never as internal.
    assert wire_code(Unmapped("x")) is ErrorCode.SETUP


def _instance(cls: type[HarnessdError], message: str) -> HarnessdError:
    """An instance whatever its constructor takes (only its class and message matter)."""
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    return exc


def test_a_verb_error_reaches_the_wire_with_its_code_and_message() -> None:
    async def reply_to(exc: BaseException) -> dict[str, Any]:
        async def call(verb: str, args: dict[str, Any]) -> Any:
            raise exc

        return await _dispatch(call, "status", {}, 7)

    for cls, code in WIRE_CODES.items():
        reply = anyio.run(reply_to, _instance(cls, f"{cls.__name__}: what to do"))
        assert reply["error"] == {"code": code.value, "message": f"{cls.__name__}: what to do"}
        assert code is not ErrorCode.INTERNAL
    own = anyio.run(reply_to, ControlError(ErrorCode.INVALID_POLICY, "p.toml: bad"))
    assert own["error"]["code"] == "invalid_policy"
    bug = anyio.run(reply_to, KeyError("oops"))
    assert bug["error"] == {"code": "internal", "message": "'status' failed; see the daemon log"}


class _Failing:
    """A control handler whose verbs raise what the test gives them."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def call(self, verb: str, args: dict[str, Any]) -> Any:
        raise self.exc

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield


@contextlib.contextmanager
def _serving(exc: BaseException) -> Iterator[Path]:
    """The real control server on a socket, on an event loop in a thread of its own."""
    folder = Path(tempfile.mkdtemp(prefix="ctl-", dir="/tmp"))  # short: a socket path limit
    path = folder / "control.sock"
    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            serving, _ = portal.start_task(serve_control, path, _Failing(exc))
            try:
                yield path
            finally:
                serving.cancel()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (SetupError("no sandbox image: run 'harnessd image build'"), "setup"),
        (BudgetExceeded("hour", 120, 100), "budget"),
    ],
)
def test_harnessctl_prints_the_code_and_message_and_exits_1(
    exc: HarnessdError, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with _serving(exc) as path:
        assert ctl.main(["--socket", str(path), "status"]) == 1
        assert capsys.readouterr().err == f"harnessctl: error ({code}): {exc}\n"
        assert ctl.main(["--socket", str(path), "--json", "status"]) == 1
        out = capsys.readouterr().out
    assert f'"code": "{code}"' in out and str(exc) in out
