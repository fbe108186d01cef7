"""Waiting for a condition in a test: the one poll loop.

``wait_until`` polls a probe until it returns something truthy and returns that; on timeout
it fails with what was awaited (and, for a daemon, the tail of its log). ``wait_for_daemon``
also fails at once when the daemon process died, instead of waiting out the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from tests.daemon_process import RunningDaemon

T = TypeVar("T")
DECIDED = ("accepted", "rejected")


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.5,
    detail: Callable[[], str] = lambda: "",
) -> T:
    """The first truthy value ``probe`` returns within ``timeout`` seconds; AssertionError
    naming ``what`` (and ``detail()``, e.g. a log tail) otherwise. The probe runs at least
    once, and once more at the deadline, so a slow probe is not cut short."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() >= deadline:
            more = detail()
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}"
                + (f":\n{more}" if more else "")
            )
        time.sleep(interval)


def log_tail(daemon: RunningDaemon, chars: int = 3000) -> str:
    return daemon.log.read_text()[-chars:]


def wait_for_daemon(
    daemon: RunningDaemon,
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 1.0,
) -> T:
    """``wait_until`` for a condition a running daemon should reach: fails at once (with its
    log) if the daemon exits first."""

    def alive_probe() -> T | None:
        assert daemon.proc.poll() is None, f"harnessd exited while waiting for {what}:\n" + (
            log_tail(daemon)
        )
        return probe()

    return wait_until(
        alive_probe, timeout=timeout, what=what, interval=interval, detail=lambda: log_tail(daemon)
    )


def wait_for_decided(daemon: RunningDaemon, n: int, timeout: float) -> dict[str, Any]:
    """The ``lineage`` reply (last 50 candidates) once at least ``n`` candidates are decided
    (accepted or rejected)."""

    def probe() -> dict[str, Any] | None:
        with daemon.client() as c:
            lineage: dict[str, Any] = c.call("lineage", candidates=50)
        done = sum(x["state"] in DECIDED for x in lineage["candidates"])
        return lineage if done >= n else None

    return wait_for_daemon(daemon, probe, timeout=timeout, what=f"{n} decided candidates")
