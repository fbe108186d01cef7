"""A person's patch goes first: proposed with ``harnessctl propose`` right at start, it is
evaluated before the loop's own candidate (and so takes the epoch's first, largest share of
alpha), ``propose`` says where it stands, and ``status`` shows what is being evaluated, not
a parent baseline, while it runs. In a real daemon with a scripted proposer and solver."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.daemon_process import ctl, start_daemon, stored_events
from tests.improve import patches
from tests.improve.scripted_world import policy_text, world

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HELDOUT = 24


@pytest.mark.timeout(1500)
def test_the_users_patch_is_evaluated_before_the_loops_own(
    tmp_path: Path, asset_cache: Path
) -> None:
    solvers = world(tmp_path, asset_cache, HELDOUT)
    proposer = tmp_path / "proposer.toml"
    proposer.write_text(patches.proposer_script([patches.mode_step("", "GOOD")]))
    policy = policy_text(solvers["a"], solvers["b"], proposer, cycles=2, heldout=HELDOUT)
    mine = tmp_path / "user.patch"
    mine.write_text(patches.mode_step("", "BETTER"))
    daemon = start_daemon(tmp_path, asset_cache, policy)
    try:
        r = ctl(daemon, "--json", "propose", str(mine), "--rationale", "from a person")
        assert r.returncode == 0, r.stderr
        proposed = json.loads(r.stdout)
        user = proposed["candidate"]
        assert proposed["position"] == 1, proposed  # next, whatever the loop is doing
        seen_evaluating = seen_text = False
        deadline = time.monotonic() + 1300
        while time.monotonic() < deadline:
            with daemon.client() as c:
                status = c.call("status")
                cands = c.call("lineage", candidates=20)["candidates"]
            if status.get("evaluating") == user:
                seen_evaluating = True
                # What runs is the candidate's (its parent's runs say whose they are).
                activity = status.get("activity") or ""
                # (empty for a moment between the end of its evaluation and the next)
                assert not activity or activity.startswith(f"candidate c{user}"), activity
            if not seen_text and status.get("evaluating") == user:
                # The same in the readable view (a moment later: it may have moved on).
                seen_text = f"evaluating: candidate c{user}" in ctl(daemon, "status").stdout
            decided = [x for x in cands if x["state"] in ("accepted", "rejected")]
            if len(decided) >= 2 and not status.get("evaluating"):
                break
            assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
            time.sleep(0.5)
        else:
            raise AssertionError(f"two verdicts did not come:\n{daemon.log.read_text()[-4000:]}")
    finally:
        daemon.stop()
    assert seen_evaluating and seen_text
    starts = stored_events(daemon.state_dir, "heldout.started")
    assert starts, "no held-out test began"
    # The user's candidate took the lineage's first held-out slot.
    assert starts[0]["candidate"] == user, starts
    assert (starts[0]["epoch"], starts[0]["position"]) == (1, 1), starts[0]
