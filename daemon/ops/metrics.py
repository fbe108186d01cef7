"""The daemon's figures in Prometheus's text format (prometheus-client).

Two kinds, by what they must survive:

* Counts read from the daemon's own tables at scrape time (:class:`StateCollector`), so a
  restart changes nothing: candidates by state (their verdict, once decided) and stage,
  promotions and rollbacks (the pointer's history), tasks run by evaluations by split
  (``split="heldout"``: the held-out tasks), held-out tests by state, tokens and model calls
  by model and purpose (the ledger), outages by dependency (the event log) and the ones
  going on, the budget windows' limits and what is left, the live version, requests in
  flight.
* Latency histograms fed as things happen, empty again after a restart as Prometheus
  expects of a process's histograms: a candidate's evaluation (start to verdict) and a
  baseline's, from their events' ``evaluation_s``; model calls (the provider's own time)
  from the gateway's metered calls; live requests (``ask``, ``run``, ``chat``) from the
  live harness; the endpoint's requests, with a counter by status, from the endpoint.

A scrape reads SQLite, so :meth:`DaemonMetrics.render` is for a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from daemon import events
from daemon.evaluation import results
from daemon.events import Event, EventBus
from daemon.gateway import ledger
from daemon.gateway.budget import WindowState
from daemon.gateway.ledger import Charge
from daemon.improve import alpha_ledger
from daemon.lineage import Lineage
from daemon.store import Store

PREFIX = "harnessd"
# A candidate's evaluation takes minutes on a hosted model and hours on the embedded one.
EVALUATION_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800)
# A request is one harness run: a second on a fast model, minutes on a slow one.
REQUEST_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
# The verdict events and the verdict each one is (a static rejection is not timed).
VERDICT_EVENTS = {
    "version.promoted": "accepted",
    "candidate.rejected": "rejected",
    "candidate.awaiting_review": "awaiting_review",
}


@dataclass(frozen=True)
class Sources:
    """Where the scrape-time figures come from (each a blocking call)."""

    store: Store
    lineage: Lineage
    windows: Callable[[], WindowState]
    outages: Callable[[], list[dict[str, Any]]]
    in_flight: Callable[[], int]


class StateCollector(Collector):
    """The counts and gauges read from the daemon's state at each scrape."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        yield from self._candidates()
        yield from self._tokens()
        yield from self._health()
        yield from self._budget()

    def _candidates(self) -> Iterator[Metric]:
        src = self.sources
        candidates = GaugeMetricFamily(
            f"{PREFIX}_candidates",
            "Candidates by state (accepted, rejected: their verdict; proposed, evaluating, "
            "awaiting_review, interrupted) and the stage they reached",
            labels=["state", "stage"],
        )
        for (state, stage), n in src.lineage.candidate_counts().items():
            candidates.add_metric([state, stage], n)
        yield candidates
        history = src.lineage.history()
        yield CounterMetricFamily(
            f"{PREFIX}_promotions",
            "Candidates made live (by the gates or a person's approval)",
            value=sum(1 for c in history if c.candidate_id is not None and not c.is_rollback),
        )
        yield CounterMetricFamily(
            f"{PREFIX}_rollbacks",
            "Rollbacks to an earlier version (harnessctl rollback)",
            value=sum(1 for c in history if c.is_rollback),
        )
        tasks = CounterMetricFamily(
            f"{PREFIX}_evaluated_tasks",
            "Tasks run by finished evaluations, by split (heldout: the held-out tasks)",
            labels=["split"],
        )
        for split, n in results.tasks_run_by_split(src.store).items():
            tasks.add_metric([split], n)
        yield tasks
        tests: dict[str, int] = {}
        for test in alpha_ledger.tests(src.store):
            tests[test.state] = tests.get(test.state, 0) + 1
        heldout = GaugeMetricFamily(
            f"{PREFIX}_heldout_tests",
            "Held-out tests by state (running, awaiting_review, promoted, not_promoted, void)",
            labels=["state"],
        )
        for state, n in sorted(tests.items()):
            heldout.add_metric([state], n)
        yield heldout
        live = InfoMetricFamily(f"{PREFIX}_live_version", "The version that serves requests")
        live.add_metric([], {"version": src.lineage.current().name})
        yield live
        yield GaugeMetricFamily(
            f"{PREFIX}_requests_in_flight",
            "Live requests (ask, run, endpoint) being answered",
            value=src.in_flight(),
        )

    def _tokens(self) -> Iterator[Metric]:
        tokens = CounterMetricFamily(
            f"{PREFIX}_tokens",
            "Tokens the providers reported (the ledger), by model, purpose and kind",
            labels=["model", "purpose", "kind"],
        )
        calls = CounterMetricFamily(
            f"{PREFIX}_model_calls",
            "Model calls (the ledger), by model and purpose",
            labels=["model", "purpose"],
        )
        for (model, purpose), spent in ledger.totals_by_model_and_purpose(
            self.sources.store
        ).items():
            tokens.add_metric([model, purpose, "prompt"], spent.prompt_tokens)
            tokens.add_metric([model, purpose, "completion"], spent.completion_tokens)
            calls.add_metric([model, purpose], spent.calls)
        yield tokens
        yield calls

    def _health(self) -> Iterator[Metric]:
        started = CounterMetricFamily(
            f"{PREFIX}_outages",
            "Outages that began (the engine, a model provider, the Ray cluster), by dependency",
            labels=["dependency"],
        )
        for dependency, n in events.count_by(
            self.sources.store, "outage.started", "dependency"
        ).items():
            started.add_metric([dependency], n)
        yield started
        active = GaugeMetricFamily(
            f"{PREFIX}_outage_active", "1 while the dependency is down", labels=["dependency"]
        )
        for outage in self.sources.outages():
            active.add_metric([str(outage["dependency"])], 1)
        yield active

    def _budget(self) -> Iterator[Metric]:
        left = GaugeMetricFamily(
            f"{PREFIX}_budget_tokens_left",
            "Tokens left in the rolling budget window (hour, day, proposer's day)",
            labels=["window"],
        )
        limit = GaugeMetricFamily(
            f"{PREFIX}_budget_tokens_limit",
            "The rolling budget window's limit (the policy's [budget])",
            labels=["window"],
        )
        for window in self.sources.windows().windows:
            left.add_metric([window.scope], max(0, window.limit - window.spent))
            limit.add_metric([window.scope], window.limit)
        yield left
        yield limit


class DaemonMetrics:
    """The registry a scrape renders, and the hooks that feed its histograms."""

    def __init__(self, sources: Sources) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StateCollector(sources))
        ProcessCollector(registry=self.registry)  # the daemon's CPU, memory, open files
        self.candidate_seconds = self._histogram(
            "candidate_evaluation_seconds",
            "A candidate's evaluation, from its start to its verdict, by verdict",
            ["verdict"],
            EVALUATION_BUCKETS,
        )
        self.baseline_seconds = self._histogram(
            "baseline_evaluation_seconds",
            "A version's baseline evaluation on a split with a model, by split",
            ["split"],
            EVALUATION_BUCKETS,
        )
        self.request_seconds = self._histogram(
            "request_seconds",
            "Live requests by kind (ask, run, chat: the endpoint) and outcome (done, error, "
            "interrupted)",
            ["kind", "outcome"],
        )
        self.model_call_seconds = self._histogram(
            "model_call_seconds",
            "Answered model calls, the provider's own time, by model and purpose",
            ["model", "purpose"],
        )
        self.endpoint_requests = Counter(
            f"{PREFIX}_endpoint_requests",
            "Requests the endpoint answered, by route and HTTP status (499: the client left)",
            ["route", "status"],
            registry=self.registry,
        )
        self.endpoint_seconds = self._histogram(
            "endpoint_request_seconds",
            "The endpoint's requests from arrival to their last byte, by route",
            ["route"],
        )

    def _histogram(
        self,
        name: str,
        documentation: str,
        labels: list[str],
        buckets: tuple[float, ...] = REQUEST_BUCKETS,
    ) -> Histogram:
        return Histogram(
            f"{PREFIX}_{name}", documentation, labels, buckets=buckets, registry=self.registry
        )

    def render(self) -> bytes:
        """The text format (blocking: reads the store)."""
        return generate_latest(self.registry)

    def request_done(self, route: str, status: int, seconds: float) -> None:
        """The endpoint's :class:`~daemon.endpoint.app.RequestObserver`."""
        self.endpoint_requests.labels(route, str(status)).inc()
        self.endpoint_seconds.labels(route).observe(seconds)

    def model_call(self, charge: Charge, seconds: float) -> None:
        """The runtime's ``on_model_call``."""
        self.model_call_seconds.labels(charge.model, charge.purpose).observe(seconds)

    def served(self, kind: str, outcome: str, seconds: float) -> None:
        """The live harness's ``on_served``."""
        self.request_seconds.labels(kind, outcome).observe(seconds)

    def observe(self, event: Event) -> None:
        data = event.get("data", {})
        seconds = data.get("evaluation_s")
        if not isinstance(seconds, int | float):
            return
        verdict = VERDICT_EVENTS.get(str(event.get("kind")))
        if verdict is not None:
            self.candidate_seconds.labels(verdict).observe(seconds)
        elif event.get("kind") == "baseline.done":
            self.baseline_seconds.labels(str(data.get("split"))).observe(seconds)

    async def follow(
        self, bus: EventBus, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Feed the histograms from the event stream until cancelled."""
        async with bus.subscribe() as stream:
            task_status.started()
            async for event in stream:
                self.observe(event)
