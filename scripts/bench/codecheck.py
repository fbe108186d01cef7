#!/usr/bin/env python3
"""Time per HumanEval check: the code-check boundary against the single container it replaced.

Measured side by side in one run, interleaved (the order alternating per problem) so machine
noise hits both alike, on the canonical solutions of the first N problems, one check at a
time:

* ``single``: what the check used to cost: one fresh hardened container running prompt,
  completion, hidden tests and ``check(entry_point)`` as one program (``run_container``).
* ``boundary``: ``HumanEvalSuite.check`` through ``DockerCodeChecker``: two containers
  (trusted side and candidate side), the socket, the proxy, the verdict.

Usage: .venv/bin/python scripts/bench/codecheck.py [--problems 20]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time
from pathlib import Path

import anyio

from daemon.config.settings import DEFAULT_STATE_DIR, PROJECT_ROOT
from daemon.suites import load_suite
from daemon.suites.codecheck import DockerCodeChecker
from daemon.suites.humaneval import HumanEvalSuite, candidate_program
from sandbox.container import RunSpec, run_container
from sandbox.engine import DockerEngine
from sandbox.image import ensure_image
from sandbox.labels import instance_labels
from sandbox.limits import Limits

LIMITS = Limits(wall_s=60)


async def main(problems: int) -> None:
    suite = load_suite("humaneval", PROJECT_ROOT / DEFAULT_STATE_DIR / "cache")
    assert isinstance(suite, HumanEvalSuite)
    labels = instance_labels("bench-codecheck-" + secrets.token_hex(3))
    times: dict[str, list[float]] = {"single": [], "boundary": []}
    async with DockerEngine.connected() as engine:
        image = await ensure_image(engine, log=print)
        checker = DockerCodeChecker(engine, image, LIMITS, labels, temp_parent=Path("/tmp"))

        async def single(task_id: str) -> None:
            problem = suite._problem(task_id)
            program = candidate_program(problem, problem.canonical_solution)
            program += f"\n{problem.test}\ncheck({problem.entry_point})\n"
            command = ["python3", "-I", "-B", "-c", program]
            outcome = await run_container(engine, RunSpec(image, command, labels, LIMITS))
            assert outcome.exit_code == 0, (task_id, outcome.output)

        async def boundary(task_id: str) -> None:
            result = await suite.check(task_id, suite.expected(task_id), checker)
            assert result.passed, (task_id, result.detail)

        variants = {"single": single, "boundary": boundary}
        for n, task_id in enumerate(suite.task_ids()[:problems]):
            order = list(variants) if n % 2 == 0 else list(reversed(variants))
            for name in order:
                started = time.monotonic()
                await variants[name](task_id)
                times[name].append(time.monotonic() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        print(f"{name:9s} median {median * 1000:6.0f} ms over {len(times[name])} problems")
    print(f"ratio     {medians['boundary'] / medians['single']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=20)
    anyio.run(main, parser.parse_args().problems)
