"""Run one harness on one task in a fresh sandbox container, and say how it ended.

A fresh container per task, not a warm one per batch: ``scripts/bench/sandbox_overhead.py``
measured (2 cores, busy machine, medians over a bare host ``python3 -c pass``) +114 ms for a fresh
container against +93 ms for a warm exec plus the clean-up a warm container needs so no
state leaks (+24 ms without it). ~20 ms per task is noise next to a task's model calls, and
a fresh container cannot carry processes, files or memory from one task to the next.
Each run gets its own directory holding its gateway socket; both are gone afterwards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import anyio

import sandbox
from daemon.errors import SandboxError
from daemon.gateway.session import GatewayHandler, GatewayRecord, serve_gateway
from daemon.tasks import Submission, Task, TaskError
from sandbox.container import ContainerOutcome, run_container
from sandbox.engine import DockerEngine
from sandbox.errors import SandboxFailure
from sandbox.limits import Limits
from sandbox.remote import SOCKET_NAME, GuestLaunch, guest_spec
from sandbox.rundir import copy_tree, run_dir

GUEST_DIR = Path(sandbox.__file__).resolve().parent / "guest"
GUEST_MOUNT = "/opt/harnessd"
GUEST = GuestLaunch(("python3", "-I", "-B", "-u", f"{GUEST_MOUNT}/harnessd_guest.py"), GUEST_MOUNT)


@dataclass(frozen=True)
class TaskRun:
    """``error`` is None only for a clean run: exit 0 and a submission without ``error``.

    When ``error`` is set, ``submission`` (if any) is kept for diagnosis, not for scoring.
    """

    task_id: str
    submission: Submission | None
    error: TaskError | None
    outcome: ContainerOutcome
    gateway: GatewayRecord
    wall_s: float
    requeues: int = 0  # times a cluster lost the unit and ran it again (at most once)


def classify(record: GatewayRecord, outcome: ContainerOutcome) -> TaskError | None:
    """Why the run failed, by precedence: tamper > budget > timeout > oom > output_limit >
    protocol > crash; None when it ended cleanly."""
    submission = record.submission
    if record.forged_submit or (submission is not None and submission.tamper):
        return "tamper"
    if record.budget_refused:
        return "budget"
    if outcome.reason is not None:
        return outcome.reason
    if submission is not None and (submission.error or "").startswith("MemoryError"):
        return "oom"  # the allocation failed before the kernel had to kill anything
    if record.protocol_violation:
        return "protocol"
    if outcome.exit_code != 0 or submission is None or submission.error is not None:
        return "crash"
    return None


def _stage_files(harness_dir: Path, folder: Path) -> None:
    copy_tree(harness_dir, folder / "h")
    copy_tree(GUEST_DIR, folder / "g")
    (folder / "s").mkdir(mode=0o755)


async def run_task(
    engine: DockerEngine,
    *,
    image: str,
    harness_dir: Path,
    task: Task,
    handler: GatewayHandler,
    limits: Limits,
    runs_dir: Path,
    labels: dict[str, str],
) -> TaskRun:
    """Run ``harness_dir`` on ``task``; harness failures are results, not exceptions.

    Raises ``SandboxError`` only when the sandbox itself cannot run (engine, image, mounts).
    """
    harness_dir = harness_dir.resolve()
    if not harness_dir.is_dir():
        raise SandboxError(f"harness directory {harness_dir} does not exist")
    started = time.monotonic()
    async with run_dir(runs_dir) as folder:
        # Copies, so every mount source is <runs root>/run-<random>/...: the container
        # cannot tell a version from a candidate, nor learn any host path, by its mounts.
        await anyio.to_thread.run_sync(_stage_files, harness_dir, folder)
        async with serve_gateway(folder / "s" / SOCKET_NAME, task, handler) as record:
            spec = guest_spec(folder, image, GUEST, labels, limits)
            try:
                outcome = await run_container(engine, spec)
            except SandboxFailure as exc:
                raise SandboxError(str(exc)) from exc
    return TaskRun(
        task_id=task.id,
        submission=record.submission,
        error=classify(record, outcome),
        outcome=outcome,
        gateway=record,
        wall_s=time.monotonic() - started,
    )
