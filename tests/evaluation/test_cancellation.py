"""Cancelling an evaluation mid-run leaves no container and no per-run directory behind:
Ctrl-C on ``harnessd eval``, and SIGTERM to the daemon during a cycle."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from sandbox.labels import INSTANCE, instance_id
from sandbox.rundir import runs_root
from tests.daemon_process import start_daemon
from tests.improve.patches import IMPROVE, proposer_script
from tests.improve.scripted_world import DEV, HELDOUT, policy_text, positions, solver_script
from tests.support.wait import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SLOW = "import time\n\ndef solve(task, ctx):\n    time.sleep(120)\n    return {'output': []}\n"


def _mine(client: docker.DockerClient, instance: str) -> list[str]:
    return [
        c["Id"]
        for c in client.api.containers(all=True, filters={"label": f"{INSTANCE}={instance}"})
    ]


def _slow_eval(tmp_path: Path, asset_cache: Path) -> tuple[subprocess.Popen[bytes], Path]:
    harness = tmp_path / "slow"
    harness.mkdir(exist_ok=True)
    (harness / "harness.py").write_text(SLOW)
    (tmp_path / "m.toml").write_text('mode = "rules"\n[[rules]]\ncontent = "x"\n')
    state = tmp_path / "state"
    config = tmp_path / "harnessd.toml"
    config.write_text(f'state_dir = "{state}"\ncache_dir = "{asset_cache}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSD_")}
    log = tmp_path / f"eval-{len(list(tmp_path.glob('eval-*.err')))}.err"
    with log.open("wb") as err:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daemon.cli",
                "--config",
                str(config),
                "eval",
                str(harness),
                "--suite",
                "bfcl:simple",
                "--split",
                "dev",
                "--limit",
                "4",
                "--model",
                f"scripted:{tmp_path / 'm.toml'}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    return proc, state


def _exited(proc: subprocess.Popen[bytes], tmp_path: Path, timeout: float) -> None:
    """Wait for ``proc``; if it outlives ``timeout``, fail with where its threads wait
    (``kill -USR1`` prints their stacks to its stderr), so a slow exit says why."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(2)
        logs = "\n".join(p.read_text(errors="replace")[-6000:] for p in tmp_path.glob("*.err"))
        pytest.fail(f"harnessd eval did not exit {timeout:.0f} s after SIGINT; stacks:\n{logs}")


def test_ctrl_c_on_eval_removes_containers_and_run_dirs(tmp_path: Path, asset_cache: Path) -> None:
    proc, state = _slow_eval(tmp_path, asset_cache)
    client = docker.from_env()
    instance = f"{instance_id(state)}-eval-{proc.pid}"
    try:
        wait_until(
            lambda: len(_mine(client, instance)) >= 2,
            timeout=120,
            what="eval containers to start",
            interval=0.2,
        )
        assert any(runs_root(instance).iterdir())
        proc.send_signal(signal.SIGINT)
        _exited(proc, tmp_path, 180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)  # reaped here, not left to warn in whichever test runs next
    assert proc.returncode != 0
    assert _mine(client, instance) == []
    assert list(runs_root(instance).iterdir()) == []
    client.close()


def test_sigterm_during_a_cycle_leaves_nothing_behind(tmp_path: Path, asset_cache: Path) -> None:
    n = max(DEV, HELDOUT)
    solver = tmp_path / "solver.toml"
    solver.write_text(solver_script(asset_cache, {"GOOD": positions(n, lambda i: i % 2 == 0)}))
    proposer = tmp_path / "proposer.toml"
    proposer.write_text(proposer_script([IMPROVE]))
    policy = policy_text(solver, solver, proposer, cycles=1).replace(
        f'panel = ["scripted:{solver}"]', "panel = []"
    )
    daemon = start_daemon(tmp_path, asset_cache, policy)
    client = docker.from_env()
    instance = instance_id(daemon.state_dir)
    try:
        wait_until(
            lambda: len(_mine(client, instance)) >= 1,
            timeout=120,
            what="a task container",
            interval=0.2,
        )
    finally:
        code = daemon.stop()
    assert code == 0
    assert _mine(client, instance) == []
    assert list(runs_root(instance).iterdir()) == []
    client.close()
    db = sqlite3.connect(daemon.state_dir / "state.db")
    states = {r[0] for r in db.execute("SELECT state FROM candidates")}
    assert "evaluating" not in states
    running = db.execute("SELECT COUNT(*) FROM evaluations WHERE state = 'running'").fetchone()
    assert running[0] == 0


def test_containers_of_a_killed_eval_are_reaped_by_the_next_one(
    tmp_path: Path, asset_cache: Path
) -> None:
    client = docker.from_env()
    proc, state = _slow_eval(tmp_path, asset_cache)
    orphan = f"{instance_id(state)}-eval-{proc.pid}"
    try:
        wait_until(
            lambda: len(_mine(client, orphan)) >= 2,
            timeout=120,
            what="eval containers to start",
            interval=0.2,
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert _mine(client, orphan)  # kill -9: nothing could clean up
        second, _ = _slow_eval(tmp_path, asset_cache)
        try:
            wait_until(
                lambda: not _mine(client, orphan),
                timeout=120,
                what="the orphans to be reaped",
                interval=0.2,
            )
        finally:
            second.send_signal(signal.SIGINT)
            _exited(second, tmp_path, 180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)  # reaped here, not left to warn in whichever test runs next
    assert _mine(client, f"{instance_id(state)}-eval-{second.pid}") == []
    client.close()
