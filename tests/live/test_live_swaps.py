"""The live harness under promotions and a rollback: no request dropped, each served by
exactly one version, and every request recorded with that version."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import RunningDaemon, start_daemon
from tests.improve.patches import mode_steps, proposer_script
from tests.improve.scripted_world import DEV, policy_text, positions, solver_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Three promotions in one lineage: steps big enough for the sequential test on a 56-task
# pool at a lenient lineage-wide alpha (later epochs reuse the block at a price).
HELDOUT = 56
ALPHA = 0.45
LEVELS = {
    "L1": lambda i: i % 3 == 0,  # 33 %
    "L2": lambda i: i % 3 != 2,  # 67 %
    "L3": lambda i: True,  # 100 %
}


def _lineage(daemon: RunningDaemon) -> dict[str, Any]:
    with daemon.client() as c:
        result: dict[str, Any] = c.call("lineage", candidates=20)
        return result


@pytest.mark.timeout(3000)  # long by design (minutes idle, far longer on a loaded machine)
def test_fifty_asks_across_three_promotions_and_a_rollback(
    tmp_path: Path, asset_cache: Path
) -> None:
    n = max(DEV, HELDOUT)
    solver = tmp_path / "solver.toml"
    modes = {k: positions(n, f) for k, f in LEVELS.items()}
    solver.write_text(solver_script(asset_cache, modes, HELDOUT))
    proposer = tmp_path / "proposer.toml"
    proposer.write_text(proposer_script(mode_steps("L1", "L2", "L3")))
    policy = policy_text(solver, solver, proposer, cycles=3, heldout=HELDOUT, alpha=ALPHA).replace(
        f'panel = ["scripted:{solver}"]', "panel = []"
    )
    daemon = start_daemon(tmp_path, asset_cache, policy)
    answers: list[tuple[int, dict[str, Any]]] = []
    errors: list[BaseException] = []
    rollback: dict[str, Any] = {}
    rng = random.Random(5)
    delays = sorted(rng.uniform(0, 45) for _ in range(50))

    def ask(i: int, delay: float) -> None:
        time.sleep(delay)
        try:
            with daemon.client(timeout=300) as c:
                answers.append((i, c.call("ask", text=f"question {i}: what is {i} + {i}?")))
        except BaseException as exc:  # re-raised in the test thread below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=ask, args=(i, d)) for i, d in enumerate(delays)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 2700
        while len(_lineage(daemon)["versions"]) < 4:
            assert time.monotonic() < deadline, daemon.log.read_text()[-3000:]
            assert daemon.proc.poll() is None
            time.sleep(0.5)
        with daemon.client() as c:
            rollback = c.call("rollback", ref="v0002", reason="test: back to the first promotion")
        # Keep asking after the rollback too, then wait for everyone.
        late = [threading.Thread(target=ask, args=(100 + i, 0.0)) for i in range(5)]
        for t in late:
            t.start()
        for t in threads + late:
            t.join(600)
        lineage = _lineage(daemon)
    finally:
        daemon.stop()

    assert not errors, errors
    assert rollback == {"live": "v0002"}
    assert len(answers) == 55
    assert [v["name"] for v in lineage["versions"]] == ["v0001", "v0002", "v0003", "v0004"]
    reasons = [h["reason"] for h in lineage["history"]]
    assert sum(r.startswith("promote") for r in reasons) == 3
    assert reasons[-1].startswith("rollback")

    versions_seen = {a["version"] for _, a in answers}
    assert len(versions_seen) >= 2, versions_seen  # the swaps really happened under load
    db = sqlite3.connect(daemon.state_dir / "state.db")
    rows = {
        r[0]: (r[1], r[2])
        for r in db.execute(
            "SELECT r.id, v.name, r.state FROM requests r JOIN versions v ON v.id = r.version_id"
        )
    }
    assert len(rows) == 55
    for _, a in answers:
        assert a["error"] is None, a
        assert rows[a["request"]] == (a["version"], "done")
    # Requests made after the rollback returned are served by the version rolled back to.
    assert {a["version"] for i, a in answers if i >= 100} == {"v0002"}
