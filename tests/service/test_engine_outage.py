"""The Docker engine stopped and started again three times at random moments of the
improvement cycles, with a real daemon running them (scripted models, real sandbox).

Each time the daemon stays up and answers ``status`` throughout, shows the outage there
with its error and fix, refuses a live request at once with ``unavailable``, and resumes on
its own once the engine is back, after removing what the lost engine left behind. Every
candidate an outage interrupted is evaluated again (a held-out test it had begun resumes at
its slot from the results completed before the outage), or stays marked interrupted;
nothing is promoted without a held-out run after its last interruption; the lineage stays
consistent; no container of the daemon is left at the end.

The engine is a private one (``tests/engine_process.py``): stopping the machine's own
would kill everyone's containers.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox.labels import INSTANCE, instance_id
from tests.daemon_process import RunningDaemon, ctl, start_daemon
from tests.engine_process import private_engine
from tests.improve.lineage_checks import check_consistent
from tests.improve.patches import climbing_policy, mode_step
from tests.support.wait import log_tail, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROUNDS = 3
Status = dict[str, Any]


def _status(daemon: RunningDaemon) -> Status:
    """``status``, which must answer whatever the engine is doing."""
    assert daemon.proc.poll() is None, daemon.log.read_text()[-4000:]
    with daemon.client(timeout=10) as c:
        return dict(c.call("status"))


def _poll(daemon: RunningDaemon, ok: Callable[[Status], bool], timeout: float, what: str) -> Status:
    def probe() -> Status | None:
        status = _status(daemon)
        return status if ok(status) else None

    return wait_until(
        probe,
        timeout=timeout,
        what=what,
        interval=0.3,
        detail=lambda: log_tail(daemon, 4000),
    )


def _events(daemon: RunningDaemon) -> list[tuple[float, str, dict[str, Any]]]:
    db = sqlite3.connect(daemon.state_dir / "state.db")
    rows = db.execute("SELECT ts, kind, data FROM events ORDER BY id").fetchall()
    db.close()
    return [(ts, kind, json.loads(data)) for ts, kind, data in rows]


def _verdicts_since(daemon: RunningDaemon, since: float) -> int:
    kinds = ("candidate.rejected", "version.promoted")
    return sum(1 for ts, kind, _ in _events(daemon) if kind in kinds and ts > since)


def _candidate_evaluating(status: Status) -> bool:
    """A candidate's smoke or dev evaluation (label ``c<id> smoke|dev ...``) under way, not a
    baseline's. Not its held-out test: one cut short keeps its slot in the lineage's alpha
    ledger and counts as not promoted (DESIGN, "Acceptance"), so the candidate evaluated
    again is rejected at once and the climb this test needs would stop there."""
    return any(
        re.match(r"c\d+ (smoke|dev) ", p["label"]) and p["done"] < p["total"]
        for p in status["progress"]
    )


def _engine_down(status: Status) -> bool:
    return any(o["dependency"] == "engine" for o in status["outages"])


@pytest.mark.timeout(1800)  # long by design: three outages inside real improvement cycles
def test_three_engine_restarts_during_cycles(tmp_path: Path, asset_cache: Path) -> None:
    rng = random.Random(14)
    # After the climb, a worse step proposed again and again: evaluations never run dry.
    policy = climbing_policy(tmp_path, asset_cache, then=mode_step("L3", "L2"))
    with private_engine() as engine:
        daemon = start_daemon(tmp_path, asset_cache, policy, env={"DOCKER_HOST": engine.host})
        instance = instance_id(daemon.state_dir)
        client = engine.client()
        try:
            for round_ in range(ROUNDS):
                # The first outage hits whatever evaluation runs (a baseline, mostly), the
                # others a candidate's: baselines come first and often, and a run whose
                # outages all hit baselines would not test a candidate evaluated again.
                if round_ == 0:
                    _poll(daemon, lambda s: bool(s["progress"]), 300, "an evaluation under way")
                else:
                    _poll(daemon, _candidate_evaluating, 600, "a candidate's evaluation")
                time.sleep(rng.uniform(0.0, 3.0))  # a random moment of it, not a wait
                engine.stop()
                stopped_at = time.time()
                down = _poll(daemon, _engine_down, 120, "the outage in status")
                [outage] = down["outages"]
                assert outage["error"] and "scripts/docker-engine" in outage["fix"], outage
                r = ctl(daemon, "ask", "hello?")
                assert r.returncode == 1 and "error (unavailable)" in r.stderr, r.stderr
                assert "Docker engine" in r.stderr and "retries on its own" in r.stderr
                r = ctl(daemon, "status")
                assert r.returncode == 0 and "OUTAGE" in r.stdout, r.stdout
                stay_down = time.monotonic() + rng.uniform(3.0, 12.0)
                while time.monotonic() < stay_down:
                    _status(daemon)
                    time.sleep(0.5)
                engine.start()
                _poll(daemon, lambda s: not s["outages"], 180, "the engine to be seen back")
                mine = client.api.containers(all=True, filters={"label": f"{INSTANCE}={instance}"})
                left = [c["Id"][:12] for c in mine if c["Created"] < stopped_at]
                assert not left, f"containers of the lost engine not reaped: {left}"
            resumed_at = time.time()
            _poll(
                daemon,
                lambda s: _verdicts_since(daemon, resumed_at) > 0,
                600,
                "a verdict after the last restart (resuming on its own)",
            )
            check_consistent(daemon, tmp_path / "harnesses", resumed_at)
        finally:
            code = daemon.stop()
        assert code == 0
        assert not client.api.containers(all=True, filters={"label": f"{INSTANCE}={instance}"})
        client.close()

    events = _events(daemon)
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("daemon.started") == 1  # never restarted: it stayed up throughout
    started = [d for _, k, d in events if k == "outage.started"]
    assert len(started) >= ROUNDS and all(d["dependency"] == "engine" for d in started)
    assert kinds.count("outage.ended") == len(started)
    assert "Traceback" not in daemon.log.read_text()

    db = sqlite3.connect(daemon.state_dir / "state.db")
    states = dict(db.execute("SELECT id, state FROM candidates").fetchall())
    assert set(states.values()) <= {"accepted", "rejected", "interrupted"}, states
    # Every candidate an outage interrupted was evaluated again, or is still marked
    # interrupted (with the reason in its event).
    for ts, kind, data in events:
        if kind == "candidate.interrupted" and "engine" in data["reason"]:
            cid = data["candidate"]
            again = any(
                k == "candidate.resumed" and d["candidate"] == cid and t > ts for t, k, d in events
            )
            assert again or states[cid] == "interrupted", (cid, states[cid])
    assert any(k == "candidate.resumed" for k in kinds), f"no outage hit a candidate: {kinds}"
    # Nothing promoted from a half-finished test: each promoted candidate's held-out test
    # was settled as promoted, and every task it used has a recorded result of the
    # candidate (a test an outage cut short resumes from the results completed before it).
    for cid in [c for c, s in states.items() if s == "accepted"]:
        row = db.execute(
            "SELECT state, decision FROM heldout_tests WHERE candidate_id = ?", (cid,)
        ).fetchone()
        assert row is not None and row[0] == "promoted", (cid, row)
        used = int(json.loads(row[1])["tasks_used"])
        reports = db.execute(
            "SELECT report FROM evaluations WHERE candidate_id = ? AND split = 'heldout' "
            "AND report IS NOT NULL",
            (cid,),
        ).fetchall()
        ran = {t["id"] for (r,) in reports for t in json.loads(r)["tasks"]}
        assert used > 0 and len(ran) >= used, f"c{cid} promoted on {used} tasks, {len(ran)} ran"
    assert db.execute("SELECT COUNT(*) FROM evaluations WHERE state = 'running'").fetchone()[0] == 0
    db.close()


@pytest.mark.timeout(900)
def test_a_stop_while_the_engine_is_down_is_orderly(tmp_path: Path, asset_cache: Path) -> None:
    """The exit-time reap cannot reach the engine: that is logged, not raised over the
    stop; the next start, with the engine back, removes what was left."""
    policy = climbing_policy(tmp_path, asset_cache, then=mode_step("L3", "L2"))
    with private_engine() as engine:
        env = {"DOCKER_HOST": engine.host}
        daemon = start_daemon(tmp_path, asset_cache, policy, env=env)
        instance = instance_id(daemon.state_dir)
        try:
            _poll(daemon, lambda s: bool(s["progress"]), 300, "an evaluation under way")
            engine.stop()
            _poll(daemon, _engine_down, 120, "the outage in status")
            r = ctl(daemon, "stop")
            assert r.returncode == 0 and "stopped" in r.stdout, (r.stdout, r.stderr)
            assert daemon.proc.wait(60) == 0
        finally:
            if daemon.proc.poll() is None:
                daemon.proc.kill()
        log = daemon.log.read_text()
        assert "Traceback" not in log
        assert "could not remove this instance's containers at exit" in log
        engine.start()
        stopped_at = time.time()
        # The same state dir, so the same instance: its start-up reaps the leftovers.
        again = start_daemon(tmp_path, asset_cache, policy, env=env)
        assert again.stop() == 0
        client = engine.client()
        mine = client.api.containers(all=True, filters={"label": f"{INSTANCE}={instance}"})
        client.close()
        assert not [c for c in mine if c["Created"] < stopped_at]
