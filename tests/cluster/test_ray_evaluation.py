"""Evaluations on a real local Ray cluster (a head and worker nodes on this machine), in
real sandboxes: the verdicts the local executor gives, through ``harnessd eval`` and
through a runtime configured for Ray; and a worker node killed mid-evaluation loses no
unit and leaks no container, run dir or Ray process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.config.policy import SuitePolicy, load_policy
from daemon.config.reload import PolicyHolder
from daemon.config.settings import load_settings
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.runtime import Runtime, open_runtime
from daemon.store import Store
from daemon.suites import evaluated_suite, load_suite
from daemon.suites.splits import split
from sandbox.engine import DockerEngine
from sandbox.labels import INSTANCE, instance_id
from sandbox.remote import OWNER
from sandbox.rundir import ROOT_PREFIX, runs_root
from tests.cluster.ray_cluster import LocalCluster, Node

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

SUITE = "bfcl:simple"
POLICY = """
[models]
primary = "scripted:{model}"
[suite]
name = "bfcl:simple"
dev_size = 2
heldout_size = 8
split_seed = "ray"
[sandbox]
wall_s = 60.0
concurrency = 2
"""

# Right on the questions whose answers the test wrote in, wrong on the rest; one model
# call each (through the gateway, metered); PAUSE seconds of waiting keep units in flight.
HARNESS = """
import json, pathlib, time

HERE = pathlib.Path(__file__).parent
ANSWERS = json.loads((HERE / "answers.json").read_text())
PAUSE = float((HERE / "pause.txt").read_text())


def solve(task, ctx):
    ctx.model.chat(task["prompt"], max_tokens=16)
    time.sleep(PAUSE)
    question = [m["content"] for m in task["prompt"] if m["role"] == "user"][-1]
    calls = ANSWERS.get(question, [{"name": "made_up", "arguments": {}}])
    return {"output": calls, "claimed_success": True}
"""


def _setup(tmp_path: Path, asset_cache: Path, address: str, pause: float) -> tuple[Path, Path]:
    model = tmp_path / "model.toml"
    model.write_text('mode = "rules"\n[[rules]]\ncontent = "no idea"\n')
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(model=model))
    state = tmp_path / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    config = tmp_path / "harnessd.toml"
    config.write_text(
        f'state_dir = "{state}"\ncache_dir = "{asset_cache}"\npolicy = "{policy}"\n'
        f'[executor]\ntype = "ray"\naddress = "{address}"\n'
    )
    harness = tmp_path / "harness"
    harness.mkdir(exist_ok=True)
    (harness / "harness.py").write_text(HARNESS)
    (harness / "pause.txt").write_text(str(pause))
    return config, harness


def _answer_half(harness: Path, asset_cache: Path, ids: list[str]) -> None:
    # The tasks as the daemon evaluates them: held-out ones are counterfactual copies.
    p = SuitePolicy(name=SUITE, dev_size=2, heldout_size=8, split_seed="ray")
    suite = evaluated_suite(p, asset_cache, "ray")
    answers = {}
    for task_id in ids[::2]:
        question = [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1]
        answers[question] = suite.reference_output(task_id)
    (harness / "answers.json").write_text(json.dumps(answers))


@asynccontextmanager
async def _runtime(config: Path) -> AsyncIterator[Runtime]:
    loaded = load_settings(config)
    store = Store(loaded.state_dir / "state.db")
    try:
        holder = PolicyHolder(loaded.policy_path, load_policy(loaded.policy_path))
        instance = instance_id(loaded.state_dir)
        async with open_runtime(loaded, holder, store, instance=instance) as rt:
            yield rt
    finally:
        store.close()


def _verdicts(report: dict[str, Any]) -> list[tuple[str, bool, Any]]:
    return [(t["id"], t["passed"], t["error"]) for t in report["tasks"]]


def _eval_cli(config: Path, harness: Path, executor: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "--config",
            str(config),
            "eval",
            str(harness),
            "--split",
            "heldout",
            "--executor",
            executor,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_harnessd_eval_on_ray_gives_the_local_verdicts(
    ray_cluster: LocalCluster, tmp_path: Path, asset_cache: Path
) -> None:
    # No address in the config: Ray's own RAY_ADDRESS names the cluster.
    config, harness = _setup(tmp_path, asset_cache, "", pause=0.0)
    config.write_text(config.read_text().replace('address = ""\n', ""))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("HARNESSD_") and k != "RAY_ADDRESS"
    }
    suite = load_suite(SUITE, asset_cache)
    ids = split(suite.task_ids(), seed="ray", dev_size=2, heldout_size=8).heldout
    _answer_half(harness, asset_cache, ids)
    local = _eval_cli(config, harness, "local", env)
    assert [t["id"] for t in local["tasks"]] == ids
    remote = _eval_cli(config, harness, "ray", {**env, "RAY_ADDRESS": ray_cluster.address})
    assert _verdicts(remote) == _verdicts(local)
    assert 0 < local["accuracy"] < 1 and not local["errors"]
    # Tokens are metered by the daemon's gateway either way, identically.
    assert [t["tokens"] for t in remote["tasks"]] == [t["tokens"] for t in local["tasks"]]
    assert all(t["model_calls"] == 1 and t["requeues"] == 0 for t in remote["tasks"])


async def _node_leftovers(instance: str) -> tuple[list[str], list[Path]]:
    async with DockerEngine.connected() as engine:
        names = [
            n
            for n in await engine.instances()
            if (m := OWNER.match(n)) and m["instance"] == instance
        ]
    roots = list(runs_root("x").parent.glob(f"{ROOT_PREFIX}{instance}-n*/run-*"))
    return names, roots


async def _units_on(node: Node, instance: str) -> int:
    """Containers of this evaluation that a process of ``node`` started."""
    async with DockerEngine.connected() as engine:
        found = await engine.call("listing", engine.api.containers, filters={"label": INSTANCE})
    pids = node.processes()
    owners = [OWNER.match(c["Labels"].get(INSTANCE, "")) for c in found]
    return sum(1 for m in owners if m and m["instance"] == instance and int(m["pid"]) in pids)


@pytest.mark.anyio
async def test_killing_a_worker_node_mid_evaluation_loses_no_unit_and_leaks_nothing(
    ray_cluster: LocalCluster, tmp_path: Path, asset_cache: Path
) -> None:
    config, harness = _setup(tmp_path, asset_cache, ray_cluster.address, pause=4.0)
    victim = ray_cluster.workers()[0]
    async with _runtime(config) as rt:
        assert rt.executor.name == "ray"
        policy = rt.policy.get()
        ids = rt.splits(policy=policy).heldout
        _answer_half(harness, asset_cache, ids)
        reports = []

        async def run() -> None:
            subject, model = Subject(harness, "h"), policy.models.primary
            report = await evaluate(
                rt, subject, split="heldout", task_ids=ids, model=model, policy=policy
            )
            reports.append(report)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(300):
                while not await _units_on(victim, rt.instance):
                    assert not reports, "the evaluation ended before the victim ran a unit"
                    await anyio.sleep(0.2)  # polling the engine: there is no event to wait on
            await anyio.to_thread.run_sync(victim.kill)
        report = reports[0]
        # Every unit came back with a verdict, the lost ones run again exactly once.
        assert [t.id for t in report.tasks] == ids
        assert not report.errors
        assert report.accuracy == pytest.approx(len(ids[::2]) / len(ids))
        assert [t.passed for t in report.tasks] == [i % 2 == 0 for i in range(len(ids))]
        requeued = [t for t in report.tasks if t.requeues]
        assert requeued and all(t.requeues == 1 for t in requeued)
        # What the killed node left, the surviving node's next unit removed.
        assert await _node_leftovers(rt.instance) == ([], [])
    assert not victim.alive
