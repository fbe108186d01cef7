#!/usr/bin/env python3
"""The loop's pace on the README's main command: a fresh daemon (``harnessd serve``, the
default policy, the embedded default model), unattended for ``--minutes`` with no patch
submitted (with ``--demo-patch``, a real improvement, ``scripts/demo/improve.patch``, is
proposed by ``harnessctl propose`` right at start). Or, with ``--state DIR`` and no run, the
same figures from an earlier run's state.

Figures, from the state dir's events and evaluations: minutes from start to the first
held-out verdict, held-out verdicts per hour, held-out slots spent on no-ops (candidates
whose dev behaviour equals their parent's on every dev task, by the pipeline's own
``changed_tasks``), candidates stopped with "no observable change on dev" (slots saved),
promotions (and how many of them were the loop's own proposals), the loop's proposals
stopped at the static stage (parse or static: no usable patch, does not apply or compile,
a program tried before) and their share, each promotion's replication on fresh copies
(gain and interval beside the test's), the held-out stage's wall
seconds per paired task (how fast the machine ran the tests), the candidates' dev runs per
held-out verdict and how many chosen candidates came from the dev reserve, the wall minutes
of each split's runs (held-out runs of parent and candidate side by side both count), and
the load average at
start and end and the share of CPU time the hypervisor stole (the machine is shared:
report both).

Usage: .venv/bin/python scripts/bench/loop_pace.py [--minutes 60] [--workdir DIR] [--demo-patch]
       .venv/bin/python scripts/bench/loop_pace.py --state DIR    # figures only
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from common import cpu_times, load_average, steal_percent  # noqa: E402

from daemon.evaluation.report import stored_report  # noqa: E402
from daemon.improve.pipeline import changed_tasks  # noqa: E402
from daemon.lineage.records import CandidateSource  # noqa: E402
from daemon.verdict import Gate, Stage, Verdict  # noqa: E402

HELDOUT_STAGES = (Stage.HELDOUT, Stage.PANEL)


def _dev_report(db: sqlite3.Connection, column: str, value: int) -> Any:
    row = db.execute(
        f"SELECT report FROM evaluations WHERE {column} = ? AND split = 'dev' "
        "AND state = 'done' AND report IS NOT NULL ORDER BY id DESC LIMIT 1",
        (value,),
    ).fetchone()
    return None if row is None else stored_report(row[0])


def _rows(db: sqlite3.Connection, sql: str) -> list[sqlite3.Row]:
    db.row_factory = sqlite3.Row
    try:
        return list(db.execute(sql))
    except sqlite3.OperationalError:  # a state dir from before the table existed
        return []
    finally:
        db.row_factory = None


def figures(state: Path) -> dict[str, Any]:
    """The pace figures of the run whose state dir is ``state``."""
    db = sqlite3.connect(f"file:{state / 'state.db'}?mode=ro", uri=True)
    events = [
        (ts, kind, json.loads(data))
        for ts, kind, data in db.execute("SELECT ts, kind, data FROM events ORDER BY id")
    ]
    start = next(ts for ts, kind, _ in events if kind == "daemon.started")
    end = max(ts for ts, _, _ in events)
    verdicts = [
        (ts, d)
        for ts, kind, d in events
        if kind in ("candidate.rejected", "version.promoted")
        and (kind == "version.promoted" or d.get("stage") in HELDOUT_STAGES)
    ]
    slots = [d["candidate"] for _, kind, d in events if kind == "heldout.started"]
    noops = 0
    for cid in slots:
        parent = db.execute(
            "SELECT parent_version_id FROM candidates WHERE id = ?", (cid,)
        ).fetchone()[0]
        mine, theirs = _dev_report(db, "candidate_id", cid), _dev_report(db, "version_id", parent)
        if mine is not None and theirs is not None and not changed_tasks(theirs, mine, 0.02):
            noops += 1
    saved = 0
    for (text,) in db.execute("SELECT verdict FROM candidates WHERE verdict IS NOT NULL"):
        saved += Verdict.model_validate_json(text).failed == [Gate.DEV_CHANGE.value]
    hours = (end - start) / 3600
    # The held-out stage's wall time per paired task: each candidate's held-out run (the
    # parent ran beside it, or was read from the epoch's cache) over the tasks it consumed.
    span = tasks = 0.0
    for started, finished, report in db.execute(
        "SELECT started, finished, report FROM evaluations WHERE split = 'heldout' "
        "AND candidate_id IS NOT NULL AND finished IS NOT NULL AND report IS NOT NULL"
    ):
        span += finished - started
        tasks += len(stored_report(report).tasks)
    promoted = [d["candidate"] for _, kind, d in events if kind == "version.promoted"]
    sources = [
        db.execute("SELECT source FROM candidates WHERE id = ?", (cid,)).fetchone()[0]
        for cid in promoted
    ]
    own = db.execute(
        "SELECT COUNT(*), SUM(stage IN (?, ?)) FROM candidates "
        "WHERE source = ? AND verdict IS NOT NULL",
        (Stage.PARSE.value, Stage.STATIC.value, CandidateSource.PROPOSER.value),
    ).fetchone()
    decided, static = own[0], own[1] or 0
    replications = [
        {
            "candidate": r["candidate_id"],
            "state": r["state"],
            "replicated": None
            if r["n"] is None
            else {"gain": r["gain"], "low": r["low"], "high": r["high"], "n": r["n"]},
            "test": json.loads(r["test"]) if r["test"] else None,
        }
        for r in _rows(db, "SELECT * FROM replications ORDER BY candidate_id")
    ]
    # Dev screening per held-out verdict (the dev reserve's aim: about one, not dev_pool),
    # the chosen ones that came from the reserve, and the wall minutes of each split's runs
    # (the loop is serial, so they say where the hour went).
    dev_runs = db.execute(
        "SELECT COUNT(*) FROM evaluations WHERE split = 'dev' AND candidate_id IS NOT NULL"
    ).fetchone()[0]
    chosen = [d for _, kind, d in events if kind == "candidate.chosen"]
    minutes_by_split = {
        split: round(seconds / 60, 1)
        for split, seconds in db.execute(
            "SELECT split, SUM(finished - started) FROM evaluations "
            "WHERE finished IS NOT NULL GROUP BY split ORDER BY split"
        )
    }
    return {
        "minutes_run": round((end - start) / 60, 1),
        "minutes_to_first_heldout_verdict": (
            round((verdicts[0][0] - start) / 60, 1) if verdicts else None
        ),
        "heldout_verdicts": len(verdicts),
        "heldout_verdicts_per_hour": round(len(verdicts) / hours, 2) if hours else None,
        "heldout_slots": len(slots),
        "heldout_slots_on_noops": noops,
        "stopped_no_change_on_dev": saved,
        "promotions": len(promoted),
        "promotions_of_the_loops_own_proposals": sources.count(CandidateSource.PROPOSER),
        "proposals_decided": decided,
        "proposals_stopped_at_static": static,
        "static_stop_share": round(static / decided, 3) if decided else None,
        # Replies drawn again before they became proposals (they would have stopped at
        # static): the proposer's own check, counted so that the share above is read with it.
        "replies_discarded": sum(kind == "proposal.discarded" for _, kind, _ in events),
        "replications": replications,
        "heldout_seconds_per_paired_task": round(span / tasks, 1) if tasks else None,
        "dev_runs_of_candidates": dev_runs,
        "dev_runs_per_heldout_verdict": round(dev_runs / len(verdicts), 1) if verdicts else None,
        "chosen_from_the_dev_reserve": sum(bool(d.get("from_reserve")) for d in chosen),
        "run_minutes_by_split": minutes_by_split,
        "candidates": db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0],
    }


def run(minutes: float, work: Path, demo_patch: bool) -> Path:
    """A fresh daemon in ``work`` for ``minutes``; returns its state dir."""
    state = work / "state"
    config = work / "harnessd.toml"
    cache = ROOT / ".state" / "cache"
    config.write_text(
        f'state_dir = "{state}"\ncache_dir = "{cache.resolve()}"\n'
        f'harnesses_dir = "{work / "harnesses"}"\npolicy = "{ROOT / "policies/default.toml"}"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ctl = [sys.executable, "-m", "daemon.control.ctl", "--state-dir", str(state)]
    print(f"load at start: {load_average()}", flush=True)
    first = last = cpu_times()
    with (work / "daemon.log").open("w") as log:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "--config", str(config), "serve"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        for _ in range(300):
            if subprocess.run([*ctl, "status"], capture_output=True, env=env).returncode == 0:
                break
            time.sleep(1)
        if demo_patch:
            patch = ROOT / "scripts" / "demo" / "improve.patch"
            out = subprocess.run(
                [*ctl, "propose", str(patch)], capture_output=True, text=True, env=env
            )
            print(out.stdout.splitlines()[0] if out.stdout else out.stderr, flush=True)
        deadline = time.monotonic() + 60 * minutes
        while time.monotonic() < deadline and daemon.poll() is None:
            time.sleep(30)
            now = cpu_times()
            steal = steal_percent(last, now)
            print(f"{time.strftime('%H:%M:%S')} load {load_average()} steal {steal}", flush=True)
            last = now
        print(f"load at end: {load_average()}", flush=True)
        print(f"CPU steal over the run: {steal_percent(first, cpu_times())}", flush=True)
    finally:
        subprocess.run([*ctl, "stop"], capture_output=True, env=env, timeout=120)
        daemon.wait(timeout=120)
    return state


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--workdir", type=Path, help="default: a fresh directory under /tmp")
    parser.add_argument(
        "--demo-patch", action="store_true", help="propose scripts/demo/improve.patch at start"
    )
    parser.add_argument("--state", type=Path, help="only compute the figures of this state dir")
    args = parser.parse_args()
    if args.state is not None:
        state = args.state
    else:
        work = args.workdir or Path(tempfile.mkdtemp(prefix="harnessd-pace-"))
        work.mkdir(parents=True, exist_ok=True)
        state = run(args.minutes, work, args.demo_patch)
    print(json.dumps(figures(state), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
