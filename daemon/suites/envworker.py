"""The daemon's handle on a tool-environment worker: a process per episode, with deadlines.

The worker (``daemon/suites/toolenv``) runs the simulated APIs with harness-chosen
arguments, which can take unbounded time in a single C call, grow without bound, or change
process globals; so it is a child process with its own memory and CPU limits, started
without ``daemon`` on its path and without the daemon's environment (no keys), a fixed hash
seed (some API results print sets) and ``/`` as its working directory. Every request has a
deadline. When a tool call misses its deadline, or takes the worker down, the worker is
killed and a fresh one replays the episode's log (both suites are deterministic given the
calls); the call itself is recorded with an error text and is not run again, so the
harness gets a tool result, not a broken episode.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from daemon.suites.base import EnvironmentFailed
from daemon.suites.toolenv import worker_protocol

log = logging.getLogger("harnessd.envworker")

TOOLENV_DIR = Path(__file__).resolve().parent / "toolenv"
# Loads the folder as the package ``harnessd_toolenv`` (relative imports inside it), so the
# worker never imports ``daemon`` and nothing else on the path can stand in for it.
_BOOT = (
    "import importlib.util, sys\n"
    "d = sys.argv[1]\n"
    "s = importlib.util.spec_from_file_location('harnessd_toolenv', d + '/__init__.py',"
    " submodule_search_locations=[d])\n"
    "m = importlib.util.module_from_spec(s)\n"
    "sys.modules['harnessd_toolenv'] = m\n"
    "s.loader.exec_module(m)\n"
    "from harnessd_toolenv.worker import main\n"
    "main()\n"
)
STDERR_KEEP = 4000
CRASH_RESULT = "Error during execution: the tool call ended the environment (out of {what})"


@dataclass(frozen=True)
class WorkerLimits:
    call_s: float = 10.0  # one tool call
    start_s: float = 60.0  # start-up, one replay, the final check
    memory_mb: int = 2048
    cpu_s: int = 600  # the whole episode's CPU time


def command() -> list[str]:
    # -s: no user site; -P: neither the working directory nor a script's folder on the path
    # (the environment below has no PYTHONPATH). Not -I: that would ignore PYTHONHASHSEED.
    return [sys.executable, "-s", "-P", "-B", "-c", _BOOT, str(TOOLENV_DIR)]


def worker_env() -> dict[str, str]:
    """Nothing of the daemon's environment (keys, paths); a fixed hash seed, because some
    API results print sets, and a restored worker must replay exactly."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


class _Dead(Exception):
    """The worker missed a deadline or ended; it has been killed."""

    def __init__(self, why: str, *, timed_out: bool = False) -> None:
        super().__init__(why)
        self.timed_out = timed_out


class EnvWorker:
    """One worker process (replaced on failure) and the log that can rebuild its state."""

    def __init__(self, start: dict[str, Any], limits: WorkerLimits, tg: anyio.abc.TaskGroup):
        self._start = start
        self.limits = limits
        self._tg = tg
        self._proc: anyio.abc.Process | None = None
        self._out: BufferedByteReceiveStream | None = None
        self._log: list[tuple[str, dict[str, Any]]] = []
        self._stderr: deque[str] = deque(maxlen=40)
        self.restarts = 0

    # -- process --------------------------------------------------------------------------

    async def _spawn(self) -> None:
        proc = await anyio.open_process(
            command(),
            env=worker_env(),
            cwd="/",
            start_new_session=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._proc = proc
        assert proc.stdout is not None and proc.stderr is not None
        self._out = BufferedByteReceiveStream(proc.stdout)
        self._tg.start_soon(self._drain, proc.stderr)
        if await self._exchange(None, self.limits.start_s) != worker_protocol.READY:
            raise _Dead("the worker did not say it was ready")
        await self._call("start", self._start, self.limits.start_s)

    async def _drain(self, stream: anyio.abc.ByteReceiveStream) -> None:
        try:
            async for chunk in stream:
                text = chunk.decode("utf-8", "replace")
                self._stderr.extend(line for line in text.splitlines() if line.strip())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)[-STDERR_KEEP:]

    async def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
            await proc.aclose()

    async def close(self) -> None:
        """Ask the worker to stop (end of its input), then make sure it has."""
        proc = self._proc
        if proc is None:
            return
        with anyio.CancelScope(shield=True):
            if proc.stdin is not None:
                await proc.stdin.aclose()
            with anyio.move_on_after(5):
                await proc.wait()
            await self.kill()

    # -- requests -------------------------------------------------------------------------

    async def _exchange(self, frame: dict[str, Any] | None, limit_s: float) -> Any:
        proc, out = self._proc, self._out
        if proc is None or out is None or proc.stdin is None:
            raise _Dead("no worker")
        try:
            with anyio.fail_after(limit_s):
                if frame is not None:
                    await proc.stdin.send(worker_protocol.encode(frame))
                line = await out.receive_until(b"\n", worker_protocol.MAX_LINE)
        except TimeoutError:
            await self.kill()
            raise _Dead(f"no reply within {limit_s:g} s", timed_out=True) from None
        except (
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.IncompleteRead,
            anyio.DelimiterNotFound,
        ) as exc:
            await self.kill()
            raise _Dead(f"the worker ended ({type(exc).__name__})") from None
        return json.loads(line)

    async def _call(self, op: str, args: dict[str, Any], limit_s: float) -> Any:
        reply = await self._exchange({"op": op, "args": args}, limit_s)
        if not reply.get("ok"):
            raise EnvironmentFailed(f"tool environment {op}: {reply.get('error')}")
        return reply.get("value")

    async def open(self) -> None:
        try:
            await self._spawn()
        except _Dead as exc:
            raise EnvironmentFailed(self._why("could not start", exc)) from None

    def _why(self, what: str, exc: Exception) -> str:
        tail = self.stderr_tail().splitlines()[-3:]
        return f"the tool environment {what} ({exc})" + (f": {' | '.join(tail)}" if tail else "")

    async def _restore(self) -> None:
        """A fresh worker with the episode's state, from the log."""
        self.restarts += 1
        try:
            await self._spawn()
            for op, args in self._log:
                await self._call(op, args, self.limits.start_s)
        except _Dead as exc:
            raise EnvironmentFailed(self._why("could not be restored", exc)) from None

    async def reset(self) -> None:
        """A fresh worker in the task's initial state, the log emptied (a new run of the
        task). Whatever the old process was doing (a call the lost run left mid-way, its
        reply never read) dies with it."""
        await self.kill()
        self._log.clear()
        try:
            await self._spawn()
        except _Dead as exc:
            raise EnvironmentFailed(self._why("could not be started again", exc)) from None

    async def request(self, op: str, args: dict[str, Any], *, logged: bool = True) -> Any:
        """A request that changes state; replayed on a restored worker."""
        try:
            value = await self._call(op, args, self.limits.start_s)
        except _Dead as exc:
            raise EnvironmentFailed(self._why(f"failed during {op}", exc)) from None
        if logged:
            self._log.append((op, args))
        return value

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> str:
        args = {"name": name, "arguments": arguments}
        try:
            value = await self._call("call", args, self.limits.call_s)
        except _Dead as exc:
            text = (
                worker_protocol.TIMEOUT_RESULT.format(limit=self.limits.call_s)
                if exc.timed_out
                else CRASH_RESULT.format(what="memory or CPU time")
            )
            log.info("tool call %s cut off (%s); restoring the environment", name, exc)
            await self._restore()
            entry = {**args, "text": text}
            await self.request("record_timeout", entry)
            return text
        self._log.append(("call", args))
        return str(value["text"])


@asynccontextmanager
async def open_worker(start: dict[str, Any], limits: WorkerLimits) -> AsyncIterator[EnvWorker]:
    """A started worker for one episode; killed on the way out, whatever happened."""
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        worker = EnvWorker(start, limits, tg)
        try:
            await worker.open()
            yield worker
        except BaseException as exc:
            failure = exc  # re-raised as itself below, not wrapped in a group
        finally:
            await worker.close()
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


def run_once(op: str, args: dict[str, Any], *, timeout_s: float) -> Any:
    """One request in a worker of its own, blocking (suite loading, in a worker thread)."""
    frames = worker_protocol.encode({"op": op, "args": args})
    try:
        proc = subprocess.run(
            command(),
            input=frames,
            capture_output=True,
            env=worker_env(),
            cwd="/",
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentFailed(f"the tool environment's {op} took over {timeout_s:g} s") from None
    lines = proc.stdout.splitlines()
    reply = json.loads(lines[1]) if len(lines) > 1 else None
    if not isinstance(reply, dict) or not reply.get("ok"):
        why = reply.get("error") if isinstance(reply, dict) else proc.stderr.decode()[-500:]
        raise EnvironmentFailed(f"the tool environment's {op} failed: {why}")
    return reply.get("value")
