"""Outages: which dependency of the work is down, since when and why, until it is back.

The Docker engine and the model providers can go away while the daemon runs (an engine
upgrade or crash, a model server restarting). That is an outage, not a failure of the work
in flight: whoever meets one reports it here, then waits for the dependency (the
improvement loop) or refuses at once with the reason (a live request). The monitor
(:meth:`Health.run`, one task of the service) probes each dependency with backoff and,
once it answers, runs its recovery (for the engine: remove what the lost engine left
behind) before it lets anyone resume.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskStatus

from daemon.errors import (
    EngineUnavailable,
    ProviderUnavailable,
    SandboxError,
    Unavailable,
    first_outage,
)
from daemon.events import Emit
from sandbox.engine import ENGINE_FIX, DockerEngine
from sandbox.errors import SandboxFailure, SandboxUnavailable

log = logging.getLogger("harnessd.health")

ENGINE = "engine"
CLUSTER = "cluster"  # the Ray cluster of the ``ray`` executor (ClusterUnavailable)
# The first probe waits a little: an engine being stopped still answers for a moment.
BACKOFF_FIRST_S = 2.0
BACKOFF_MAX_S = 15.0
# An outage that starts again this soon after the last one ended continues its backoff
# instead of starting over (a dependency that flaps is not hammered).
FLAP_WINDOW_S = 600.0
ERROR_LIMIT = 400

ModelHook = Callable[[str], Awaitable[None]]


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def describe(dependency: str) -> str:
    if dependency == CLUSTER:
        return "the Ray cluster"
    return "the Docker engine" if dependency == ENGINE else f"model provider {dependency}"


def _error_text(exc: BaseException) -> str:
    text = str(exc).removesuffix(f": {ENGINE_FIX}")
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 3] + "..."


@dataclass
class Outage:
    dependency: str  # "engine" or a model string
    error: str  # the latest error, as the dependency gave it
    fix: str  # what a person can do about it
    since: float
    probes: int = 0
    next_probe_at: float = 0.0
    back: anyio.Event = field(default_factory=anyio.Event)

    def explain(self) -> str:
        return (
            f"{describe(self.dependency)} is unavailable since {_clock(self.since)} "
            f"({self.error}); harnessd retries on its own and resumes when it is back; "
            f"{self.fix}"
        )

    def refusal(self) -> Unavailable:
        """The error a request that needs this dependency gets while it is down."""
        if self.dependency == ENGINE:
            return EngineUnavailable(self.explain(), fix=self.fix)
        return ProviderUnavailable(self.explain(), ref=self.dependency, fix=self.fix)

    def as_json(self) -> dict[str, Any]:
        return {
            "dependency": self.dependency,
            "what": describe(self.dependency),
            "error": self.error,
            "fix": self.fix,
            "since": self.since,
            "probes": self.probes,
            "next_probe_at": self.next_probe_at,
        }


class Health:
    """The outages under way. ``probe`` raises while a dependency is still down;
    ``recover`` runs once it answers, before anyone waiting is let go."""

    def __init__(self, emit: Emit, probe: ModelHook, recover: ModelHook) -> None:
        self._emit = emit
        self._probe = probe
        self._recover = recover
        self.outages: dict[str, Outage] = {}
        self._ended: dict[str, tuple[float, int]] = {}  # dependency -> (when, probes it took)
        self._changed = anyio.Event()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def check(self, needs: Iterable[str]) -> None:
        """Refuse at once (the outage's error) if any of ``needs`` is down."""
        for dependency in needs:
            outage = self.outages.get(dependency)
            if outage is not None:
                raise outage.refusal()

    async def report(self, exc: Unavailable) -> Outage:
        """Record that ``exc.dependency`` is down (once per outage, with an event)."""
        outage = self.outages.get(exc.dependency)
        if outage is not None:
            return outage
        now = time.time()
        ended, probes = self._ended.pop(exc.dependency, (0.0, 0))
        outage = Outage(exc.dependency, _error_text(exc), exc.fix, now)
        outage.probes = probes if now - ended < FLAP_WINDOW_S else 0
        outage.next_probe_at = now + _delay(outage.probes)
        self.outages[exc.dependency] = outage
        self._poke()
        await self._emit(
            "outage.started",
            f"{describe(exc.dependency)} unavailable: {outage.error}. Work in flight is "
            "interrupted and done again once it is back; harnessd retries with backoff. "
            f"Fix: {outage.fix}",
            level="error",
            dependency=exc.dependency,
            error=outage.error,
            fix=outage.fix,
        )
        return outage

    async def wait_back(self, dependency: str) -> None:
        outage = self.outages.get(dependency)
        if outage is not None:
            await outage.back.wait()

    def state(self) -> list[dict[str, Any]]:
        return [o.as_json() for o in self.outages.values()]

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Probe every dependency that is down, each on its own backoff, until cancelled."""
        task_status.started()
        while True:
            changed = self._changed
            for outage in [o for o in self.outages.values() if o.next_probe_at <= time.time()]:
                await self._try(outage)
            if not self.outages:
                await changed.wait()
                continue
            soonest = min(o.next_probe_at for o in self.outages.values())
            with anyio.move_on_after(max(0.0, soonest - time.time())):
                await changed.wait()

    async def _try(self, outage: Outage) -> None:
        what = describe(outage.dependency)
        try:
            await self._probe(outage.dependency)
            await self._recover(outage.dependency)
        except Exception as exc:  # still down, or down again while recovering
            outage.probes += 1
            outage.error = _error_text(exc)
            delay = _delay(outage.probes)
            outage.next_probe_at = time.time() + delay
            await self._emit(
                "outage.retrying",
                f"{what} still unavailable (probe {outage.probes}): {outage.error}; "
                f"next try in {delay:.0f} s",
                level="warning",
                persist=False,
                dependency=outage.dependency,
                probes=outage.probes,
                next_probe_at=outage.next_probe_at,
            )
            return
        del self.outages[outage.dependency]
        self._ended[outage.dependency] = (time.time(), outage.probes)
        down_s = time.time() - outage.since
        await self._emit(
            "outage.ended",
            f"{what} is back after {down_s:.0f} s; resuming",
            dependency=outage.dependency,
            down_s=round(down_s, 1),
        )
        outage.back.set()


def interruption(exc: BaseException) -> str:
    """Why work stopped before its end, in a few words (for events and records)."""
    outage = first_outage(exc)
    if outage is not None:
        return f"{describe(outage.dependency)} unavailable"
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "harnessd stopped"
    return f"{type(exc).__name__}: {exc}"[:200]


def _delay(probes: int) -> float:
    return float(min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**probes))


async def engine_outage(engine: DockerEngine, exc: BaseException) -> EngineUnavailable | None:
    """The engine outage behind a sandbox failure, or None if the engine is fine.

    The engine is down if the failure says so anywhere in its chain, or if it does not
    answer now: a container killed as the engine shut down can fail in other ways first.
    """
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, EngineUnavailable):
            return cause
        if isinstance(cause, SandboxUnavailable):
            return EngineUnavailable(str(cause), fix=ENGINE_FIX)
        cause = cause.__cause__ or cause.__context__
    try:
        await engine.ping()
    except SandboxUnavailable as down:
        return EngineUnavailable(str(down), fix=ENGINE_FIX)
    return None


@asynccontextmanager
async def engine_watch(engine: DockerEngine) -> AsyncIterator[None]:
    """Turn a sandbox failure inside the block into :class:`EngineUnavailable` when the
    engine is what failed; other failures pass through unchanged."""
    try:
        yield
    except (SandboxError, SandboxFailure) as exc:
        outage = await engine_outage(engine, exc)
        if outage is None or outage is exc:
            raise
        raise outage from exc


async def require_engine(engine: DockerEngine) -> None:
    """Raise :class:`EngineUnavailable` unless the engine answers now."""
    try:
        await engine.ping()
    except SandboxUnavailable as down:
        raise EngineUnavailable(str(down), fix=ENGINE_FIX) from None
