"""The real CodeRunner: each program in its own fresh hardened container (sandbox.coderun)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from daemon.suites.base import CodeRun
from sandbox.coderun import run_python
from sandbox.engine import DockerEngine
from sandbox.limits import Limits


class DockerCodeRunner:
    """Runs hidden-test programs with the sandbox's limits; ``timeout_s`` is the wall clock."""

    def __init__(
        self,
        engine: DockerEngine,
        image: str,
        limits: Limits,
        labels: Mapping[str, str],
        *,
        temp_parent: Path | None = None,
    ) -> None:
        self._engine = engine
        self._image = image
        self._limits = limits
        self._labels = dict(labels)
        self._temp_parent = temp_parent

    async def run_python(self, source: str, *, timeout_s: float) -> CodeRun:
        limits = dataclasses.replace(self._limits, wall_s=timeout_s)
        result = await run_python(
            self._engine,
            self._image,
            source,
            limits=limits,
            labels=self._labels,
            temp_parent=self._temp_parent,
        )
        return CodeRun(exit_code=result.exit_code, output=result.output, reason=result.reason)
