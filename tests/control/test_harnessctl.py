"""harnessctl as a person uses it: every verb through the real CLI against a real daemon,
and the table views read in a real 80-column terminal."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.control.terminal import in_terminal, misfits, table_rows
from tests.daemon_process import RunningDaemon, ctl, start_daemon
from tests.improve.patches import IMPROVE
from tests.improve.scripted_world import DEV, HELDOUT, policy_text, positions, solver_script
from tests.support.scrape import labelled, scrape
from tests.support.wait import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Two lines, longer than any terminal: the lineage shows it clipped to one line of its row.
RATIONALE = (
    "Say which mode we want in the system message, and claim success only when the harness "
    "produced calls:\nthe verifier saw claimed successes on empty outputs, which the honesty "
    "gate holds against us."
)


def _ctl_argv(daemon: RunningDaemon) -> list[str]:
    return [sys.executable, "-m", "daemon.control.ctl", "--state-dir", str(daemon.state_dir)]


def _fits_80(daemon: RunningDaemon, *args: str) -> str:
    """``harnessctl args`` in an 80x40 terminal: what it printed, checked to fit."""
    code, text = in_terminal([*_ctl_argv(daemon), *args], columns=80, rows=40)
    assert code == 0, text
    assert not misfits(text, 80), "\n".join([*misfits(text, 80), text])
    return text


@pytest.mark.timeout(900)
def test_every_verb_through_the_cli(tmp_path: Path, asset_cache: Path) -> None:
    n = max(DEV, HELDOUT)
    solver = tmp_path / "solver.toml"
    solver.write_text(solver_script(asset_cache, {"GOOD": positions(n, lambda i: i % 2 == 0)}))
    # No self-proposals: only the patch a person submits goes through the pipeline.
    # The review step on: the patch waits for a person's approval, so ``review`` has one.
    policy = (
        policy_text(solver, solver, solver, cycles=0)
        .replace(f'panel = ["scripted:{solver}"]', "panel = []")
        .replace("max_cycles = 0", "max_cycles = 0\nenabled = false")
    ) + "\n[gates.review]\nenabled = true\n"
    metrics = "\n[metrics]\nenabled = true\nport = 0\n"
    daemon = start_daemon(tmp_path, asset_cache, policy, settings_text=metrics)
    patch = tmp_path / "improve.txt"
    patch.write_text(IMPROVE)
    broken = tmp_path / "broken.diff"
    broken.write_text(
        "--- a/harness.py\n+++ b/harness.py\n@@ -1,1 +1,1 @@\n-nothing like this\n+x\n"
    )
    try:
        r = ctl(daemon, "status")
        assert r.returncode == 0 and "live version: v0001" in r.stdout, r.stderr
        assert json.loads(ctl(daemon, "--json", "status").stdout)["live"]["version"] == "v0001"

        r = ctl(daemon, "show", "v0009")
        assert r.returncode == 1 and "error (not_found)" in r.stderr, r.stderr
        r = ctl(daemon, "propose", str(broken), "--dry-run")
        assert r.returncode == 1 and "error (invalid_patch)" in r.stderr
        r = ctl(daemon, "propose", str(patch), "--dry-run")
        assert r.returncode == 0 and "MODE:GOOD" in r.stdout

        r = ctl(daemon, "propose", str(broken), "--rationale", "a patch that cannot apply")
        assert r.returncode == 1 and "error (invalid_patch)" in r.stderr  # recorded, rejected
        r = ctl(daemon, "--json", "propose", str(patch), "--rationale", RATIONALE)
        assert r.returncode == 0, r.stderr
        candidate = json.loads(r.stdout)["candidate"]
        deadline = time.monotonic() + 600
        while not json.loads(ctl(daemon, "--json", "review").stdout)["awaiting"]:
            assert time.monotonic() < deadline, daemon.log.read_text()[-3000:]
            time.sleep(1)

        # The table views in an 80-column terminal: fewer columns, one line a row.
        lineage = _fits_80(daemon, "lineage")
        rows = {row[0]: row for row in table_rows(lineage)}
        assert set(rows) == {f"c{candidate - 1}", f"c{candidate}"}, lineage
        clipped = [c for c in rows[f"c{candidate}"] if c.startswith("Say which mode")]
        assert clipped and clipped[0].endswith("…"), lineage
        code, wide = in_terminal([*_ctl_argv(daemon), "lineage", "--wide"])
        assert code == 0 and " ".join(RATIONALE.split()) in wide, wide  # whole, on one line
        assert "built on" in wide and "decided by" in wide
        shown = _fits_80(daemon, "show", f"c{candidate}")
        assert "accuracy" in shown and "pass" in shown and "MODE:GOOD" in shown
        assert f"awaiting review: c{candidate}" in _fits_80(daemon, "status")
        review = _fits_80(daemon, "review")
        assert f"harnessctl approve c{candidate}" in review and "MODE:GOOD" in review

        r = ctl(daemon, "approve", f"c{candidate}", "--as", "tester", "--reason", "reads well")
        assert r.returncode == 0 and "approved by tester: v0002 is live" in r.stdout, r.stderr
        shown = json.loads(ctl(daemon, "--json", "show", f"c{candidate}").stdout)
        assert shown["state"] == "accepted" and shown["source"] == "external"
        assert shown["rationale"] == RATIONALE and shown["decided_by"] == "person"
        _fits_80(daemon, "show", "v0002")
        r = ctl(daemon, "show", "v0002")
        assert r.returncode == 0 and "accuracy" in r.stdout and "pass" in r.stdout
        r = ctl(daemon, "diff", "v0001", "v0002")
        assert r.returncode == 0 and "+    state.messages.insert(0" in r.stdout

        task = json.loads(ctl(daemon, "--json", "status").stdout)
        assert task["live"]["version"] == "v0002"
        r = ctl(daemon, "--json", "run", "bfcl:simple:simple_python_0")
        assert r.returncode == 0 and json.loads(r.stdout)["version"] == "v0002"
        r = ctl(daemon, "ask", "hello?")
        assert r.returncode == 0 and "version v0002" in r.stdout
        r = ctl(daemon, "run", "bfcl:simple:no_such_task")
        assert r.returncode == 1 and "error (not_found)" in r.stderr

        assert ctl(daemon, "rollback", "v0001", "--reason", "test").returncode == 0
        r = ctl(daemon, "rollback", "v0001")
        assert r.returncode == 1 and "error (conflict)" in r.stderr
        assert "v0001" in json.loads(ctl(daemon, "--json", "status").stdout)["live"]["version"]

        _the_scrape_shows_the_verdict_its_tokens_and_latency(daemon, candidate)

        assert json.loads(ctl(daemon, "--json", "pause").stdout) == {"paused": True}
        assert "paused" in ctl(daemon, "status").stdout
        assert json.loads(ctl(daemon, "--json", "resume").stdout) == {"paused": False}
        r = ctl(daemon, "events", "--limit", "200")
        assert "version.promoted" in r.stdout and "version.rolled_back" in r.stdout
        assert ctl(daemon, "policy", "show").returncode == 0
        default = Path(__file__).resolve().parents[2] / "policies" / "default.toml"
        r = ctl(daemon, "policy", "check", str(default))
        assert r.returncode == 0 and "valid" in r.stdout, r.stderr
        assert "epoch 1, candidate 1" in r.stdout and "+4.3" in r.stdout, r.stdout
        r = ctl(daemon, "events", "--limit", "200")
        assert "acceptance.power" in r.stdout and "power 0.8" in r.stdout
        bad = tmp_path / "bad.toml"
        bad.write_text("[gates.tokens]\nmax_token_ratio = -1\n")
        r = ctl(daemon, "policy", "check", str(bad))
        assert r.returncode == 1 and "key 'gates.tokens.max_token_ratio'" in r.stderr
        assert ctl(daemon, "stop").returncode == 0
        assert daemon.proc.wait(60) == 0
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()
    r = ctl(daemon, "status")
    assert r.returncode == 3
    assert r.stderr.strip().count("\n") == 0 and "start it with" in r.stderr


def _the_scrape_shows_the_verdict_its_tokens_and_latency(
    daemon: RunningDaemon, candidate: int
) -> None:
    """The metrics port of a daemon that rejected a patch at once, decided a candidate (held
    for review, approved and promoted) and rolled back."""
    url = json.loads(ctl(daemon, "--json", "status").stdout)["metrics"]["url"]
    got = scrape(url)
    states = {dict(k)["state"]: v for k, v in labelled(got, "harnessd_candidates").items()}
    assert states == {"accepted": 1, "rejected": 1}, states
    assert got["harnessd_promotions_total", ()] == 1
    assert got["harnessd_rollbacks_total", ()] == 1
    assert labelled(got, "harnessd_live_version_info") == {(("version", "v0001"),): 1}

    # Its tokens: the ledger's, by model and purpose, to the token. The daemon may still be
    # spending (a baseline after the rollback): the scrape and the ledger are compared at a
    # moment between two model calls, not once, when one may be written and not the other.
    def ledger_now() -> dict[tuple[str, str, str], int]:
        db = sqlite3.connect(daemon.state_dir / "state.db")
        try:
            return {
                (model, purpose, kind): tokens
                for model, purpose, prompt, completion in db.execute(
                    "SELECT model, purpose, SUM(prompt_tokens), SUM(completion_tokens) "
                    "FROM ledger GROUP BY model, purpose"
                )
                for kind, tokens in (("prompt", prompt), ("completion", completion))
            }
        finally:
            db.close()

    def scraped_tokens() -> dict[tuple[str, str, str], float]:
        return {
            (d["model"], d["purpose"], d["kind"]): v
            for d, v in (
                (dict(k), v) for k, v in labelled(scrape(url), "harnessd_tokens_total").items()
            )
        }

    seen: list[tuple[Any, Any]] = []

    def agree() -> bool:
        before = ledger_now()
        tokens = scraped_tokens()
        seen.append((tokens, before))
        return tokens == before == ledger_now() and sum(tokens.values()) > 0

    wait_until(
        agree,
        timeout=120,
        what="scraped tokens to match the ledger",
        detail=lambda: f"last seen (scrape, ledger): {seen[-1:]}",
    )
    db = sqlite3.connect(daemon.state_dir / "state.db")
    try:
        [(created,)] = db.execute("SELECT created FROM candidates WHERE id = ?", (candidate,))
        [(decided,)] = db.execute("SELECT ts FROM events WHERE kind = 'candidate.awaiting_review'")
    finally:
        db.close()
    # Its latency: one evaluation, from its start to its verdict (every gate passed: held
    # for review), within the candidate's time from its proposal to that verdict. The
    # person's approval later is no evaluation; the patch rejected at once was not timed.
    verdict = (("verdict", "awaiting_review"),)
    assert labelled(got, "harnessd_candidate_evaluation_seconds_count") == {verdict: 1}
    seconds = got["harnessd_candidate_evaluation_seconds_sum", verdict]
    assert 0 < seconds <= decided - created + 1
    assert got["harnessd_evaluated_tasks_total", (("split", "heldout"),)] > 0
    assert labelled(got, "harnessd_heldout_tests") == {(("state", "promoted"),): 1}
    # The ask and run before this scrape, timed by kind.
    for kind in ("ask", "run"):
        done = (("kind", kind), ("outcome", "done"))
        assert got["harnessd_request_seconds_count", done] >= 1, kind
    assert got["harnessd_budget_tokens_left", (("window", "day"),)] > 0
