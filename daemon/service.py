"""``harnessd serve``: one anyio task group owning everything the daemon runs.

Start-up order: state-dir lock, policy (invalid: exit 2, nothing started), SQLite, event
log, then the task group: the metrics' event feed, the OpenAI-compatible endpoint when
``[endpoint]`` enables it, the control socket (readiness via ``tg.start``; once it answers,
the endpoint does too), the metrics port when ``[metrics]`` enables it, file watchers, and
the workers. Then, under systemd (``Type=notify``), ``READY=1`` once the control socket
answers ``status`` and the live version's tree is there, and ``WATCHDOG=1`` while the event
loop and the store answer; ``STOPPING=1`` when a stop begins. SIGTERM/SIGINT drain and exit;
SIGHUP re-reads config and policy.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from daemon.config.policy import Policy, load_policy
from daemon.config.reload import PolicyHolder, watch_files
from daemon.config.secrets import endpoint_token, redact, register_configured_secrets
from daemon.config.settings import LoadedSettings, load_settings
from daemon.config.statedir import hold_lock, prepare_state_dir
from daemon.control.client import ControlClient
from daemon.control.handlers import ControlApi, VerbDeps
from daemon.control.protocol import SOCKET_NAME
from daemon.control.server import Replies, serve_control
from daemon.endpoint.server import Listening, serve_endpoint
from daemon.errors import ConfigError, LineageError, SetupError, Unavailable
from daemon.evaluation.health import ENGINE
from daemon.evaluation.runtime import Runtime, open_runtime
from daemon.events import EventBus
from daemon.improve.loop import ImprovementLoop, LoopControl
from daemon.improve.review import ReviewDesk
from daemon.lineage import Lineage
from daemon.live import private_suites, requests
from daemon.live.harness import LiveHarness
from daemon.ops.metrics import DaemonMetrics, Sources
from daemon.ops.probes import DaemonProbes, serve_probes
from daemon.ops.sdnotify import Notifier
from daemon.providers import check_models
from daemon.store import Store
from daemon.suites import check_suite, watched_paths
from sandbox.labels import instance_id

log = logging.getLogger("harnessd.service")


# How long a stop waits for live requests before cancelling them (and telling their
# callers): short, because a stop must be prompt even while a slow local model answers.
DRAIN_GRACE_S = 0.5
# How long it then waits for replies already on their way to reach their clients.
REPLY_GRACE_S = 1.0
# How long the readiness check waits for the control socket's answer to ``status``.
READY_CHECK_S = 5.0


class Daemon:
    def __init__(
        self,
        loaded: LoadedSettings,
        policy: PolicyHolder,
        store: Store,
        bus: EventBus,
        token: str | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.loaded = loaded
        self.token = token  # the endpoint's bearer token (None: the endpoint is off)
        self.notifier = notifier or Notifier({})  # systemd's socket (none: not under systemd)
        self.endpoint: Listening | None = None
        self.metrics_url: str | None = None
        self.policy = policy
        self.store = store
        self.bus = bus
        self.started = time.time()
        self.control = LoopControl()
        self.stop_requested = anyio.Event()
        self.socket_path = loaded.state_dir / SOCKET_NAME
        self.lineage = Lineage(store, loaded.harnesses_dir)

    def status_basics(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "started": self.started,
            "uptime_s": round(time.time() - self.started, 1),
            "state_dir": str(self.loaded.state_dir),
            "policy_path": str(self.policy.path),
            "endpoint": None
            if self.endpoint is None
            else {
                "url": self.endpoint.url,
                "unix_socket": None
                if self.endpoint.unix_socket is None
                else str(self.endpoint.unix_socket),
            },
            "metrics": None if self.metrics_url is None else {"url": self.metrics_url},
        }

    async def on_file_change(self, path: Any) -> None:
        suite_files = watched_paths(self.policy.get().suite, self.loaded.cache_dir)
        if path == self.policy.path.resolve() or path in suite_files:
            await self.reload_policy()  # a suite file's edit is checked like the policy's
        elif self.loaded.config_path is not None and path == self.loaded.config_path:
            await self.reload_config()

    async def reload_policy(self) -> None:
        try:
            await self.policy.reload()
        except ConfigError as exc:
            await self.bus.emit(
                "policy.invalid",
                f"policy not applied, the previous one stays in force: {exc}",
                level="error",
                path=str(self.policy.path),
            )
            return
        await self.bus.emit("policy.applied", f"policy applied from {self.policy.path}")

    async def reload_config(self) -> None:
        try:
            fresh = await anyio.to_thread.run_sync(load_settings, self.loaded.config_path)
        except ConfigError as exc:
            await self.bus.emit("config.invalid", f"config not applied: {exc}", level="error")
            return
        if fresh.state_dir != self.loaded.state_dir:
            await self.bus.emit(
                "config.restart_needed",
                f"state_dir changed to {fresh.state_dir}; restart harnessd to move there",
                level="warning",
            )
        for table in ("endpoint", "metrics"):
            if getattr(fresh.settings, table) != getattr(self.loaded.settings, table):
                await self.bus.emit(
                    "config.restart_needed",
                    f"[{table}] changed; restart harnessd to serve it as set",
                    level="warning",
                )
        logging.getLogger("harnessd").setLevel(fresh.settings.log_level.upper())
        self.loaded = fresh
        self.policy.path = fresh.policy_path
        await self.bus.emit("config.applied", f"config re-read from {fresh.config_path}")
        await self.reload_policy()

    def watched(self) -> list[Any]:
        paths = [self.policy.path]
        if self.loaded.config_path is not None:
            paths.append(self.loaded.config_path)
        return paths + watched_paths(self.policy.get().suite, self.loaded.cache_dir)

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum != signal.SIGHUP:
                    self.stop_requested.set()
                    continue
                await self.bus.emit("config.sighup", "SIGHUP: re-reading config and policy")
                if self.loaded.config_path is not None:
                    await self.reload_config()  # re-reads the policy too
                else:
                    await self.reload_policy()

    async def _prepare_lineage(self) -> None:
        def prepare() -> tuple[list[str], str]:
            fixes = self.lineage.reconcile()  # before any other mutation, as it requires
            self.lineage.init_seed(self.loaded.seed_dir)  # no-op once a version exists
            return fixes, self.lineage.current().name

        try:
            fixes, live = await anyio.to_thread.run_sync(prepare)
        except LineageError as exc:
            raise SetupError(
                f"the lineage in {self.loaded.harnesses_dir} does not match the state in "
                f"{self.loaded.state_dir} ({exc}); point harnesses_dir at the folder that "
                "holds this state's versions, or start with an empty state_dir"
            ) from None
        for fix in fixes:
            await self.bus.emit("lineage.recovered", fix, level="warning")
        await self.bus.emit("lineage.ready", f"live version {live}", version=live)

    def _verbs(self, rt: Runtime, live: LiveHarness, loop: ImprovementLoop) -> ControlApi:
        return ControlApi(
            VerbDeps(
                bus=self.bus,
                store=self.store,
                lineage=self.lineage,
                policy=self.policy,
                control=self.control,
                live=live,
                submit=loop.submit_external,
                reviews=ReviewDesk(rt, self.lineage, loop.pipeline),
                progress=lambda: list(rt.progress.values()),
                outages=rt.health.state,
                calls=rt.calls_in_flight,
                windows=rt.guard.window_state,
                work_dir=rt.work_dir,
                suites_dir=private_suites.suites_dir(self.loaded.state_dir),
                basics=self.status_basics,
                stop=self.stop_requested,
            )
        )

    async def _start_endpoint(
        self,
        tg: anyio.abc.TaskGroup,
        live: LiveHarness,
        metrics: DaemonMetrics,
        probes: DaemonProbes,
    ) -> None:
        settings = self.loaded.settings.endpoint
        if not settings.enabled or self.token is None:
            return
        self.endpoint = await tg.start(
            partial(
                serve_endpoint,
                settings,
                self.loaded.endpoint_socket,
                live,
                self.token,
                observer=metrics,
                probes=probes,
            )
        )
        await self.bus.emit(
            "endpoint.started",
            f"OpenAI-compatible endpoint at {self.endpoint.describe()} "
            f"(model {settings.model_name!r}, token in {self.loaded.endpoint_token_file})",
            url=self.endpoint.url,
            unix_socket=None
            if self.endpoint.unix_socket is None
            else str(self.endpoint.unix_socket),
        )

    async def _start_metrics(self, tg: anyio.abc.TaskGroup, probes: DaemonProbes) -> None:
        settings = self.loaded.settings.metrics
        if not settings.enabled:
            return
        self.metrics_url = await tg.start(serve_probes, settings, probes)
        await self.bus.emit(
            "metrics.started",
            f"Prometheus metrics at {self.metrics_url}/metrics (and /healthz, /readyz)",
            url=self.metrics_url,
        )

    def _control_answers(self) -> None:
        with ControlClient(self.socket_path, timeout=READY_CHECK_S) as client:
            client.call("status")

    def _live_tree(self) -> None:
        tree = self.lineage.path(self.lineage.current())
        if not (tree / "harness.py").is_file():
            raise SetupError(f"the live version's tree {tree} has no harness.py")

    async def unready(self, rt: Runtime, live: LiveHarness, *, outages: bool = True) -> list[str]:
        """Why the daemon is not ready (none: it is): the control socket does not answer
        ``status``, the live version's tree is missing, it is stopping, or (``outages``) the
        engine or the primary model is down so the live harness cannot answer."""
        reasons = []
        if not live.accepting:
            reasons.append("harnessd is stopping")
        try:
            await anyio.to_thread.run_sync(self._control_answers)
        except Exception as exc:
            reasons.append(f"the control socket does not answer status: {exc}")
        try:
            await anyio.to_thread.run_sync(self._live_tree)
        except (SetupError, LineageError) as exc:
            reasons.append(str(exc))
        if outages:
            try:
                rt.health.check((ENGINE, rt.policy.get().models.primary))
            except Unavailable as exc:
                reasons.append(str(exc))
        return reasons

    async def _announce_ready(self, rt: Runtime, live: LiveHarness) -> None:
        """``READY=1`` once the control socket and the live harness answer (an outage does
        not hold it back: the daemon is up and waits the outage out; /readyz reports it)."""
        while reasons := await self.unready(rt, live, outages=False):
            log.warning("not ready yet: %s", "; ".join(reasons))
            await anyio.sleep(0.5)
        live_version = await anyio.to_thread.run_sync(self.lineage.current)
        self.notifier.notify(
            "READY=1", f"STATUS=live version {live_version.name}; control socket {self.socket_path}"
        )

    async def _supervised(self, rt: Runtime, live: LiveHarness) -> None:
        """What systemd hears: ``READY=1``, then the watchdog's pings if it asked for them."""
        await self._announce_ready(rt, live)
        if (every := self.notifier.ping_every_s) is not None:
            await self._watchdog(every)

    async def _watchdog(self, every: float) -> None:
        """``WATCHDOG=1`` every ``every`` seconds while the event loop runs and the store
        answers; a hung daemon stops pinging, and systemd restarts it."""
        while True:
            began = time.monotonic()
            with anyio.move_on_after(every / 2):
                await anyio.to_thread.run_sync(self.lineage.current, abandon_on_cancel=True)
                self.notifier.notify("WATCHDOG=1")
            await anyio.sleep(max(0.0, every - (time.monotonic() - began)))

    async def run(self) -> None:
        await self._prepare_lineage()
        instance = instance_id(self.loaded.state_dir)
        async with (
            open_runtime(
                self.loaded, self.policy, self.store, instance=instance, emit=self.bus.emit
            ) as rt,
            anyio.create_task_group() as tg,
        ):
            live = LiveHarness(rt, self.lineage)
            metrics = DaemonMetrics(
                Sources(
                    self.store,
                    self.lineage,
                    rt.guard.window_state,
                    rt.health.state,
                    lambda: live.in_flight,
                )
            )
            live.on_served = metrics.served
            rt.on_model_call = metrics.model_call
            rt.recorded_requests = partial(requests.recent, self.store)
            probes = DaemonProbes(metrics, partial(self.unready, rt, live))
            loop = ImprovementLoop(rt, self.lineage, self.control)
            replies = Replies()
            tg.start_soon(self._signals)
            await tg.start(metrics.follow, self.bus)
            await tg.start(rt.health.run)
            await self._start_endpoint(tg, live, metrics, probes)
            await tg.start(serve_control, self.socket_path, self._verbs(rt, live, loop), replies)
            await self._start_metrics(tg, probes)
            await tg.start(watch_files, self.watched, self.on_file_change)
            await tg.start(loop.run)
            await self.bus.emit(
                "daemon.started",
                f"harnessd up (pid {os.getpid()}), control socket {self.socket_path}",
            )
            _print_attach_hint(self.socket_path)
            tg.start_soon(self._supervised, rt, live)
            await self.stop_requested.wait()
            self.notifier.notify("STOPPING=1", "STATUS=stopping: draining requests in flight")
            await self.bus.emit("daemon.stopping", "stopping: draining requests in flight")
            left = await live.drain(DRAIN_GRACE_S)
            if left:
                await self.bus.emit(
                    "daemon.drain_timeout",
                    f"{left} request(s) still running after {DRAIN_GRACE_S:.1f} s; cancelled "
                    "them (their callers were told)",
                    level="warning",
                )
            await replies.settle(REPLY_GRACE_S)
            tg.cancel_scope.cancel()
        await self.bus.emit("daemon.stopped", "harnessd stopped")


def _print_attach_hint(socket_path: Any) -> None:
    print(
        "harnessd is running. Attach from another terminal:\n"
        "  .venv/bin/harnessctl status    # live version, scores, budgets\n"
        "  .venv/bin/harnessctl watch     # live event stream\n"
        f"(control socket: {socket_path}; stop with Ctrl-C or 'harnessctl stop')",
        file=sys.stderr,
        flush=True,
    )


async def serve(loaded: LoadedSettings) -> None:
    notifier = Notifier()  # first: what the daemon starts must not inherit systemd's socket

    def prepare() -> tuple[Path, str | None]:
        state_dir = prepare_state_dir(loaded.state_dir)
        register_configured_secrets(loaded)  # reads the key files
        # Read (or made) before anything starts: a token file others can read stops here.
        token = endpoint_token(loaded) if loaded.settings.endpoint.enabled else None
        return state_dir, token

    state_dir, token = await anyio.to_thread.run_sync(prepare)
    with hold_lock(state_dir):
        policy = await anyio.to_thread.run_sync(load_policy, loaded.policy_path)

        async def usable(p: Policy) -> None:
            """More than the file's own validity: its models can be made, its suite loaded
            and split as asked. Checked before start-up and before a reload applies."""
            await check_models(p.model_refs(), loaded, p.retry)
            await anyio.to_thread.run_sync(check_suite, p, loaded.cache_dir)

        await usable(policy)
        holder = PolicyHolder(loaded.policy_path, policy, [usable])
        store = await anyio.to_thread.run_sync(Store, state_dir / "state.db")
        try:
            bus = EventBus(store, redact)
            await Daemon(loaded, holder, store, bus, token, notifier).run()
        finally:
            store.close()
