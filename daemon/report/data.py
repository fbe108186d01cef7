"""Everything the report shows, read in one go from the tables' owners (no SQL here)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from daemon.evaluation import results
from daemon.evaluation.results import FinishedRun
from daemon.gateway import ledger
from daemon.improve import alpha_ledger, replication
from daemon.improve.replication import Replication
from daemon.lineage import candidates, versions
from daemon.lineage.records import Candidate, PointerChange, TreeEntry, Version, build_tree
from daemon.store import Store

# Enough points for a smooth spend curve, few enough to keep the SVG small.
SPEND_POINTS = 120


@dataclass(frozen=True)
class Spend:
    """The ledger in ``size``-second buckets from ``start``: ``(bucket, purpose, tokens)``."""

    start: float = 0.0
    size: float = 1.0
    buckets: list[tuple[int, str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class ReportData:
    generated: float
    current: Version | None
    versions: list[Version]
    tree: list[TreeEntry]
    candidates: list[Candidate]  # oldest first
    history: list[PointerChange]
    runs: list[FinishedRun]
    spend: Spend
    # Each held-out test's alpha, by candidate: the alpha ledger's share, at which the test's
    # decision was reached (its ``Decision.alpha``).
    heldout_alpha: dict[int, float] = field(default_factory=dict)
    # Each promotion's replication on fresh tasks, by candidate (a check, never a gate).
    replications: dict[int, Replication] = field(default_factory=dict)

    def version(self, version_id: int) -> Version | None:
        return next((v for v in self.versions if v.id == version_id), None)

    def children(self, version_id: int) -> list[Candidate]:
        return [c for c in self.candidates if c.parent_version_id == version_id]

    def promoted_to(self, candidate_id: int) -> Version | None:
        return next((v for v in self.versions if v.candidate_id == candidate_id), None)


def _spend(store: Store) -> Spend:
    span = ledger.spend_span(store)
    if span is None:
        return Spend()
    start, end = span
    size = max((end - start) / SPEND_POINTS, 1.0)
    return Spend(start, size, ledger.spend_by_bucket(store, start, size))


def gather(store: Store) -> ReportData:
    """A consistent-enough snapshot for a report (blocking: call it from a worker thread)."""
    all_versions = versions.all_versions(store)
    current = versions.current(store)
    cands = sorted(candidates.list_candidates(store, None, None, None), key=lambda c: c.id)
    return ReportData(
        generated=time.time(),
        current=current,
        versions=all_versions,
        tree=build_tree(
            all_versions, current.id if current else -1, candidates.counts_by_parent(store)
        ),
        candidates=cands,
        history=versions.history(store),
        runs=results.finished_runs(store),
        spend=_spend(store),
        heldout_alpha={t.candidate_id: t.alpha for t in alpha_ledger.tests(store)},
        replications={r.candidate_id: r for r in replication.every(store)},
    )
