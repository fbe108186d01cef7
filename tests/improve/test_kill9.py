"""``kill -9`` at random moments during improvement cycles, then restart, 20 times.

After every restart: the lineage is consistent (``current`` names a complete accepted
version, git and SQLite agree, nothing is left half-promoted or still "evaluating" from the
killed run) and no container or per-run directory of the killed daemon survives.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import docker
import pytest

from sandbox.labels import INSTANCE, instance_id
from sandbox.rundir import runs_root
from tests.daemon_process import RunningDaemon, start_daemon
from tests.improve.lineage_checks import check_consistent
from tests.improve.patches import climbing_policy
from tests.support.wait import wait_for_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROUNDS = 20
CLIMB = 2  # promotions the climbing policy's proposer can make (its L3 is no gain on L2)


def _promotions(daemon: RunningDaemon) -> int:
    db = sqlite3.connect(daemon.state_dir / "state.db")
    try:
        query = "SELECT COUNT(*) FROM pointer WHERE kind = 'promote'"
        return int(db.execute(query).fetchone()[0])
    finally:
        db.close()


def _wait_for_a_promotion(daemon: RunningDaemon, timeout_s: float = 600.0) -> None:
    before = _promotions(daemon)
    wait_for_daemon(
        daemon,
        lambda: _promotions(daemon) != before,
        timeout=timeout_s,
        what="a promotion",
        interval=0.5,
    )


@pytest.mark.timeout(2400)  # long by design; the default is 300 s per test
def test_twenty_kill9_rounds(tmp_path: Path, asset_cache: Path) -> None:
    policy = climbing_policy(tmp_path, asset_cache)
    harnesses = tmp_path / "harnesses"
    client = docker.from_env()
    rng = random.Random(9)
    daemon = start_daemon(tmp_path, asset_cache, policy)
    instance = instance_id(daemon.state_dir)
    last_start = time.time()
    try:
        for round_ in range(ROUNDS):
            # Mostly short lives, and every fifth a long one: until a promotion completes
            # (the climb has two), then a random moment more, so that the kills hit a
            # lineage that really moves however slow the machine is.
            if round_ % 5 == 4 and _promotions(daemon) < CLIMB:
                _wait_for_a_promotion(daemon)
                time.sleep(rng.uniform(0.0, 5.0))
            else:
                time.sleep(rng.uniform(0.5, 12.0))
            os.kill(daemon.proc.pid, signal.SIGKILL)
            daemon.proc.wait(30)
            killed_at = time.time()
            last_start = time.time()
            daemon = start_daemon(tmp_path, asset_cache, policy)
            check_consistent(daemon, harnesses, killed_at)
            # One listing call: per-container lookups would race the new daemon's removals.
            mine = client.api.containers(all=True, filters={"label": f"{INSTANCE}={instance}"})
            survivors = [ct["Id"][:12] for ct in mine if ct["Created"] < killed_at - 1]
            assert not survivors, survivors
    finally:
        code = daemon.stop()
    assert code == 0
    assert not client.api.containers(all=True, filters={"label": f"{INSTANCE}={instance}"})
    assert not any(runs_root(instance).iterdir())
    db = sqlite3.connect(daemon.state_dir / "state.db")
    events = db.execute("SELECT COUNT(*) FROM events WHERE kind = 'daemon.started'").fetchone()[0]
    assert events == ROUNDS + 1
    # The kills must have hit a lineage that was really moving: promotions completed in
    # lives that were later killed, not only in the last one.
    promoted = [ts for (ts,) in db.execute("SELECT ts FROM pointer WHERE kind = 'promote'")]
    assert len(promoted) >= 2, promoted
    assert any(ts < last_start for ts in promoted), (promoted, last_start)
    client.close()
