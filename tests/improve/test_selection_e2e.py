"""Dev-side selection in a real daemon: one cycle, two proposals that pass the static stage,
each screened on dev through the real sandbox; only the best by dev evidence takes the
held-out slot (and is promoted here); the other waits in the dev reserve, and the promotion
ends it "not chosen" at dev with no held-out task run and no alpha spent. A scripted
proposer and solver (tests/improve/scripted_world.py: the solver answers held-out tasks as
the daemon evaluates them, counterfactual copies included)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import start_daemon, stored_events
from tests.improve import patches
from tests.improve.scripted_world import policy_text, world

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HELDOUT = 24


@pytest.mark.timeout(900)
def test_the_best_on_dev_takes_the_slot_and_the_others_spend_no_alpha(
    tmp_path: Path, asset_cache: Path
) -> None:
    solvers = world(tmp_path, asset_cache, HELDOUT)
    proposer = tmp_path / "proposer.toml"
    # GOOD solves half of dev, BETTER all of it; the first proposed is not the best.
    proposals = [patches.mode_step("", "GOOD"), patches.mode_step("", "BETTER")]
    proposer.write_text(patches.proposer_script(proposals))
    policy = (
        policy_text(solvers["a"], solvers["b"], proposer, cycles=1, heldout=HELDOUT)
        .replace(f'panel = ["scripted:{solvers["b"]}"]', "panel = []")
        .replace("samples = 1", "samples = 2\ndev_pool = 2")
    )
    assert "dev_pool = 2" in policy
    daemon = start_daemon(tmp_path, asset_cache, policy)
    try:
        deadline = time.monotonic() + 800
        cands: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            with daemon.client() as c:
                cands = sorted(
                    c.call("lineage", candidates=20)["candidates"], key=lambda x: x["id"]
                )
            if len(cands) == 2 and all(x["state"] in ("accepted", "rejected") for x in cands):
                break
            assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
            time.sleep(1.0)
        else:
            raise AssertionError(f"not decided: {cands}\n{daemon.log.read_text()[-3000:]}")
    finally:
        assert daemon.stop() == 0
    good, better = cands
    assert better["state"] == "accepted", better
    assert good["state"] == "rejected", good
    with_verdict = stored_events(daemon.state_dir, "candidate.rejected")
    assert [e["candidate"] for e in with_verdict] == [good["id"]]
    assert with_verdict[0]["stage"] == "dev"
    chosen = stored_events(daemon.state_dir, "candidate.chosen")
    assert [(e["candidate"], e["screened"]) for e in chosen] == [
        (better["id"], [good["id"], better["id"]])
    ]
    # One held-out test in the cycle, the chosen one's: the other took no slot.
    started = stored_events(daemon.state_dir, "heldout.started")
    assert [e["candidate"] for e in started] == [better["id"]]
    db = sqlite3.connect(daemon.state_dir / "state.db")
    reason = db.execute("SELECT verdict FROM candidates WHERE id = ?", (good["id"],)).fetchone()[0]
    assert f"not chosen: c{better['id']} was promoted while it waited in the dev reserve" in reason
    heldout_runs = db.execute(
        "SELECT COUNT(*) FROM evaluations WHERE candidate_id = ? AND split = 'heldout'",
        (good["id"],),
    ).fetchone()[0]
    assert heldout_runs == 0
