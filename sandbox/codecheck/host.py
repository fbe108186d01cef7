"""Run one code check: the two containers, their clocks, the verdict, the clean-up.

Both containers are created together and started together (the candidate side retries
its connect until the trusted side listens, which saves a start-up round trip over
waiting for the socket from the host). The host enforces a wall clock on each, reads the
verdict from the trusted container's output alone (a JSON line carrying this check's
one-time token), and ignores the candidate's exit code and output entirely. Whatever
happens (pass, failure, engine error, timeout, cancellation), both containers and the
check directory are gone when :func:`run_check` returns or raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from sandbox.codecheck import boundary
from sandbox.codecheck.checkdir import check_dir
from sandbox.codecheck.spec import CheckVerdict, CodeCheck
from sandbox.container import (
    BASE_ENV,
    ContainerOutcome,
    ReadOnlyMount,
    RunSpec,
    created_container,
    supervise,
)
from sandbox.engine import DockerEngine
from sandbox.errors import SandboxFailure
from sandbox.labels import ROLE
from sandbox.limits import Limits

# Beyond the check's own deadline (which the trusted side enforces and reports, counted from
# the candidate's connection), how long both containers get to start and connect, and the
# trusted side to print its verdict afterwards.
CONNECT_S = 30.0
GRACE_S = 10.0
# After the trusted side reports a crashed candidate, how long to wait for the engine's
# account of why (out of memory, output limit) to add to the detail.
_CAUSE_S = 2.0
_MODULE = f"{boundary.CODE_DIR}/sandbox/codecheck"


def _spec(
    image: str, labels: Mapping[str, str], limits: Limits, side: str, code: Path, sockets: Path
) -> RunSpec:
    """One side's container: its own code folder at /code (read-only) and the socket
    folder, which only the trusted side may write (to create the socket in)."""
    trusted = side == "trusted"
    return RunSpec(
        image=image,
        command=["python3", "-I", "-B", "-u", f"{_MODULE}/{side}.py"],
        labels={**labels, ROLE: f"check-{side}"},
        limits=limits,
        mounts=(ReadOnlyMount(code, boundary.CODE_DIR),),
        socket_dir=sockets,
        socket_writable=trusted,
        uid=boundary.TRUSTED_UID if trusted else boundary.CANDIDATE_UID,
        env=dict(BASE_ENV),
    )


def _data(check: CodeCheck, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    trusted = {
        "token": token,
        "source": check.checker_source,
        "checker": check.checker,
        "entry_point": check.function,
        "timeout_s": check.timeout_s,
        "call_timeout_s": check.call_timeout_s or check.timeout_s,
        "connect_s": CONNECT_S,
    }
    candidate = {"source": check.program, "functions": [check.function], "connect_s": CONNECT_S}
    return trusted, candidate


def verdict_from(output: str, token: str) -> dict[str, Any] | None:
    """The one verdict line with this token in the trusted side's output, or None (also
    when there are several: only the driver prints one, so two mean something is wrong)."""
    found: list[dict[str, Any]] = []
    for line in output.splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict) and parsed.get("harnessd_check") == token:
            found.append(parsed)
    return found[0] if len(found) == 1 else None


def _checked(raw: dict[str, Any] | None, trusted: ContainerOutcome) -> CheckVerdict:
    if raw is None:
        why = trusted.reason or f"exit code {trusted.exit_code}"
        return CheckVerdict(False, "no_verdict", f"the trusted side gave no verdict ({why})")
    kind, detail, calls = raw.get("kind"), raw.get("detail"), raw.get("calls")
    if not isinstance(detail, str) or not isinstance(calls, int) or kind not in _KINDS:
        return CheckVerdict(False, "no_verdict", "the trusted side's verdict is malformed")
    return CheckVerdict(raw.get("passed") is True and kind == "passed", kind, detail, calls)


_KINDS = ("passed", "failed", "error", "refused", "timeout", "crashed", "internal")


class _Pair:
    """The two started containers: the trusted one's ending decides, the other is stopped.

    An engine failure on either side ends both at once and is raised as itself (it is the
    machinery's fault, never the candidate's).
    """

    def __init__(self, engine: DockerEngine, limits: Limits, token: str) -> None:
        self.engine = engine
        self.limits = limits
        self.token = token
        self.candidate: ContainerOutcome | None = None
        self.failure: SandboxFailure | None = None

    async def _supervise(self, container_id: str, scope: anyio.CancelScope) -> ContainerOutcome:
        try:
            return await supervise(self.engine, container_id, self.limits)
        except SandboxFailure as exc:
            self.failure = self.failure or exc
            scope.cancel()
            raise

    async def run(self, trusted_id: str, candidate_id: str) -> CheckVerdict:
        verdict: CheckVerdict | None = None
        candidate_done = anyio.Event()
        async with anyio.create_task_group() as group:

            async def candidate() -> None:
                with contextlib.suppress(SandboxFailure):
                    self.candidate = await self._supervise(candidate_id, group.cancel_scope)
                candidate_done.set()

            async def trusted() -> None:
                nonlocal verdict
                with contextlib.suppress(SandboxFailure):
                    ending = await self._supervise(trusted_id, group.cancel_scope)
                    verdict = _checked(verdict_from(ending.output, self.token), ending)
                    if verdict.kind == "crashed":
                        with anyio.move_on_after(_CAUSE_S):
                            await candidate_done.wait()  # for the engine's account of why
                group.cancel_scope.cancel()  # the candidate has nothing left to answer

            group.start_soon(candidate)
            group.start_soon(trusted)
        if self.failure is not None:
            raise self.failure
        assert verdict is not None
        cause = self.candidate.reason if self.candidate is not None else None
        if verdict.kind == "crashed" and cause:
            verdict = dataclasses.replace(verdict, detail=f"{verdict.detail} ({cause})")
        return verdict


class _Containers:
    """Both containers at once: created together, removed together (tens of ms each), each
    by its own ``created_container`` (so removal is shielded and certain), each held open by
    a task until :meth:`release`."""

    def __init__(self, engine: DockerEngine) -> None:
        self.engine = engine
        self.ids: dict[str, str] = {}
        self.failures: list[SandboxFailure] = []
        self.settled = anyio.Event()  # both created, or one failed
        self._released = anyio.Event()

    async def hold(self, side: str, spec: RunSpec) -> None:
        try:
            async with created_container(self.engine, spec) as container_id:
                self.ids[side] = container_id
                if len(self.ids) == 2:
                    self.settled.set()
                await self._released.wait()
        except SandboxFailure as exc:
            self.failures.append(exc)  # raised by run_check, as itself
            self.settled.set()

    def release(self) -> None:
        self._released.set()


async def run_check(
    engine: DockerEngine,
    image: str,
    check: CodeCheck,
    *,
    limits: Limits,
    labels: Mapping[str, str],
    parent: Path | None = None,
) -> CheckVerdict:
    """Run ``check`` under ``limits`` (per container; the wall clock is the check's own
    ``timeout_s`` plus start-up and connection allowances). Raises SandboxFailure only when
    the machinery failed; everything the candidate does is a verdict."""
    token = secrets.token_hex(16)
    started = time.monotonic()
    clock = dataclasses.replace(limits, wall_s=CONNECT_S + check.timeout_s + GRACE_S)
    trusted_data, candidate_data = _data(check, token)
    async with check_dir(parent, trusted_data, candidate_data) as folder:
        trusted_spec = _spec(image, labels, clock, "trusted", folder.trusted, folder.socket)
        candidate_spec = _spec(image, labels, clock, "candidate", folder.candidate, folder.socket)
        containers = _Containers(engine)
        verdict: CheckVerdict | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(containers.hold, "trusted", trusted_spec)
            group.start_soon(containers.hold, "candidate", candidate_spec)
            try:
                await containers.settled.wait()
                if not containers.failures:
                    pair = _Pair(engine, clock, token)
                    ids = containers.ids
                    verdict = await pair.run(ids["trusted"], ids["candidate"])
            except SandboxFailure as exc:
                containers.failures.append(exc)
            finally:
                containers.release()
    if containers.failures:
        raise containers.failures[0]
    assert verdict is not None
    return dataclasses.replace(verdict, wall_s=round(time.monotonic() - started, 3))
