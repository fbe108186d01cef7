"""The review step in a real daemon: with ``[gates.review]`` on, a candidate that passes every
gate waits; a person's ``reject`` records it, ``approve`` promotes another, and both survive
daemon restarts.

The scripted proposer writes two real improvements of the seed (mode GOOD, 50 % of the
tasks; then mode BETTER, 87.5 %), each a different program. The first is rejected by a person
(its held-out test has spent its alpha: the second takes position 2 of the same epoch), the
second waits across a restart and is approved after it. Sandbox, gateway, verifier, alpha
ledger and lineage are the real ones; the lenient lineage-wide alpha keeps the pool small
(the statistics are tested on their own).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.improve import alpha_ledger
from daemon.store import Store
from tests.daemon_process import RunningDaemon, start_daemon
from tests.improve.patches import mode_step, proposer_script
from tests.improve.scripted_world import DEV, HELDOUT, policy_text, positions, solver_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _ctl(daemon: RunningDaemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.control.ctl", "--state-dir", str(daemon.state_dir), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"COLUMNS": "200"},
    )


def _candidates(daemon: RunningDaemon) -> dict[int, dict[str, Any]]:
    with daemon.client() as c:
        return {x["id"]: x for x in c.call("lineage", candidates=50)["candidates"]}


def _wait_awaiting(daemon: RunningDaemon, count: int, timeout: float) -> dict[int, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cands = _candidates(daemon)
        decided = [x for x in cands.values() if x["state"] in ("rejected", "accepted")]
        assert not [x for x in decided if x["decided_by"] == "gates"], (
            cands,
            daemon.log.read_text()[-3000:],
        )
        waiting = [x for x in cands.values() if x["state"] == "awaiting_review"]
        if len(cands) >= count and waiting:
            return cands
        assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
        time.sleep(1.0)
    raise AssertionError(f"no candidate awaits review:\n{daemon.log.read_text()[-3000:]}")


def _policy(tmp: Path, cache: Path, *, loop: bool) -> str:
    solver = tmp / "solver.toml"
    n = max(DEV, HELDOUT)
    modes = {
        "GOOD": positions(n, lambda i: i % 2 == 0),
        "BETTER": positions(n, lambda i: i % 8 != 7),
    }
    solver.write_text(solver_script(cache, modes))
    proposer = tmp / "proposer.toml"
    proposer.write_text(proposer_script([mode_step("", "GOOD"), mode_step("", "BETTER")]))
    text = policy_text(solver, solver, proposer, cycles=2, alpha=0.45).replace(
        f'panel = ["scripted:{solver}"]', "panel = []"
    )
    text += "\n[gates.review]\nenabled = true\n"
    if not loop:
        text = text.replace("[loop]\n", "[loop]\nenabled = false\n")
    return text


@pytest.mark.timeout(2400)  # two candidates through every stage, and three daemon lives
def test_a_passing_candidate_waits_for_review_and_the_decisions_survive_restarts(
    tmp_path: Path, asset_cache: Path
) -> None:
    daemon = start_daemon(tmp_path, asset_cache, _policy(tmp_path, asset_cache, loop=True))
    try:
        # 1. The first improvement passes every gate and waits; nothing is promoted.
        cands = _wait_awaiting(daemon, 1, timeout=1100)
        assert [x["state"] for x in cands.values()] == ["awaiting_review"], cands
        with daemon.client() as c:
            review = c.call("review")
            status = c.call("status")
        assert review["enabled"] and review["live"] == "v0001"
        [first] = review["awaiting"]
        assert first["approvable"] and first["parent"] == "v0001"
        assert "MODE:GOOD" in first["patch"] and first["verdict"]["decision"] == "accept"
        assert (first["test"]["epoch"], first["test"]["position"]) == (1, 1)
        assert first["test"]["state"] == "awaiting_review"
        assert status["live"]["version"] == "v0001"
        assert status["awaiting_review"] == [first["id"]]
        for _ in range(20):  # the loop says why it waits once it looks again
            if "awaiting review" in status["activity"]:
                break
            time.sleep(0.5)
            with daemon.client() as c:
                status = c.call("status")
        assert f"c{first['id']} awaiting review" in status["activity"], status
        time.sleep(3)  # the loop proposes nothing while it waits
        assert len(_candidates(daemon)) == 1
        shown = _ctl(daemon, "review")
        assert shown.returncode == 0, shown.stderr
        assert f"harnessctl approve c{first['id']}" in shown.stdout
        assert "MODE:GOOD" in shown.stdout

        # 2. A person rejects it, with a reason; the loop goes on to the next candidate.
        reason = "hard-codes a mode token; want the general fix"
        out = _ctl(daemon, "reject", f"c{first['id']}", "--reason", reason, "--as", "alice")
        assert out.returncode == 0, out.stderr
        assert "rejected by alice" in out.stdout
        again = _ctl(daemon, "reject", f"c{first['id']}", "--reason", "twice")
        assert again.returncode == 1 and "not_awaiting_review" in again.stderr, again.stderr
        cands = _wait_awaiting(daemon, 2, timeout=1100)
    finally:
        assert daemon.stop() == 0

    second_id = max(cands)
    assert cands[first["id"]]["state"] == "rejected"
    assert cands[second_id]["state"] == "awaiting_review"

    # 3. A restart: the rejection and the wait are both still there (loop off from here on,
    # so no third candidate comes).
    daemon = start_daemon(tmp_path, asset_cache, _policy(tmp_path, asset_cache, loop=False))
    try:
        with daemon.client() as c:
            review = c.call("review")
            rejected = c.call("show", ref=f"c{first['id']}")
        assert [x["id"] for x in review["awaiting"]] == [second_id]
        assert review["awaiting"][0]["test"]["position"] == 2  # the rejected one spent slot 1
        assert rejected["decided_by"] == "person" and rejected["state"] == "rejected"
        assert rejected["review"]["reviewer"] == "alice"
        assert rejected["review"]["reason"] == reason
        assert rejected["verdict"]["decision"] == "accept"  # the gates' verdict is kept

        # 4. A person approves the second: promoted through the lineage's checks, live now.
        out = _ctl(daemon, "approve", f"c{second_id}", "--as", "bob", "--reason", "looks right")
        assert out.returncode == 0, out.stderr
        assert "v0002" in out.stdout and "approved by bob" in out.stdout
        with daemon.client() as c:
            assert c.call("status")["live"]["version"] == "v0002"
            assert c.call("review")["awaiting"] == []
            kinds = [e["kind"] for e in c.call("events", limit=200)]
        assert "candidate.awaiting_review" in kinds and "version.promoted" in kinds
        lineage_view = _ctl(daemon, "lineage")
        assert lineage_view.returncode == 0, lineage_view.stderr
        assert "alice" in lineage_view.stdout and "bob" in lineage_view.stdout
        decided = {
            x["id"]: (x["decided_by"], x["review"]["reviewer"])
            for x in (_candidates(daemon).values())
        }
        assert decided == {first["id"]: ("person", "alice"), second_id: ("person", "bob")}
    finally:
        assert daemon.stop() == 0

    # 5. Another restart: both decisions, by whom and why, and the ledger agree.
    daemon = start_daemon(tmp_path, asset_cache, _policy(tmp_path, asset_cache, loop=False))
    try:
        with daemon.client() as c:
            lineage = c.call("lineage", candidates=50)
            approved = c.call("show", ref=f"c{second_id}")
            version = c.call("show", ref="v0002")
        assert lineage["current"] == "v0002"
        assert approved["state"] == "accepted" and approved["decided_by"] == "person"
        assert approved["review"]["reviewer"] == "bob"
        assert approved["review"]["reason"] == "looks right"
        assert "Approved in review by bob: looks right" in version["message"]
        out = tmp_path / "report.html"
        assert _ctl(daemon, "report", "--out", str(out)).returncode == 0
        page = out.read_text()
        assert f"rejected in review by alice: {reason}" in page
        assert "approved in review by bob: looks right" in page
    finally:
        assert daemon.stop() == 0
    store = Store(daemon.state_dir / "state.db")
    try:
        states = {t.candidate_id: t.state for t in alpha_ledger.tests(store)}
    finally:
        store.close()
    assert states == {first["id"]: "not_promoted", second_id: "promoted"}
