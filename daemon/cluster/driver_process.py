"""The daemon's side of the Ray driver process (:mod:`daemon.cluster.ray_driver`).

One request per line on its stdin, replies matched by id as they come back on its
stdout. The process ending (Ray exits it when the head goes) fails every request waiting,
and every later one, with :class:`~daemon.errors.ClusterUnavailable` until a new driver is
started (:meth:`DriverProcess.start`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
from anyio.abc import Process, TaskGroup

from daemon.errors import ClusterUnavailable
from daemon.jsonlines import FrameError, LineReader, encode_frame

# Connecting to a cluster's head takes seconds; on a loaded 2-core machine, tens of them.
INIT_S = 120.0
MAX_REPLY = 1 << 20
STOP_S = 10.0


@dataclass
class PendingReply:
    """A reply on its way: ``value`` None with ``done`` set means the driver is gone."""

    done: anyio.Event = field(default_factory=anyio.Event)
    value: dict[str, Any] | None = None

    async def wait(self) -> dict[str, Any]:
        await self.done.wait()
        if self.value is None:
            raise ClusterUnavailable("the Ray driver process ended (the cluster's head is gone?)")
        return self.value


class DriverProcess:
    def __init__(self, proc: Process, log: IO[bytes], address: str) -> None:
        self._proc = proc
        self._log = log
        self.address = address
        self._reader = LineReader(_stdout(proc), MAX_REPLY)
        self._waiting: dict[str, PendingReply] = {}
        self._send_lock = anyio.Lock()
        self.gone: str | None = None
        self._serial = 0

    @classmethod
    async def start(cls, address: str, log_path: Path, tg: TaskGroup) -> DriverProcess:
        """Start a driver connected to ``address``; raise ClusterUnavailable if it cannot."""
        log = log_path.open("ab")
        env = {**os.environ, "RAY_ADDRESS": address}
        # Give up on a lost head in seconds (Ray's default is a minute of retries).
        env.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "10")
        proc = await anyio.open_process(
            [sys.executable, "-m", "daemon.cluster.ray_driver", address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
        )
        driver = cls(proc, log, address)
        try:
            first: dict[str, Any] | FrameError | None = None
            with anyio.move_on_after(INIT_S):
                first = await driver._reader.read()
            if not isinstance(first, dict) or not first.get("ok"):
                why = first.get("error") if isinstance(first, dict) else "no answer"
                raise ClusterUnavailable(f"cannot connect to the Ray cluster at {address}: {why}")
        except BaseException:
            await driver.aclose()
            raise
        tg.start_soon(driver._pump)
        return driver

    def next_id(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{self._serial}"

    async def _pump(self) -> None:
        try:
            while (frame := await self._reader.read()) is not None:
                if isinstance(frame, dict):
                    slot = self._waiting.pop(str(frame.get("id")), None)
                    if slot is not None:
                        slot.value = frame
                        slot.done.set()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self.gone = self.gone or "the Ray driver process ended"
            for slot in self._waiting.values():
                slot.done.set()
            self._waiting.clear()

    async def submit(self, message: dict[str, Any], *, reply: bool = True) -> PendingReply:
        """Send ``message`` (its ``id`` set when a reply is wanted); the reply to wait on."""
        if self.gone is not None:
            raise ClusterUnavailable(f"{self.gone}; the cluster at {self.address} is unavailable")
        slot = PendingReply()
        if reply:
            self._waiting[str(message["id"])] = slot
        try:
            async with self._send_lock:
                await _stdin(self._proc).send(encode_frame(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._waiting.pop(str(message.get("id")), None)
            self.gone = "the Ray driver process stopped reading"
            raise ClusterUnavailable(f"{self.gone}; the cluster is unavailable") from exc
        if not reply:
            slot.done.set()
            slot.value = {}
        return slot

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        slot = await self.submit({"op": op, "id": self.next_id(op), **fields})
        return await slot.wait()

    def forget(self, rid: str) -> None:
        self._waiting.pop(rid, None)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            self.gone = self.gone or "closed"
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await _stdin(self._proc).aclose()
            with anyio.move_on_after(STOP_S):
                await self._proc.wait()
            if self._proc.returncode is None:
                self._proc.kill()
                await self._proc.wait()
            await self._proc.aclose()
            self._log.close()


def _stdin(proc: Process) -> Any:
    assert proc.stdin is not None
    return proc.stdin


def _stdout(proc: Process) -> Any:
    assert proc.stdout is not None
    return proc.stdout
