"""Run a Python program in its own fresh, hardened container with no gateway socket.

Used for ground-truth checks that execute code (e.g. HumanEval's hidden tests): the program
sees only itself, read-only at ``/code/main.py``; no harness, no socket, no network.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from sandbox.container import BASE_ENV, ReadOnlyMount, Reason, RunSpec, run_container
from sandbox.engine import DockerEngine
from sandbox.labels import ROLE
from sandbox.limits import Limits

CODE_MOUNT = "/code"
TEMP_PREFIX = "harnessd-code-"


@dataclass(frozen=True)
class CodeRunResult:
    """``reason`` is timeout/oom/output_limit, or None when the program ran to its end."""

    exit_code: int | None
    output: str
    reason: Reason | None


def _write_program(source: str, parent: Path | None) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=parent))
    program = folder / "main.py"
    program.write_text(source, encoding="utf-8")
    program.chmod(0o644)
    folder.chmod(0o755)  # the container's uid 65534 must read it
    return folder


@asynccontextmanager
async def program_dir(source: str, parent: Path | None = None) -> AsyncIterator[Path]:
    """A temporary folder holding ``main.py``; removed afterwards, cancellation included."""
    with anyio.CancelScope(shield=True):
        folder = await anyio.to_thread.run_sync(_write_program, source, parent)
    try:
        yield folder
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shutil.rmtree, folder, True)


async def run_python(
    engine: DockerEngine,
    image: str,
    source: str,
    *,
    limits: Limits,
    labels: Mapping[str, str],
    temp_parent: Path | None = None,
) -> CodeRunResult:
    """Run ``source`` as ``python3 /code/main.py`` under ``limits``; never raises for the
    program's own failures (non-zero exit, timeout, OOM, output flood)."""
    async with program_dir(source, temp_parent) as folder:
        spec = RunSpec(
            image=image,
            command=["python3", "-I", "-B", "-u", f"{CODE_MOUNT}/main.py"],
            labels={**labels, ROLE: "code"},
            limits=limits,
            mounts=(ReadOnlyMount(folder, CODE_MOUNT),),
            env=dict(BASE_ENV),
        )
        outcome = await run_container(engine, spec)
    return CodeRunResult(exit_code=outcome.exit_code, output=outcome.output, reason=outcome.reason)
