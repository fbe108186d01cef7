"""Dev-side selection keeps its runner-ups, in a real daemon through the real sandbox.

Cycle 1 screens two proposals; the better on dev takes the held-out slot and fails there
(it solves every dev task but few held-out ones), the other waits in the dev reserve with
no held-out task run. Cycle 2 then asks the proposer for one new proposal, not two: the
reserve fills the pool. The runner-up from cycle 1 beats the new one on dev, takes the slot
and is promoted; the new one, left in the reserve, is dropped because its parent is no
longer live. A scripted proposer and solver (tests/improve/scripted_world.py: the solver
answers held-out tasks as the daemon evaluates them, counterfactual copies included)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import start_daemon, stored_events
from tests.improve import patches
from tests.improve.scripted_world import DEV, policy_text, positions, solver_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HELDOUT = 24


def _policy(tmp_path: Path, asset_cache: Path, cycles: int, pause_s: float = 0.0) -> str:
    n = max(DEV, HELDOUT)
    # By position in each split: DEVONLY solves the first four (all of dev, 4 of 24
    # held-out), GOOD the even ones (half of each), ONE the first (a quarter of dev).
    modes = {
        "DEVONLY": positions(n, lambda i: i < DEV),
        "GOOD": positions(n, lambda i: i % 2 == 0),
        "ONE": {0},
    }
    solver = tmp_path / "solver.toml"
    solver.write_text(solver_script(asset_cache, modes, HELDOUT))
    proposer = tmp_path / "proposer.toml"
    proposals = [patches.mode_step("", m) for m in ("GOOD", "DEVONLY", "ONE")]
    proposer.write_text(patches.proposer_script(proposals))
    policy = (
        policy_text(solver, solver, proposer, cycles=cycles, heldout=HELDOUT, alpha=0.3)
        .replace(f'panel = ["scripted:{solver}"]', "panel = []")
        .replace("samples = 1", "samples = 2\ndev_pool = 2\nmerge = false")
        .replace("cycle_pause_s = 0.0", f"cycle_pause_s = {pause_s}")
    )
    assert "dev_pool = 2" in policy and f"cycle_pause_s = {pause_s}" in policy
    return policy


def _decided(daemon: Any, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 800
    cands: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        with daemon.client() as c:
            cands = sorted(c.call("lineage", candidates=20)["candidates"], key=lambda x: x["id"])
        done = [x for x in cands if x["state"] in ("accepted", "rejected")]
        if len(cands) >= count and len(done) >= count:
            return cands
        assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
        time.sleep(1.0)
    raise AssertionError(f"not decided: {cands}\n{daemon.log.read_text()[-3000:]}")


@pytest.mark.timeout(900)
def test_a_runner_up_waits_in_the_reserve_and_takes_a_later_slot(
    tmp_path: Path, asset_cache: Path
) -> None:
    policy = _policy(tmp_path, asset_cache, cycles=2)
    daemon = start_daemon(tmp_path, asset_cache, policy)
    try:
        cands = _decided(daemon, 3)
    finally:
        assert daemon.stop() == 0
    # Cycle 2 asked for one proposal (the reserve held the other place of its pool).
    assert len(cands) == 3, cands
    good, devonly, one = cands
    assert good["state"] == "accepted", good
    assert devonly["state"] == "rejected", devonly
    assert one["state"] == "rejected", one
    chosen = stored_events(daemon.state_dir, "candidate.chosen")
    assert [(e["candidate"], e["screened"], e["from_reserve"], e["reserve"]) for e in chosen] == [
        (devonly["id"], [good["id"], devonly["id"]], [], [good["id"]]),
        (good["id"], [one["id"]], [good["id"]], [one["id"]]),
    ]
    # One held-out test a cycle: the chosen ones', in turn; the last runner-up took none.
    started = stored_events(daemon.state_dir, "heldout.started")
    assert [e["candidate"] for e in started] == [devonly["id"], good["id"]]
    db = sqlite3.connect(daemon.state_dir / "state.db")
    stage, reason = db.execute(
        "SELECT json_extract(verdict, '$.stage'), json_extract(verdict, '$.reason') "
        "FROM candidates WHERE id = ?",
        (one["id"],),
    ).fetchone()
    assert stage == "dev"
    assert f"not chosen: c{good['id']} was promoted while it waited in the dev reserve" in reason
    heldout_runs = db.execute(
        "SELECT COUNT(*) FROM evaluations WHERE candidate_id = ? AND split = 'heldout'",
        (one["id"],),
    ).fetchone()[0]
    assert heldout_runs == 0


@pytest.mark.timeout(900)
def test_a_runner_up_still_waiting_at_a_stop_is_left_interrupted(
    tmp_path: Path, asset_cache: Path
) -> None:
    # A long pause between cycles: the stop comes while c1 waits for cycle 2.
    policy = _policy(tmp_path, asset_cache, cycles=3, pause_s=600.0)
    daemon = start_daemon(tmp_path, asset_cache, policy)
    try:
        _decided(daemon, 1)
        with daemon.client() as c:
            status = c.call("status")
            listed = {x["id"]: x for x in c.call("lineage", candidates=20)["candidates"]}
        assert status["dev_reserve"] == [1], status
        assert listed[1]["state"] == "evaluating" and listed[1]["in_dev_reserve"], listed[1]
    finally:
        assert daemon.stop() == 0
    db = sqlite3.connect(daemon.state_dir / "state.db")
    rows = db.execute("SELECT id, state, stage FROM candidates ORDER BY id").fetchall()
    # c1 (GOOD) waited in the reserve behind c2 (DEVONLY, rejected at held-out): the stop
    # leaves it interrupted at dev, its tree gone, no held-out task run.
    assert rows == [(1, "interrupted", "dev"), (2, "rejected", "heldout")], rows
    interrupted = stored_events(daemon.state_dir, "candidate.interrupted")
    assert [e["candidate"] for e in interrupted] == [1]
    assert "dev reserve" in interrupted[0]["reason"]
    assert not list((daemon.state_dir / "work").glob("c1*")), "the runner-up's tree is left"


@pytest.mark.timeout(900)
def test_a_runner_up_is_dropped_when_the_loop_takes_no_more_cycles(
    tmp_path: Path, asset_cache: Path
) -> None:
    # One cycle: after it the loop is done ([loop] max_cycles), so c1 can never be chosen.
    daemon = start_daemon(tmp_path, asset_cache, _policy(tmp_path, asset_cache, cycles=1))
    try:
        cands = _decided(daemon, 2)
    finally:
        assert daemon.stop() == 0
    assert [(x["id"], x["state"]) for x in cands] == [(1, "rejected"), (2, "rejected")], cands
    db = sqlite3.connect(daemon.state_dir / "state.db")
    stage, reason = db.execute(
        "SELECT json_extract(verdict, '$.stage'), json_extract(verdict, '$.reason') "
        "FROM candidates WHERE id = 1"
    ).fetchone()
    assert stage == "dev"
    assert reason.startswith("not chosen: the loop stopped taking cycles (done: 1 cycles"), reason
