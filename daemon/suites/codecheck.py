"""The real CodeChecker: each check in two fresh hardened containers (sandbox.codecheck)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from daemon.errors import SandboxError
from daemon.suites.base import CheckVerdict, CodeCheck
from sandbox.codecheck.host import run_check
from sandbox.engine import DockerEngine
from sandbox.errors import SandboxFailure
from sandbox.limits import Limits


class DockerCodeChecker:
    """Runs code checks with the sandbox's limits (per container; the wall clock is each
    check's own time limit plus start-up grace)."""

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

    async def check_code(self, check: CodeCheck) -> CheckVerdict:
        try:
            return await run_check(
                self._engine,
                self._image,
                check,
                limits=self._limits,
                labels=self._labels,
                parent=self._temp_parent,
            )
        except SandboxFailure as exc:
            raise SandboxError(str(exc)) from None
