"""The outage monitor: one event per outage, probes on a growing backoff, recovery before
anyone resumes, and refusals that say what is down and what to do."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from daemon.errors import EngineUnavailable, ProviderUnavailable
from daemon.evaluation import health
from daemon.evaluation.health import ENGINE, Health

pytestmark = [pytest.mark.anyio, pytest.mark.unit]


class World:
    """Dependencies that are down until told otherwise; records events and recoveries."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.recovered: list[str] = []
        self.probes: list[str] = []
        self.three_probes = anyio.Event()

    async def emit(self, kind: str, message: str, **data: Any) -> None:
        self.events.append((kind, message, data))

    async def probe(self, dependency: str) -> None:
        self.probes.append(dependency)
        if len(self.probes) >= 3:
            self.three_probes.set()
        if dependency in self.down:
            raise ConnectionRefusedError(f"{dependency} refuses")

    async def recover(self, dependency: str) -> None:
        self.recovered.append(dependency)

    def kinds(self) -> list[str]:
        return [k for k, _, _ in self.events]


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "BACKOFF_FIRST_S", 0.01)
    monkeypatch.setattr(health, "BACKOFF_MAX_S", 0.04)


def _lost_engine() -> EngineUnavailable:
    return EngineUnavailable("Docker engine stopped answering", fix="start it")


async def test_an_outage_is_reported_once_probed_until_back_then_recovered() -> None:
    world = World()
    monitor = Health(world.emit, world.probe, world.recover)
    world.down.add(ENGINE)
    async with anyio.create_task_group() as tg:
        await tg.start(monitor.run)
        await monitor.report(_lost_engine())
        await monitor.report(_lost_engine())  # a second task meeting the same outage
        assert world.kinds() == ["outage.started"]
        with pytest.raises(EngineUnavailable) as refused:
            monitor.check([ENGINE])
        assert "retries on its own" in str(refused.value) and "start it" in str(refused.value)
        monitor.check(["local:smollm2-135m"])  # another dependency: not refused
        with anyio.fail_after(10):
            await world.three_probes.wait()
        assert world.recovered == []  # nothing recovers while it is still down
        world.down.clear()
        with anyio.fail_after(10):
            await monitor.wait_back(ENGINE)
        assert world.recovered == [ENGINE]
        monitor.check([ENGINE])
        assert monitor.state() == []
        tg.cancel_scope.cancel()
    assert world.kinds()[-1] == "outage.ended"
    retries = [d for k, _, d in world.events if k == "outage.retrying"]
    assert [d["probes"] for d in retries] == list(range(1, len(retries) + 1))


async def test_backoff_grows_to_its_cap_and_a_flapping_dependency_keeps_it() -> None:
    assert [health._delay(n) for n in range(6)] == [0.01, 0.02, 0.04, 0.04, 0.04, 0.04]
    world = World()
    monitor = Health(world.emit, world.probe, world.recover)
    ref = "openai:gpt-test"
    world.down.add(ref)
    async with anyio.create_task_group() as tg:
        await tg.start(monitor.run)
        await monitor.report(ProviderUnavailable("refused", ref=ref))
        with anyio.fail_after(10):
            await world.three_probes.wait()
        world.down.clear()
        await monitor.wait_back(ref)
        world.down.add(ref)
        again = await monitor.report(ProviderUnavailable("refused", ref=ref))
        assert again.probes >= 3  # down again at once: the backoff goes on from where it was
        world.down.clear()
        await monitor.wait_back(ref)
        tg.cancel_scope.cancel()
    assert world.kinds().count("outage.started") == 2 == world.kinds().count("outage.ended")
    assert world.recovered == [ref, ref]


async def test_a_failed_recovery_keeps_the_outage() -> None:
    world = World()
    attempts: list[str] = []

    async def recover(dependency: str) -> None:
        attempts.append(dependency)
        if len(attempts) == 1:
            raise ConnectionResetError("went away again while reaping")

    monitor = Health(world.emit, world.probe, recover)
    async with anyio.create_task_group() as tg:
        await tg.start(monitor.run)
        await monitor.report(_lost_engine())
        with anyio.fail_after(10):
            await monitor.wait_back(ENGINE)
        tg.cancel_scope.cancel()
    assert attempts == [ENGINE, ENGINE]
    assert "went away again" in next(m for k, m, _ in world.events if k == "outage.retrying")
