"""The metrics as a scrape renders them, parsed with prometheus-client's own parser: counts
read from a real store (so they survive a restart), histograms fed by events and hooks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.events import insert_event, make_event
from daemon.gateway import ledger
from daemon.gateway.budget import WindowState, WindowUsage
from daemon.gateway.ledger import Charge
from daemon.lineage import CandidateSource, Lineage, NewCandidate
from daemon.ops.metrics import DaemonMetrics, Sources
from daemon.providers.base import Usage
from daemon.store import Store
from tests.support.scrape import samples

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "state.db")
    yield opened
    opened.close()


def _metrics(store: Store, lineage: Lineage) -> DaemonMetrics:
    windows = WindowState(
        (WindowUsage("hour", 300, 1000, None), WindowUsage("day", 1200, 1000, 99.0))
    )
    return DaemonMetrics(
        Sources(
            store,
            lineage,
            windows=lambda: windows,
            outages=lambda: [{"dependency": "engine"}],
            in_flight=lambda: 2,
        )
    )


def _candidate(lineage: Lineage, state: str, stage: str) -> int:
    new = NewCandidate(
        parent_id=1,
        source=CandidateSource.PROPOSER,
        proposer_model="local:smollm2-135m",
        rationale="r",
        patch="",
        raw="",
    )
    cid = lineage.add_candidate(new)
    lineage.set_candidate(cid, "evaluating", stage)
    if state != "evaluating":
        lineage.set_candidate(cid, state, stage)  # type: ignore[arg-type]
    return cid


def test_a_scrape_reads_the_daemons_state(store: Store, tmp_path: Path) -> None:
    lineage = Lineage(store, tmp_path / "harnesses")
    lineage.init_seed(ROOT / "seeds" / "minimal")
    _candidate(lineage, "rejected", "heldout")
    _candidate(lineage, "rejected", "heldout")
    _candidate(lineage, "evaluating", "dev")
    ledger.record(store, Charge("local:m", "solve"), Usage(prompt_tokens=100, completion_tokens=7))
    ledger.record(store, Charge("local:m", "solve"), Usage(prompt_tokens=50, completion_tokens=3))
    ledger.record(store, Charge("openai:p", "propose"), Usage(prompt_tokens=9, completion_tokens=1))
    for dependency in ("engine", "engine", "local:m"):
        insert_event(store, "outage.started", "down", data={"dependency": dependency})

    got = samples(_metrics(store, lineage).render().decode())

    assert got["harnessd_candidates", (("stage", "heldout"), ("state", "rejected"))] == 2
    assert got["harnessd_candidates", (("stage", "dev"), ("state", "evaluating"))] == 1
    assert got["harnessd_promotions_total", ()] == 0
    assert got["harnessd_rollbacks_total", ()] == 0
    tokens = (("kind", "prompt"), ("model", "local:m"), ("purpose", "solve"))
    assert got["harnessd_tokens_total", tokens] == 150
    completion = (("kind", "completion"), ("model", "openai:p"), ("purpose", "propose"))
    assert got["harnessd_tokens_total", completion] == 1
    assert got["harnessd_model_calls_total", (("model", "local:m"), ("purpose", "solve"))] == 2
    assert got["harnessd_outages_total", (("dependency", "engine"),)] == 2
    assert got["harnessd_outages_total", (("dependency", "local:m"),)] == 1
    assert got["harnessd_outage_active", (("dependency", "engine"),)] == 1
    assert got["harnessd_budget_tokens_left", (("window", "hour"),)] == 700
    assert got["harnessd_budget_tokens_left", (("window", "day"),)] == 0  # overspent: none
    assert got["harnessd_budget_tokens_limit", (("window", "day"),)] == 1000
    assert got["harnessd_live_version_info", (("version", "v0001"),)] == 1
    assert got["harnessd_requests_in_flight", ()] == 2

    # Read at scrape time: a fresh registry over the same store (a restart) sees the same.
    again = samples(_metrics(store, lineage).render().decode())
    assert again["harnessd_tokens_total", tokens] == 150


def test_histograms_are_fed_by_verdict_events_and_the_request_hooks(
    store: Store, tmp_path: Path
) -> None:
    lineage = Lineage(store, tmp_path / "harnesses")
    lineage.init_seed(ROOT / "seeds" / "minimal")
    metrics = _metrics(store, lineage)
    metrics.observe(make_event(1, "version.promoted", "info", "", {"evaluation_s": 420.0}))
    metrics.observe(make_event(2, "candidate.rejected", "info", "", {"evaluation_s": 30.0}))
    # A static rejection is not an evaluation: no evaluation_s, nothing observed.
    metrics.observe(make_event(3, "candidate.rejected", "info", "", {"stage": "static"}))
    metrics.observe(make_event(4, "baseline.done", "info", "", {"split": "dev", "evaluation_s": 9}))
    metrics.model_call(Charge("local:m", "solve"), 0.7)
    metrics.served("ask", "done", 1.5)
    metrics.request_done("chat", 200, 0.4)
    metrics.request_done("chat", 499, 2.0)

    got = samples(metrics.render().decode())

    accepted = (("verdict", "accepted"),)
    assert got["harnessd_candidate_evaluation_seconds_count", accepted] == 1
    assert got["harnessd_candidate_evaluation_seconds_sum", accepted] == 420
    assert got["harnessd_candidate_evaluation_seconds_count", (("verdict", "rejected"),)] == 1
    assert got["harnessd_baseline_evaluation_seconds_count", (("split", "dev"),)] == 1

    def ask_under(le: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        return "harnessd_request_seconds_bucket", (("kind", "ask"), ("le", le), ("outcome", "done"))

    assert (got[ask_under("2.0")], got[ask_under("1.0")]) == (1, 0)
    assert got["harnessd_endpoint_requests_total", (("route", "chat"), ("status", "499"))] == 1
    call = (("model", "local:m"), ("purpose", "solve"))
    assert got["harnessd_model_call_seconds_sum", call] == 0.7
    assert got["harnessd_endpoint_request_seconds_count", (("route", "chat"),)] == 2
