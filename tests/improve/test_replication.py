"""Replication of a promotion: the fresh draw, the table's states, the figures, and that the
proposer never sees it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from daemon.config.policy import Policy, SuitePolicy
from daemon.errors import EngineUnavailable
from daemon.evaluation import results
from daemon.evaluation.report import CoverageReport, Split, TaskResult, build_report
from daemon.improve import replication
from daemon.improve.replication import Figures, Replicator, paired
from daemon.store import Store
from daemon.suites import ReplicationDraw, evaluated_suite, policy_splits, replication_suite

pytestmark = pytest.mark.unit

SEED = "replication-test"
P = SuitePolicy(name="bfcl:simple", dev_size=4, heldout_size=40, split_seed=SEED)


def _question(suite: object, task_id: str) -> str:
    prompt = suite.task(task_id).prompt  # type: ignore[attr-defined]
    return str([m.content for m in prompt if m.role == "user"][-1])


def test_the_draw_leaves_out_the_ids_the_test_used_while_enough_remain(
    asset_cache: Path,
) -> None:
    pool = policy_splits(P, asset_cache, SEED).heldout
    used = set(pool[:25])
    draw = replication_suite(P, asset_cache, SEED, "replication:c1", used, 10)
    assert len(draw.task_ids) == 10 and draw.remade and draw.reused == []
    assert not set(draw.task_ids) & used
    assert set(draw.task_ids) <= set(pool)


def test_too_few_unused_ids_are_filled_with_used_ones_as_new_copies(asset_cache: Path) -> None:
    pool = policy_splits(P, asset_cache, SEED).heldout
    used = set(pool[:35])
    draw = replication_suite(P, asset_cache, SEED, "replication:c1", used, 10)
    assert len(draw.task_ids) == 10
    assert set(draw.task_ids) - used == set(pool[35:])
    assert set(draw.reused) == set(draw.task_ids) & used and len(draw.reused) == 5


def test_the_copies_differ_from_the_tests_and_from_another_replications(
    asset_cache: Path,
) -> None:
    """Another seed, other copies: no question the held-out test saw comes back for the
    same ids, and another replication's draw differs too (a task with little to rewrite may
    come out alike from two seeds, rarely)."""
    tested = evaluated_suite(P, asset_cache, SEED)
    first = replication_suite(P, asset_cache, SEED, "replication:c1", set(), 20)
    second = replication_suite(P, asset_cache, SEED, "replication:c2", set(), 40)
    ids = [t for t in first.task_ids if t in second.task_ids]
    assert ids
    same_as_test = [t for t in ids if _question(first.suite, t) == _question(tested, t)]
    same_as_other = [t for t in ids if _question(first.suite, t) == _question(second.suite, t)]
    assert same_as_test == []
    assert len(same_as_other) <= len(ids) // 10, same_as_other


def test_a_suite_that_cannot_be_remade_gives_unused_tasks_only(asset_cache: Path) -> None:
    p = P.model_copy(update={"counterfactual": False})
    pool = policy_splits(p, asset_cache, SEED).heldout
    draw = replication_suite(p, asset_cache, SEED, "replication:c1", set(pool[:35]), 10)
    assert not draw.remade and draw.reused == [] and set(draw.task_ids) == set(pool[35:])


def _results(solved: list[bool]) -> list[TaskResult]:
    return [TaskResult(id=f"t{i}", passed=s, claimed_success=s) for i, s in enumerate(solved)]


def test_the_figures_count_discordant_pairs_on_shared_tasks() -> None:
    parent = _results([True, True, False, False, False])
    mine = _results([True, False, True, True, False]) + _results([True] * 7)[5:]
    f = paired(parent, mine, Policy())
    assert (f.n, f.parent_solved, f.candidate_solved, f.wins, f.losses) == (5, 2, 3, 2, 1)
    assert f.gain == 20.0 and f.low < 0 < f.high
    assert "+20.0 points" in f.text() and "over 5 tasks" in f.text()


def test_the_states_from_pending_to_done_or_failed(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    test = Figures(40, 20, 30, 12, 2, 25.0, 9.0, 38.0)
    replication.schedule(store, 3, 2, 1, test)
    replication.schedule(store, 3, 2, 1, None)  # a repeat is ignored
    [row] = replication.waiting(store)
    assert (row.state, row.test, row.result) == ("pending", test, None)
    assert "pending" in replication.line(row) and "+25.0 points" in replication.line(row)

    replication.mark_running(store, 3, ["a", "b"], ["b"], True, "scripted:x")
    row = replication.of(store, 3)  # type: ignore[assignment]
    assert row is not None and row.state == "running" and row.reused == ["b"]
    assert replication.waiting(store) == [row]  # a stop mid-run: it runs again
    replication.mark_pending(store, 3, "engine unavailable")
    assert replication.of(store, 3).error == "engine unavailable"  # type: ignore[union-attr]

    result = Figures(2, 1, 2, 1, 0, 50.0, -20.0, 90.0)
    replication.mark_done(store, 3, result)
    done = replication.of_version(store, 2)
    assert done is not None and done.state == "done" and done.result == result
    assert replication.waiting(store) == [] and replication.latest(store) == done
    assert replication.line(done).startswith("replicated +50.0 points")

    replication.schedule(store, 5, 3, 2, None)
    replication.mark_failed(store, 5, "SuiteError: no such suite")
    failed = replication.of(store, 5)
    assert failed is not None and failed.state == "failed" and failed.finished is not None
    assert "failed (SuiteError: no such suite)" in replication.line(failed)
    assert [r.candidate_id for r in replication.every(store)] == [3, 5]
    assert done.to_json()["n"] == 2


def test_the_proposer_never_reads_a_replication_run(tmp_path: Path) -> None:
    """What the briefing is built from (smoke and dev reports) leaves replication runs out,
    as it leaves out every held-out result."""
    store = Store(tmp_path / "state.db")
    for split in (Split.DEV, Split.REPLICATION):
        run_id = f"run-{split}"
        results.record_start(
            store, run_id, version_id=None, candidate_id=7, suite="s", split=split, model="m"
        )
        report = build_report(
            run_id=run_id,
            suite="s",
            split=split,
            model="m",
            tasks=_results([True]),
            coverage=CoverageReport(),
            candidate_id=7,
        )
        results.record_end(store, run_id, "done", report)
    seen = results.proposer_reports(store, [7])
    assert set(seen[7]) == {Split.DEV}
    assert Split.REPLICATION not in results.PROPOSER_SPLITS
    assert 7 not in results.candidates_run_on(store, Split.HELDOUT)


class _Runtime:
    """What the replicator needs of a runtime, with its events and outages recorded."""

    def __init__(self, store: Store, cache: Path) -> None:
        self.store = store
        self.split_secret = "secret"
        self.loaded = SimpleNamespace(cache_dir=cache)
        self.policy = SimpleNamespace(get=lambda: Policy())
        self.guard = SimpleNamespace(window_state=lambda: SimpleNamespace(exhausted=[]))
        self.events: list[str] = []
        self.outages: list[Exception] = []
        self.health = SimpleNamespace(report=self._report, outages={})

    async def _report(self, outage: Exception) -> None:
        self.outages.append(outage)
        self.health.outages["engine"] = outage

    async def emit(self, kind: str, message: str, **data: Any) -> None:
        self.events.append(kind)


def _replicator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: Exception
) -> tuple[_Runtime, Replicator]:
    store = Store(tmp_path / "state.db")
    replication.schedule(store, 1, 2, 1, None)
    rt = _Runtime(store, tmp_path)
    draw = ReplicationDraw(suite=None, task_ids=["a"], remade=True, reused=[])  # type: ignore[arg-type]
    monkeypatch.setattr(replication, "replication_suite", lambda *a, **k: draw)

    async def evaluate(*args: Any, **kwargs: Any) -> Any:
        raise fail

    monkeypatch.setattr(replication, "evaluate", evaluate)
    lineage = SimpleNamespace(get=lambda vid: SimpleNamespace(id=vid, name=f"v{vid:04d}"))
    replicator = Replicator(rt, lineage, lambda v: None)  # type: ignore[arg-type,return-value]
    return rt, replicator


@pytest.mark.anyio
async def test_an_outage_leaves_it_pending_and_another_error_fails_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outage = EngineUnavailable("the Docker engine went away", fix="start it")
    rt, replicator = _replicator(tmp_path / "a", monkeypatch, outage)
    await replicator.run_pending()
    row = replication.of(rt.store, 1)
    assert row is not None and row.state == "pending" and "went away" in row.error
    assert rt.events == ["replication.started", "replication.pending"]
    assert rt.outages == [outage]
    await replicator.run_pending()  # still down: it waits, without trying (or saying) again
    assert rt.events == ["replication.started", "replication.pending"]
    rt.health.outages.clear()
    await replicator.run_pending()  # back: tried again
    assert rt.events[2:] == ["replication.started", "replication.pending"]

    rt, replicator = _replicator(tmp_path / "b", monkeypatch, ValueError("broken"))
    await replicator.run_pending()
    row = replication.of(rt.store, 1)
    assert row is not None and row.state == "failed" and row.error == "ValueError: broken"
    assert rt.events == ["replication.started", "replication.failed"]


def test_the_report_page_and_its_summary_show_the_replication(tmp_path: Path) -> None:
    from daemon.report.build import build_report, write_report

    store = Store(tmp_path / "state.db")
    replication.schedule(store, 4, 2, 1, Figures(40, 20, 30, 12, 2, 25.0, 9.0, 38.0))
    page = build_report(store)
    assert "Replications of promotions" in page and "pending" in page
    replication.mark_done(store, 4, Figures(60, 30, 39, 12, 3, 15.0, 3.1, 26.0))
    page = build_report(store)
    assert "+15.0 points [+3.1, +26.0] over 60 tasks" in page
    assert "+25.0 points [+9.0, +38.0] over 40 tasks" in page
    summary = write_report(store, tmp_path / "report.html")
    assert summary.replications == [
        "c4: replicated +15.0 points [+3.1, +26.0] over 60 tasks; "
        "held-out test +25.0 points [+9.0, +38.0] over 40 tasks"
    ]
