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
import subprocess
import time
from pathlib import Path

import docker
import pytest

from sandbox.labels import INSTANCE, instance_id
from sandbox.rundir import runs_root
from tests.daemon_process import RunningDaemon, start_daemon
from tests.improve.patches import mode_steps, proposer_script
from tests.improve.scripted_world import DEV, HELDOUT, policy_text, positions, solver_script

ROUNDS = 20


def _check_consistent(daemon: RunningDaemon, harnesses: Path, killed_at: float) -> None:
    with daemon.client() as c:
        lineage = c.call("lineage", candidates=200)
    db = sqlite3.connect(daemon.state_dir / "state.db")
    pointer = db.execute(
        "SELECT v.name FROM pointer p JOIN versions v ON v.id = p.version_id ORDER BY p.id DESC"
    ).fetchone()[0]
    assert lineage["current"] == pointer
    current = harnesses / "current"
    assert current.is_symlink() and current.resolve() == (harnesses / "versions" / pointer)
    names = [r[0] for r in db.execute("SELECT name FROM versions ORDER BY id")]
    on_disk = sorted(p.name for p in (harnesses / "versions").iterdir())
    assert on_disk == names, (on_disk, names)
    for name in names:
        assert (harnesses / "versions" / name / "harness.py").is_file()
    pointers = db.execute("SELECT COUNT(*) FROM pointer").fetchone()[0]
    commits = subprocess.run(
        ["git", "--git-dir", str(harnesses / ".git"), "rev-list", "--count", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert int(commits) == pointers
    stale = db.execute(
        "SELECT id FROM candidates WHERE state = 'evaluating' AND updated < ?", (killed_at,)
    ).fetchall()
    assert not stale, f"candidates left evaluating by the killed daemon: {stale}"


@pytest.mark.timeout(1200)  # long by design; the default is 300 s per test
def test_twenty_kill9_rounds(tmp_path: Path, asset_cache: Path) -> None:
    n = max(DEV, HELDOUT)
    levels = {"L1": lambda i: i % 4 == 0, "L2": lambda i: i % 2 == 0, "L3": lambda i: i % 4 != 3}
    solver = tmp_path / "solver.toml"
    solver.write_text(solver_script(asset_cache, {k: positions(n, f) for k, f in levels.items()}))
    proposer = tmp_path / "proposer.toml"
    script = proposer_script([*mode_steps("L1", "L2", "L3"), "junk"])
    proposer.write_text(script.replace('after_last = "repeat_last"', 'after_last = "cycle"'))
    policy = policy_text(solver, solver, proposer, cycles=0).replace(
        f'panel = ["scripted:{solver}"]', "panel = []"
    )
    harnesses = tmp_path / "harnesses"
    client = docker.from_env()
    rng = random.Random(9)
    daemon = start_daemon(tmp_path, asset_cache, policy)
    instance = instance_id(daemon.state_dir)
    last_start = time.time()
    try:
        for round_ in range(ROUNDS):
            # Mostly short lives, and every fifth a long one, so that promotions really
            # complete between kills even on a slow machine.
            time.sleep(rng.uniform(20.0, 30.0) if round_ % 5 == 4 else rng.uniform(0.5, 12.0))
            os.kill(daemon.proc.pid, signal.SIGKILL)
            daemon.proc.wait(30)
            killed_at = time.time()
            last_start = time.time()
            daemon = start_daemon(tmp_path, asset_cache, policy)
            _check_consistent(daemon, harnesses, killed_at)
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
    promoted = [ts for (ts,) in db.execute("SELECT ts FROM pointer WHERE reason LIKE 'promote:%'")]
    assert len(promoted) >= 2, promoted
    assert any(ts < last_start for ts in promoted), (promoted, last_start)
    client.close()
