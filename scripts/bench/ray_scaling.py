#!/usr/bin/env python3
"""Evaluation throughput on a Ray cluster of 1, 2 and 4 worker nodes, and the per-unit
overhead of the ``ray`` executor against ``local``.

All nodes run on this machine (a real local cluster: a head and ``ray start`` worker
nodes, as in ``tests/cluster``), so the model is a fixed-latency stand-in: every chat waits
``--latency`` seconds and costs no CPU, as a remote model API would. The harness makes one
call and answers; each node offers ``--slots`` sandbox slots. Throughput is units per
second over ``--rounds`` units per slot (so 1, 2, 4 nodes get 1x, 2x, 4x the units: the
ratio is the executor's scaling, not the CPU's). The overhead is measured with a zero
latency model, one unit at a time, local executor and ray executor alternately.

Usage: PYTHONPATH=. .venv/bin/python scripts/bench/ray_scaling.py [--latency 4] [--slots 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from daemon.cluster.ray_executor import open_ray_executor  # noqa: E402
from daemon.config.settings import ExecutorSettings  # noqa: E402
from daemon.evaluation.executor import Executor, LocalExecutor, RayUnits  # noqa: E402
from daemon.gateway.session import NoSuchTool  # noqa: E402
from daemon.providers.base import ChatRequest, ChatResponse, Message, Usage  # noqa: E402
from daemon.tasks import Task  # noqa: E402
from sandbox.engine import DockerEngine  # noqa: E402
from sandbox.image import ensure_image  # noqa: E402
from sandbox.labels import instance_labels  # noqa: E402
from sandbox.limits import Limits  # noqa: E402
from sandbox.rundir import runs_root  # noqa: E402
from tests.cluster.ray_cluster import local_cluster  # noqa: E402

HARNESS = """
def solve(task, ctx):
    reply = ctx.model.chat(task["prompt"], max_tokens=8)
    return {"output": reply["content"], "claimed_success": True}
"""
LIMITS = Limits(memory_mb=128, cpus=0.5, pids=32, tmpfs_mb=8, wall_s=120.0, output_kb=64)


class FixedLatency:
    """A model that answers after ``latency`` seconds, whatever it is asked."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def chat(self, request: ChatRequest) -> ChatResponse:
        await anyio.sleep(self.latency)
        usage = Usage(prompt_tokens=10, completion_tokens=1)
        return ChatResponse(content="ok", usage=usage, model="fixed-latency")

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        raise NoSuchTool(name)

    async def tokens_left(self) -> int:
        return 1_000_000

    async def next_turn(self) -> dict[str, Any]:
        return {"done": True}  # single-turn units only

    async def restart(self) -> None:
        return None  # no host-side state


def task(n: int) -> Task:
    prompt = [Message(role="user", content=f"unit {n}")]
    return Task(id=f"u{n}", suite="bench", kind="answer", prompt=prompt)


async def run_units(
    executor: Executor, image: str, harness: Path, units: int, parallel: int, latency: float
) -> float:
    """Wall seconds for ``units`` units, ``parallel`` at a time; every one must succeed."""
    limiter = anyio.CapacityLimiter(parallel)
    labels = instance_labels("bench-ray")
    failures: list[str] = []

    async def one(n: int) -> None:
        async with limiter:
            run = await executor.run(
                image=image,
                harness_dir=harness,
                task=task(n),
                handler=FixedLatency(latency),
                limits=LIMITS,
                labels=labels,
            )
        if run.error is not None:
            failures.append(f"{run.error}: {run.outcome.output[-300:]}")

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for n in range(units):
            tg.start_soon(one, n)
    if failures:
        raise SystemExit(f"{len(failures)} unit(s) failed: {failures[0]}")
    return time.monotonic() - started


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    harness = work / "harness"
    harness.mkdir()
    (harness / "harness.py").write_text(HARNESS)
    async with DockerEngine.connected() as engine:
        image = await ensure_image(engine, log=print)
        local = LocalExecutor(engine, runs_root("bench-ray"))
        results: dict[str, Any] = {"latency_s": args.latency, "slots_per_node": args.slots}
        with local_cluster(workers=1, capacity=args.slots) as cluster:
            settings = ExecutorSettings(type="ray", address=cluster.address)
            for nodes in (1, 2, 4):
                while len(cluster.workers()) < nodes:
                    cluster.add_worker(args.slots, cpus=1)
                cluster.wait_capacity(nodes * args.slots)
                async with open_ray_executor(settings, work / "cluster", _quiet) as ray_ex:
                    ray = RayUnits(ray_ex)
                    await run_units(ray, image, harness, nodes * args.slots, 99, 0.0)  # warm
                    if nodes == 1:
                        results["overhead"] = await overhead(local, ray, image, harness, args)
                    slots = nodes * args.slots
                    units = slots * args.rounds
                    wall = await run_units(ray, image, harness, units, slots, args.latency)
                    results[f"nodes_{nodes}"] = {
                        "units": units,
                        "wall_s": round(wall, 2),
                        "units_per_s": round(units / wall, 3),
                    }
                    print(json.dumps({f"nodes_{nodes}": results[f"nodes_{nodes}"]}), flush=True)
    base = results["nodes_1"]["units_per_s"]
    for nodes in (2, 4):
        point = results[f"nodes_{nodes}"]
        point["speedup"] = round(point["units_per_s"] / base, 2)
        point["scaling_efficiency"] = round(point["speedup"] / nodes, 2)
    results["machine"] = machine()
    return results


async def overhead(
    local: LocalExecutor, ray: RayUnits, image: str, harness: Path, args: argparse.Namespace
) -> dict[str, float]:
    """Median wall seconds of one zero-latency unit, alternating local and ray."""
    times: dict[str, list[float]] = {"local": [], "ray": []}
    for _ in range(args.overhead_units):
        for name, executor in (("local", local), ("ray", ray)):
            times[name].append(await run_units(executor, image, harness, 1, 1, 0.0))
    local_s, ray_s = statistics.median(times["local"]), statistics.median(times["ray"])
    return {
        "local_unit_s": round(local_s, 3),
        "ray_unit_s": round(ray_s, 3),
        "ray_overhead_s": round(ray_s - local_s, 3),
        "units_each": args.overhead_units,
    }


async def _quiet(kind: str, message: str, **data: Any) -> None:
    print(f"[{kind}] {message}", file=sys.stderr)


def machine() -> dict[str, Any]:
    import os

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_avg_1m": round(os.getloadavg()[0], 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latency", type=float, default=4.0, help="seconds per model call")
    p.add_argument("--slots", type=int, default=1, help="sandbox slots per worker node")
    p.add_argument("--rounds", type=int, default=3, help="units per slot per measurement")
    p.add_argument("--overhead-units", type=int, default=5)
    args = p.parse_args()
    print(json.dumps(anyio.run(bench, args), indent=2))


if __name__ == "__main__":
    main()
