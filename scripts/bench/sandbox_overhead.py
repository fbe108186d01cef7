#!/usr/bin/env python3
"""Per-task sandbox overhead: fresh container per task vs warm container + exec per task.

Measured side by side in one run, interleaved round-robin so machine noise hits every
variant alike, against a bare ``python3 -c pass`` process on the host:

* ``host``: ``python3 -c pass`` as a host subprocess (the floor).
* ``fresh``: ``run_container`` with the full hardening running ``python3 -c pass``
  (create, attach, start, wait, inspect, remove).
* ``warm``: one hardened container kept alive; per task one ``exec`` of ``python3 -c pass``
  plus the cleanup exec a warm container needs so no state leaks to the next task (kill
  leftover processes, empty /tmp and /work).
* ``warm_bare``: the exec alone, without that cleanup (leaks state; shown as the floor of
  the warm design).
* ``run_task``: the whole path a real task takes (per-run dir, gateway socket, guest
  runtime, a one-line harness), fresh container.

Usage: .venv/bin/python scripts/bench/sandbox_overhead.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from daemon.evaluation.taskrun import run_task
from daemon.providers.base import ChatRequest, ChatResponse, Message, Usage
from daemon.tasks import Task
from sandbox.container import BASE_ENV, RunSpec, created_container, run_container
from sandbox.engine import DockerEngine
from sandbox.image import ensure_image
from sandbox.labels import instance_labels
from sandbox.limits import Limits

LIMITS = Limits(wall_s=60)
LABELS = instance_labels("bench-sandbox")
# Kills everything but PID 1 (init), the keeper process and itself, then empties the tmpfs.
WARM_CLEANUP = """
import os, shutil, signal
me = os.getpid()
for name in os.listdir('/proc'):
    if name.isdigit() and int(name) not in (1, me):
        try:
            with open(f'/proc/{name}/stat') as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            if ppid != 1:
                os.kill(int(name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
for root in ('/tmp', '/work'):
    for entry in os.listdir(root):
        path = os.path.join(root, entry)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
"""


class NoModel:
    async def chat(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(
            content="", usage=Usage(prompt_tokens=0, completion_tokens=0), model="none"
        )

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        return None

    async def tokens_left(self) -> int:
        return 0

    async def next_turn(self) -> dict[str, Any]:
        return {"done": True}  # single-turn units only

    async def restart(self) -> None:
        return None  # no host-side state


async def real_python3() -> str:
    """The interpreter ``python3`` runs, not a launcher shim (pyenv's adds ~50 ms)."""
    found = await anyio.run_process(["python3", "-c", "import sys; print(sys.executable)"])
    return found.stdout.decode().strip()


async def timed(fn: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def bench(rounds: int) -> dict[str, list[float]]:
    async with DockerEngine.connected() as engine:
        image = await ensure_image(engine, log=print)
        python3 = await real_python3()
        print(f"host interpreter: {python3}")
        work = Path(tempfile.mkdtemp(prefix="hd-bench-"))
        harness = work / "harness"
        harness.mkdir()
        (harness / "harness.py").write_text(
            "def solve(task, ctx):\n    return {'output': 'ok', 'claimed_success': True}\n"
        )
        task = Task(
            id="bench", suite="bench", kind="answer", prompt=[Message(role="user", content="x")]
        )
        keeper = RunSpec(image=image, command=["sleep", "infinity"], labels=LABELS, limits=LIMITS)
        results: dict[str, list[float]] = {}
        try:
            async with created_container(engine, keeper) as warm_id:
                await engine.call("start", engine.api.start, warm_id)

                async def host() -> None:
                    await anyio.run_process([python3, "-c", "pass"])

                async def fresh() -> None:
                    spec = RunSpec(
                        image=image, command=["python3", "-c", "pass"], labels=LABELS, limits=LIMITS
                    )
                    outcome = await run_container(engine, spec)
                    assert outcome.exit_code == 0, outcome

                async def exec_once(command: list[str]) -> None:
                    exec_id = await engine.call(
                        "exec_create",
                        engine.api.exec_create,
                        warm_id,
                        command,
                        user="65534:65534",
                        environment=dict(BASE_ENV),
                        workdir="/work",
                    )
                    await anyio.to_thread.run_sync(engine.api.exec_start, exec_id["Id"])
                    info = await engine.call("exec_inspect", engine.api.exec_inspect, exec_id["Id"])
                    assert info["ExitCode"] == 0, info

                async def warm() -> None:
                    await exec_once(["python3", "-c", "pass"])
                    await exec_once(["python3", "-c", WARM_CLEANUP])

                async def warm_bare() -> None:
                    await exec_once(["python3", "-c", "pass"])

                async def whole_task() -> None:
                    run = await run_task(
                        engine,
                        image=image,
                        harness_dir=harness,
                        task=task,
                        handler=NoModel(),
                        limits=LIMITS,
                        runs_dir=work / "runs",
                        labels=LABELS,
                    )
                    assert run.error is None, run

                variants = {
                    "host": host,
                    "fresh": fresh,
                    "warm": warm,
                    "warm_bare": warm_bare,
                    "run_task": whole_task,
                }
                results.update({name: [] for name in variants})
                for fn in variants.values():  # warm-up: page cache, first-exec costs
                    await fn()
                for _ in range(rounds):
                    for name, fn in variants.items():
                        results[name].append(await timed(fn))
        finally:
            shutil.rmtree(work, ignore_errors=True)
            await engine.reap(LABELS["harnessd.instance"])
    return results


def report(results: dict[str, list[float]]) -> None:
    host = statistics.median(results["host"])
    print(f"{'variant':<10} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} {'over host ms':>13}")
    for name, samples in results.items():
        ordered = sorted(samples)
        median = statistics.median(ordered)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(
            f"{name:<10} {median * 1000:>10.1f} {p90 * 1000:>8.1f} {ordered[0] * 1000:>8.1f} "
            f"{(median - host) * 1000:>13.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    report(anyio.run(bench, args.rounds))


if __name__ == "__main__":
    main()
