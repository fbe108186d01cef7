"""Models the policy names must exist before anything starts or a reload applies; a spent
token window pauses the loop and says so."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.daemon_process import collect_events, start_daemon, wait_for_event
from tests.improve.patches import mode_step, proposer_script
from tests.improve.scripted_world import DEV, HELDOUT, policy_text, positions, solver_script


@pytest.mark.unit
def test_a_model_without_its_key_stops_start_up(tmp_path: Path, asset_cache: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[proposer]\nmodel = "anthropic:claude-sonnet-4-5"\n')
    config = tmp_path / "harnessd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\ncache_dir = "{asset_cache}"\npolicy = "{policy}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(config), "serve"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "anthropic:claude-sonnet-4-5" in proc.stderr and "ANTHROPIC_API_KEY" in proc.stderr
    assert not (tmp_path / "state" / "control.sock").exists()


@pytest.mark.docker
def test_a_reload_naming_a_missing_model_file_is_refused(tmp_path: Path, asset_cache: Path) -> None:
    daemon = start_daemon(tmp_path, asset_cache)
    try:
        events = collect_events(daemon)
        daemon.policy.write_text(
            f'[loop]\nenabled = false\n[models]\nprimary = "scripted:{tmp_path}/nope.toml"\n'
        )
        bad = wait_for_event(events, "policy.invalid")
        assert "nope.toml" in bad["message"] and "does not exist" in bad["message"]
        with daemon.client() as c:
            assert c.call("policy_show")["policy"]["models"]["primary"] == "local:smollm2-135m"
    finally:
        daemon.stop()


@pytest.mark.docker
@pytest.mark.slow
def test_a_spent_hourly_budget_pauses_the_loop_with_an_event(
    tmp_path: Path, asset_cache: Path
) -> None:
    n = max(DEV, HELDOUT)
    solver = tmp_path / "solver.toml"
    solver.write_text(solver_script(asset_cache, {"L1": positions(n, lambda i: i % 4 == 0)}))
    proposer = tmp_path / "proposer.toml"
    proposer.write_text(proposer_script([mode_step("", "L1")]))
    policy = (
        policy_text(solver, solver, proposer, cycles=0).replace(
            f'panel = ["scripted:{solver}"]', "panel = []"
        )
        + "\n[budget]\ntokens_per_hour = 3000\n"
    )
    daemon = start_daemon(tmp_path, asset_cache, policy)
    try:
        events = collect_events(daemon)
        paused = wait_for_event(events, "budget.paused", timeout=300)
        assert "hour" in paused["message"] and "3000" in paused["message"]
        # Calls in flight when the window filled still settle into the ledger; wait for
        # the status to show the window spent rather than for a guessed while.
        deadline = time.monotonic() + 60
        while True:
            with daemon.client() as c:
                status = c.call("status")
            hour = next(b for b in status["budgets"] if b["scope"] == "hour")
            if hour["left"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert hour["spent"] >= 3000 and hour["left"] == 0 and hour["reopens_at"]
        # Refused once spent, never run far past it: the last call admitted may overshoot by
        # its prompt (its completion is capped to what was left), no more.
        db = sqlite3.connect(daemon.state_dir / "state.db")
        (largest_prompt,) = db.execute("SELECT MAX(prompt_tokens) FROM ledger").fetchone()
        db.close()
        assert hour["spent"] - 3000 <= largest_prompt + 1
    finally:
        daemon.stop()


@pytest.mark.docker
def test_a_policy_whose_suite_cannot_be_split_is_refused(tmp_path: Path, asset_cache: Path) -> None:
    daemon = start_daemon(tmp_path, asset_cache)
    try:
        events = collect_events(daemon)
        daemon.policy.write_text(
            '[loop]\nenabled = false\n[suite]\nname = "humaneval"\nheldout_size = 500\n'
        )
        bad = wait_for_event(events, "policy.invalid")
        assert "164 tasks" in bad["message"] and "heldout_size (500)" in bad["message"]
        daemon.policy.write_text('[loop]\nenabled = false\n[suite]\nname = "bfcl:simpel"\n')
        bad = wait_for_event(events, "policy.invalid")
        assert "unknown BFCL categories ['simpel']" in bad["message"]
        with daemon.client() as c:
            assert c.call("policy_show")["policy"]["suite"]["name"] == "bfcl:simple"
    finally:
        daemon.stop()
