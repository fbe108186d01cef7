"""A daemon whose policy names a file suite runs its cycles on it, and live traffic becomes
tasks: a labelled ``ask`` shows up in the exported suite, which loads as a suite again.
All along, nothing it does holds its event loop (asyncio's debug mode watches every step)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from daemon.suites.filesuite import FileSuite
from tests.daemon_process import collect_events, ctl, start_daemon, wait_for_event
from tests.improve.patches import IMPROVE
from tests.support.loop_watch import SLOW_S, slow_steps

KEY_ENV = "LOOP_WATCH_OPENAI_KEY"
# Tasks: 2 dev, 16 held-out. The first candidate's share of the lineage's alpha needs 11
# straight held-out wins (``harnessctl policy check`` on these sizes: +74.8 points detected);
# 6 held-out tasks could promote nothing.
N = 18


def _question(i: int) -> str:
    return f"Q{i}: what is today's code word? Answer with the word only."


def _world(tmp_path: Path) -> str:
    team = tmp_path / "team"
    team.mkdir()
    check = {"type": "exact", "casefold": True}
    tasks = [
        {"id": f"word-{i}", "prompt": _question(i), "expected": f"word{i}", "check": check}
        for i in range(N)
    ]
    (team / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    # The solver knows the words only when the harness asks for them (the IMPROVE patch).
    rules = ['mode = "rules"']
    for i in range(N):
        rules += [
            "[[rules]]",
            f"match = {json.dumps('^Q' + str(i) + ':')}",
            'system = "MODE:GOOD"',
            f'content = "Word{i}"',
        ]
    rules += ["[[rules]]", 'content = "I do not know."']
    (tmp_path / "solver.toml").write_text("\n".join(rules) + "\n")
    (tmp_path / "proposer.toml").write_text(
        'mode = "sequence"\nafter_last = "repeat_last"\n[[replies]]\n'
        f"content = {json.dumps(IMPROVE)}\n"
    )
    return f"""
[models]
primary = "scripted:{tmp_path / "solver.toml"}"
panel = []
[proposer]
model = "scripted:{tmp_path / "proposer.toml"}"
# The scripted proposer repeats one patch: one proposal per cycle (more are duplicates).
dev_pool = 1
[suite]
name = "file:team/tasks.jsonl"
dev_size = 2
heldout_size = 16
split_seed = "file-suite"
[sandbox]
wall_s = 60.0
concurrency = 3
[pipeline]
dev_max_regression = 1.0
[loop]
cycle_pause_s = 0.0
max_cycles = 1
"""


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_a_daemon_runs_cycles_on_a_file_suite_and_labels_live_requests(
    tmp_path: Path, asset_cache: Path
) -> None:
    policy = _world(tmp_path)
    daemon = start_daemon(
        tmp_path,
        asset_cache,
        policy,
        env={KEY_ENV: "sk-never-sent"},
        settings_text=f'[openai]\napi_key_env = "{KEY_ENV}"\n',
        loop_watch=True,
    )
    try:
        deadline = time.monotonic() + 700
        while True:
            with daemon.client() as c:
                cands = c.call("lineage", candidates=5)["candidates"]
            if cands and cands[0]["state"] in ("accepted", "rejected"):
                break
            assert time.monotonic() < deadline, daemon.log.read_text()[-3000:]
            assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
            time.sleep(1.0)
        with daemon.client() as c:
            shown = c.call("show", ref=f"c{cands[0]['id']}")
        assert shown["state"] == "accepted", shown["verdict"]
        suites = {r["summary"]["suite"] for r in shown["reports"] if "summary" in r}
        assert len(suites) == 1 and suites.pop().startswith("file:tasks@"), shown["reports"]

        r = ctl(daemon, "ask", _question(3))
        assert r.returncode == 0 and "Word3" in r.stdout, r.stderr
        request = json.loads(ctl(daemon, "--json", "ask", _question(5)).stdout)["request"]
        r = ctl(
            daemon,
            "label",
            str(request),
            "--suite",
            "team",
            "--expected",
            "word5",
            "--check",
            '{"type": "exact", "casefold": true}',
        )
        assert r.returncode == 0 and "added to suite team (1 tasks" in r.stdout, r.stderr
        r = ctl(daemon, "label", str(request), "--suite", "team", "--expected", "x")
        assert r.returncode == 1 and "already has a task" in r.stderr, r.stderr
        r = ctl(
            daemon,
            "label",
            str(request),
            "--suite",
            "team",
            "--check",
            "number",
            "--expected",
            "five",
            "--id",
            "other",
        )
        assert r.returncode == 2 and "a 'number' check takes JSON" in r.stderr, r.stderr

        r = ctl(daemon, "suite", "export", "team")
        assert r.returncode == 0, r.stderr
        (line,) = [json.loads(x) for x in r.stdout.splitlines()]
        assert line["id"] == f"request-{request}" and line["prompt"] == _question(5)
        assert line["expected"] == "word5" and line["notes"]["answer"] == "Word5"
        out = tmp_path / "exported.jsonl"
        assert ctl(daemon, "suite", "export", "team", "-o", str(out)).returncode == 0
        assert FileSuite.load(out).task_ids() == [f"request-{request}"]

        # A task of a suite the daemon has not loaded yet (its data read beside the loop).
        r = ctl(daemon, "run", "bfcl:simple:simple_python_0")
        assert r.returncode == 0, r.stderr
        # A policy edit naming a hosted model: checking that it can be made imports the
        # provider's SDK (a second or more, the first time), never on the loop. The loop
        # has run its one cycle, so the model is never called.
        events = collect_events(daemon)
        daemon.policy.write_text(policy.replace("panel = []", 'panel = ["openai:gpt-4o-mini"]'))
        wait_for_event(events, "policy.applied", timeout=60)
    finally:
        daemon.stop()
    # Startup, a candidate's cycle, live requests, a suite loaded on demand, the stop: no
    # step of the daemon's own code held the event loop longer than SLOW_S.
    slow = slow_steps(daemon.log.read_text())
    assert not slow, f"steps longer than {SLOW_S} s on the event loop:\n" + "\n".join(slow)
