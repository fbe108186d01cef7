"""A promotion is replicated on fresh held-out copies, in a real daemon through the real
sandbox: the promoted version and its parent on tasks the test did not run, remade from
another seed; ``status`` and ``show`` give the replicated gain beside the test's.

The world is the scripted one (:mod:`tests.improve.scripted_world`): the solver answers a
task right only when the harness's mode token covers its position. It answers the tasks as
the daemon evaluates them, so besides the test's held-out copies it holds the replication's
own copies of the pool (made from the replication's seed: another question for each id).
The seed harness sends no mode and solves none; the promoted one (``MODE:GOOD``, the
improvement of :mod:`tests.improve.patches`) solves the even positions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from daemon.config.policy import SuitePolicy
from daemon.control import views
from daemon.improve import replication
from daemon.store import Store
from daemon.suites import policy_splits, replication_suite
from tests.daemon_process import start_daemon
from tests.improve import patches
from tests.improve.scripted_world import (
    DEV,
    SEED,
    SUITE,
    mode_rules,
    policy_text,
    positions,
    solver_script,
)
from tests.support.wait import wait_for_decided

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HELDOUT, TASKS = 56, 12
CATCH_ALL = '[[rules]]\ncontent = "I do not know."\n'


def _solver(cache: Path, path: Path) -> None:
    """The scripted world's solver, plus rules for the replication's copies of c1."""
    modes = {
        "GOOD": positions(HELDOUT, lambda i: i % 2 == 0),
        "BETTER": positions(HELDOUT, lambda i: i % 8 != 7),
    }
    text = solver_script(cache, modes, HELDOUT)
    assert text.endswith(CATCH_ALL)
    p = SuitePolicy(name=SUITE, dev_size=DEV, heldout_size=HELDOUT, split_seed=SEED)
    pool = policy_splits(p, cache, SEED).heldout
    # Every id's copy: which ids the draw takes depends on what the test ran.
    draw = replication_suite(p, cache, SEED, "replication:c1", set(), HELDOUT)
    lines = mode_rules(draw.suite, pool, modes)
    path.write_text(text[: -len(CATCH_ALL)] + "\n".join(lines) + "\n" + CATCH_ALL)


def _replicated(daemon: Any, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with daemon.client() as c:
            status: dict[str, Any] = c.call("status")
        rep = status.get("replication")
        if rep and rep["state"] in ("done", "failed"):
            return status
        assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
        time.sleep(1.0)
    raise AssertionError(f"no replication finished:\n{daemon.log.read_text()[-3000:]}")


@pytest.mark.timeout(1800)
def test_a_promotion_is_replicated_on_fresh_tasks(tmp_path: Path, asset_cache: Path) -> None:
    solver = tmp_path / "solver.toml"
    _solver(asset_cache, solver)
    proposer = tmp_path / "proposer.toml"
    proposer.write_text(patches.proposer_script([patches.IMPROVE]))
    policy = (
        policy_text(solver, solver, proposer, cycles=1, heldout=HELDOUT, alpha=0.2).replace(
            f'panel = ["scripted:{solver}"]', "panel = []"
        )
        + f"\n[replication]\ntasks = {TASKS}\n"
    )
    daemon = start_daemon(tmp_path, asset_cache, policy)
    try:
        lineage = wait_for_decided(daemon, 1, timeout=1500)
        assert [x["state"] for x in lineage["candidates"]] == ["accepted"], lineage
        status = _replicated(daemon, timeout=900)
        with daemon.client() as c:
            shown = c.call("show", ref="c1")
            version = c.call("show", ref="v0002")
            events = c.call("events", limit=500)
    finally:
        daemon.stop()

    rep = status["replication"]
    assert rep["state"] == "done", rep
    assert (rep["candidate_id"], rep["n"]) == (1, TASKS)
    result, test = rep["result"], rep["test"]
    assert result["n"] == TASKS and result["parent_solved"] == 0 < result["candidate_solved"]
    assert result["low"] <= result["gain"] <= result["high"] and result["gain"] > 0
    assert result["wins"] - result["losses"] == result["candidate_solved"] - result["parent_solved"]
    assert test is not None and test["gain"] > 0 and test["n"] > 0
    # Fresh copies, of ids the test did not run (the pool has enough left).
    assert rep["remade"] and rep["reused"] == []
    store = Store(daemon.state_dir / "state.db")
    try:
        tested = replication.used_ids(store, 1)
    finally:
        store.close()
    assert tested and not tested & set(rep["task_ids"])
    # Never part of the verdict.
    assert "replication" not in json.dumps(shown["verdict"])
    assert shown["replication"] == version["replication"] == rep

    kinds = [e["kind"] for e in events]
    assert "replication.started" in kinds and "replication.done" in kinds
    done = next(e for e in events if e["kind"] == "replication.done")
    assert done["data"]["n"] == TASKS and done["data"]["gain"] == result["gain"]

    console = Console(record=True, width=200)
    views.show(shown, console)
    views.status(status, console)
    text = console.export_text()
    assert "replication: replicated +" in text and "held-out test +" in text
    assert "last promotion (c1): replicated +" in text
