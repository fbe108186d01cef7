"""The wiring every evaluation needs: engine, image, models, suite, budgets, event sink.

Both ``harnessd serve`` and the standalone ``harnessd eval`` open one :class:`Runtime`;
it owns the Docker connection and the providers, and reaps what an earlier crash left
behind (containers labelled with this state dir's instance id, per-run directories). Its
:class:`~daemon.evaluation.health.Health` knows how to probe the engine and each model and
what to do when the engine returns (reap what the lost engine left, check the image).

The live policy can change at any time (a reload). Whatever must hold one policy from start
to end takes a :class:`PolicySnapshot` (a candidate, from its proposal to its verdict) or
passes one :class:`~daemon.config.policy.Policy` down (one evaluation: its suite, sandbox
limits, concurrency and per-task/per-evaluation token budgets). Every method here that
measures, limits or loads by a policy takes it as a required argument, so no caller can
fall back on the live policy by forgetting one: a caller outside a candidate (the live
harness, ``harnessd eval``, status) reads the policy in force once and passes it. The policy's
suite is the one with counterfactual held-out copies when ``[suite] counterfactual`` is on.
Loading a suite can read a data wheel: async code awaits :meth:`Runtime.load_suite` and
:meth:`Runtime.load_splits`, which do it in a worker thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from daemon.config.policy import BudgetPolicy, Policy
from daemon.config.reload import PolicyHolder
from daemon.config.settings import LoadedSettings
from daemon.config.statedir import split_secret
from daemon.errors import SandboxError, SetupError
from daemon.evaluation.executor import Executor, ExecutorType, LocalExecutor, open_executor
from daemon.evaluation.health import CLUSTER, ENGINE, Health
from daemon.events import Emit
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.gateway.metering import CallObserver, MeteredModel
from daemon.providers import make_provider
from daemon.providers.base import Provider
from daemon.store import Store
from daemon.suites import evaluated_suite, load_suite, policy_splits, split
from daemon.suites.base import Suite
from daemon.suites.codecheck import DockerCodeChecker
from daemon.suites.splits import Splits
from daemon.tasks import Task
from sandbox.engine import DockerEngine
from sandbox.errors import SandboxFailure
from sandbox.image import Route, ensure_image, image_tag
from sandbox.labels import instance_labels, owner_gone
from sandbox.limits import Limits
from sandbox.rundir import ROOT_PREFIX, remove_orphan_run_dirs, runs_root

log = logging.getLogger("harnessd.runtime")


async def _log_only(
    kind: str, message: str, *, level: str = "info", persist: bool = True, **data: Any
) -> None:
    if persist:
        log.log(logging.getLevelName(level.upper()), message, extra={"event": kind})


@dataclass(frozen=True)
class PolicySnapshot:
    """One policy, read once, for everything from a candidate's first stage to its verdict.

    ``sha256`` is the hash of the validated policy's canonical JSON, so it names what the
    policy says (two files that differ only in comments or order hash the same), and
    ``path`` the file it was loaded from."""

    policy: Policy
    path: Path
    sha256: str


def policy_sha256(policy: Policy) -> str:
    return hashlib.sha256(policy.model_dump_json().encode("utf-8")).hexdigest()


@dataclass
class Runtime:
    loaded: LoadedSettings
    policy: PolicyHolder
    store: Store
    engine: DockerEngine
    image: str
    instance: str
    emit: Emit = _log_only
    guard: BudgetGuard = field(init=False)
    split_secret: str = field(init=False)
    health: Health = field(init=False)
    local: LocalExecutor = field(init=False)  # live requests and the local executor
    executor: Executor = field(init=False)  # where evaluations run their units
    _models: dict[str, MeteredModel] = field(default_factory=dict)
    # Evaluations under way: run id -> {"label", "done", "total"} (for status).
    progress: dict[str, dict[str, Any]] = field(default_factory=dict)
    _providers: list[Provider] = field(default_factory=list)
    # Evaluations under way: run id -> the token budgets of the policy it runs under.
    _run_budgets: dict[str, BudgetPolicy] = field(default_factory=dict)
    # Told of every answered model call (the daemon's metrics), whenever it is set.
    on_model_call: CallObserver | None = None
    # The most recent free-text and chat requests the live harness served, newest first, at
    # most the number asked (blocking: a store read). Set by the daemon, which owns both
    # the live harness and the loop; none without one (``harnessd eval``, tests).
    recorded_requests: Callable[[int], list[Task]] = field(default=lambda limit: [])

    def __post_init__(self) -> None:
        self.guard = BudgetGuard(
            self.store, lambda: self.policy.get().budget, run_budget=self._run_budgets.get
        )
        self.split_secret = split_secret(self.loaded.state_dir)
        self.health = Health(self.emit, self._probe, self._recover)
        self.local = LocalExecutor(self.engine, self.runs_dir)
        self.executor = self.local

    async def _probe(self, dependency: str) -> None:
        if dependency == ENGINE:
            await self.engine.ping()
        elif dependency == CLUSTER:
            await self.executor.probe()
        else:
            await (await self.model(dependency)).probe()

    async def _recover(self, dependency: str) -> None:
        """The engine is back: what ran on the lost one is gone or dead; remove it, and
        make sure the image survived (an engine reinstalled from scratch has none)."""
        if dependency != ENGINE:
            return
        reaped = await _reap(self.engine, self.instance)
        if reaped:
            await self.emit(
                "sandbox.reaped",
                f"removed {reaped} container(s) the lost Docker engine left behind",
                containers=reaped,
                run_dirs=0,
            )
        if not await self.engine.image_exists(self.image):
            self.image = await resolve_image(self.engine, self.loaded, self.emit)

    def _model_call(self, charge: Charge, seconds: float) -> None:
        if self.on_model_call is not None:
            self.on_model_call(charge, seconds)

    def calls_in_flight(self) -> dict[str, dict[str, int]]:
        """Model calls under way right now, per model string, with what they spent so far."""
        found = {ref: m.under_way() for ref, m in list(self._models.items())}
        return {
            ref: {"calls": calls, "tokens_so_far": tokens}
            for ref, (calls, tokens) in found.items()
            if calls
        }

    @property
    def runs_dir(self) -> Path:
        return runs_root(self.instance)

    @property
    def work_dir(self) -> Path:
        """Scratch trees of candidates under evaluation (host side, never mounted rw)."""
        return self.loaded.state_dir / "work"

    def snapshot(self) -> PolicySnapshot:
        """The policy in force now, to be used from here to a verdict."""
        policy = self.policy.get()
        return PolicySnapshot(policy, self.policy.path, policy_sha256(policy))

    @contextmanager
    def run_budget(self, run_id: str, budget: BudgetPolicy) -> Iterator[None]:
        """Hold the calls of evaluation ``run_id`` to ``budget``'s per-task and
        per-evaluation limits while it runs, whatever the live policy says meanwhile (the
        daemon-wide hour and day windows stay the live policy's: they cap the daemon's
        spending, not one measurement)."""
        self._run_budgets[run_id] = budget
        try:
            yield
        finally:
            self._run_budgets.pop(run_id, None)

    def limits(self, policy: Policy) -> Limits:
        """The sandbox limits of ``policy``."""
        s = policy.sandbox
        return Limits(
            memory_mb=s.memory_mb,
            cpus=s.cpus,
            pids=s.pids,
            tmpfs_mb=s.tmpfs_mb,
            wall_s=s.wall_s,
            output_kb=s.output_kb,
        )

    def labels(self, **extra: str) -> dict[str, str]:
        return instance_labels(self.instance, **extra)

    async def model(self, ref: str) -> MeteredModel:
        """The metered model for ``ref``, created once per runtime (in a worker thread:
        making a provider may import an SDK, read a key file or a model file's header)."""
        model = self._models.get(ref)
        if model is None:
            retry = self.policy.get().retry
            provider = await anyio.to_thread.run_sync(make_provider, ref, self.loaded, retry)
            model = self._models.get(ref)  # another task may have made it meanwhile
            if model is not None:
                await provider.aclose()
                return model
            self._providers.append(provider)
            model = self._models[ref] = MeteredModel(
                provider, self.store, self.guard, self._model_call
            )
        return model

    def named_suite(self, spec: str) -> Suite:
        """The suite ``spec`` names (``bfcl:simple``, ``file:PATH``), whatever the policy
        says. Blocking the first time a suite is used, like :meth:`suite`."""
        return load_suite(spec, self.loaded.cache_dir)

    def suite(self, spec: str | None = None, *, policy: Policy) -> Suite:
        """The suite named by ``spec``, or ``policy``'s (both of them, when it mixes two).
        Blocking the first time a suite is used (it may read a data wheel; suites are then
        kept per process): from a worker thread, or await :meth:`load_suite`."""
        if spec:
            return self.named_suite(spec)
        p = policy.suite
        return evaluated_suite(p, self.loaded.cache_dir, p.split_seed or self.split_secret)

    def splits(self, spec: str | None = None, *, policy: Policy) -> Splits:
        """``policy``'s splits, or those of the suite ``spec`` alone (the security gate's
        injection suite), split with ``policy``'s seed and sizes. Blocking like
        :meth:`suite`: from a worker thread, or await :meth:`load_splits`."""
        p = policy.suite
        seed = p.split_seed or self.split_secret
        if not spec:
            return policy_splits(p, self.loaded.cache_dir, seed)
        return split(
            self.named_suite(spec).task_ids(),
            seed=seed,
            dev_size=p.dev_size,
            heldout_size=p.heldout_size,
            suite=f"suite '{spec}'",
        )

    async def load_suite(self, spec: str | None = None, *, policy: Policy) -> Suite:
        """:meth:`suite`, in a worker thread."""
        return await anyio.to_thread.run_sync(lambda: self.suite(spec, policy=policy))

    async def load_splits(self, spec: str | None = None, *, policy: Policy) -> Splits:
        """:meth:`splits`, in a worker thread."""
        return await anyio.to_thread.run_sync(lambda: self.splits(spec, policy=policy))

    def code_checker(self, limits: Limits) -> DockerCodeChecker:
        return DockerCodeChecker(
            self.engine,
            self.image,
            limits,
            self.labels(),
            temp_parent=self.runs_dir,
        )

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for provider in self._providers:
                try:
                    await provider.aclose()
                except Exception:  # logged, never raised over the error on its way out
                    log.warning("closing provider %s failed", provider.ref, exc_info=True)
        self._providers.clear()
        self._models.clear()


async def resolve_image(
    engine: DockerEngine,
    loaded: LoadedSettings,
    emit: Emit,
    route: Route = "auto",
    build_log: Callable[[str], None] = log.info,
) -> str:
    """The sandbox image to use: the ``image`` setting if given (it must exist), else the
    built-in recipe's tag, built first if missing."""
    if loaded.settings.image:
        if not await engine.image_exists(loaded.settings.image):
            raise SetupError(
                f"sandbox image {loaded.settings.image} (setting 'image') does not exist; "
                "build it or remove the setting to use the built-in recipe"
            )
        return loaded.settings.image
    tag = image_tag()
    if not await engine.image_exists(tag):
        await emit("image.building", f"building sandbox image {tag} (about a minute, once)")
        await ensure_image(engine, log=build_log, route=route)
    return tag


EVAL_SUFFIX = "-eval-"


def eval_instance(instance: str) -> str:
    """The label of a standalone ``harnessd eval``: its own, so a daemon on the same state dir
    never kills its containers, and its pid, so a killed one can be recognised and reaped."""
    return f"{instance}{EVAL_SUFFIX}{os.getpid()}"


async def _reap(engine: DockerEngine, instance: str) -> int:
    """This instance's containers, and those of standalone evals of the same state dir
    whose process is gone (``kill -9``): everything a crash here can have left."""
    base = instance.split(EVAL_SUFFIX)[0]
    stale = [instance]
    for other in await engine.instances():
        head, sep, pid = other.partition(EVAL_SUFFIX)
        if sep and head == base and pid.isdigit() and other != instance and owner_gone(int(pid)):
            stale.append(other)
    total = 0
    for name in stale:
        total += await engine.reap(name)
    return total


async def _remove_stale_run_dirs(instance: str) -> int:
    """This instance's leftover run dirs, and whole run roots of dead standalone evals of
    the same state dir (the counterpart of :func:`_reap` for directories)."""
    removed = await remove_orphan_run_dirs(runs_root(instance))
    base = instance.split(EVAL_SUFFIX)[0]
    parent = runs_root(base).parent
    for root in parent.glob(f"{ROOT_PREFIX}{base}{EVAL_SUFFIX}*"):
        pid = root.name.rpartition(EVAL_SUFFIX)[2]
        if root.name != runs_root(instance).name and pid.isdigit() and owner_gone(int(pid)):
            removed += await remove_orphan_run_dirs(root)
            await anyio.to_thread.run_sync(shutil.rmtree, root, True)
    return removed


@asynccontextmanager
async def open_runtime(
    loaded: LoadedSettings,
    policy: PolicyHolder,
    store: Store,
    *,
    instance: str,
    emit: Emit = _log_only,
    executor: ExecutorType | None = None,
) -> AsyncIterator[Runtime]:
    """``executor`` overrides the ``[executor] type`` setting (``harnessd eval --executor``)."""
    try:
        engine = await DockerEngine.connect()
    except SandboxFailure as exc:
        raise SandboxError(str(exc)) from None
    try:
        reaped = await _reap(engine, instance)
        stale_dirs = await _remove_stale_run_dirs(instance)
        if reaped or stale_dirs:
            await emit(
                "sandbox.reaped",
                f"removed {reaped} orphan container(s) and {stale_dirs} run dir(s) "
                "left by an earlier run",
                containers=reaped,
                run_dirs=stale_dirs,
            )
        image = await resolve_image(engine, loaded, emit)
        rt = Runtime(loaded, policy, store, engine, image, instance, emit)
        kind = executor or loaded.settings.executor.type
        try:
            settings = loaded.settings.executor
            async with open_executor(kind, settings, rt.local, rt.work_dir / "cluster", emit) as ex:
                rt.executor = ex
                yield rt
        finally:
            await rt.aclose()
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await engine.reap(instance)
            except SandboxFailure as exc:
                # Never raised from here: it would hide whatever error is on its way out
                # (the engine being gone is often the reason for both). The next start
                # reaps whatever is left.
                log.warning("could not remove this instance's containers at exit: %s", exc)
            await engine.aclose()
