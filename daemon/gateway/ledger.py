"""The token ledger: one row per model call, with the usage the provider reported.

Owner of the ``ledger`` table: every read and write of it is a function here.

Rows are only ever added. Who a call is charged to (:class:`Charge`) is decided by the
daemon from the socket or loop that made it, never by what a harness says. All functions
are synchronous and take the :class:`~daemon.store.Store`; the daemon calls them through
``Store.call`` or a worker thread.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Literal

from daemon.providers.base import Purpose, Usage
from daemon.store import Store

_RUN_SQL = """
SELECT COALESCE(SUM(CASE WHEN task_id = :task THEN t END), 0), COALESCE(SUM(t), 0)
FROM (SELECT task_id, prompt_tokens + completion_tokens AS t FROM ledger WHERE run_id = :run)
"""
_WINDOWS_SQL = """
SELECT
  (SELECT COALESCE(MAX(id), 0) FROM ledger),
  COALESCE(SUM(CASE WHEN ts > :hour THEN t END), 0),
  COALESCE(SUM(t), 0),
  COALESCE(SUM(CASE WHEN purpose = 'propose' THEN t END), 0)
FROM (SELECT ts, purpose, prompt_tokens + completion_tokens AS t FROM ledger WHERE ts > :day)
"""
_NEW_ROWS_SQL = """
SELECT id, ts, purpose, prompt_tokens + completion_tokens FROM ledger WHERE id > ? ORDER BY id
"""
_TOTAL = "COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), COUNT(*)"


@dataclass(frozen=True)
class Charge:
    """Who pays for one model call."""

    model: str
    purpose: Purpose
    run_id: str | None = None
    task_id: str | None = None
    candidate_id: int | None = None
    version_id: int | None = None


@dataclass(frozen=True)
class Spent:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class PeriodTotal:
    """Spending in one clock hour or day (UTC), ``start`` as a Unix timestamp."""

    start: float
    spent: Spent


def record(
    target: Store | sqlite3.Connection,
    charge: Charge,
    usage: Usage,
    *,
    ts: float | None = None,
    estimated: bool = False,
) -> int:
    """Add one call's usage; returns the row id. A connection joins its open transaction.

    ``estimated``: the call was abandoned before the provider reported its usage (its task
    ended first), and ``usage`` is what was reserved for it, charged because the provider
    bills a request it has started."""
    row = (
        time.time() if ts is None else ts,
        charge.run_id,
        charge.task_id,
        charge.candidate_id,
        charge.version_id,
        charge.model,
        charge.purpose,
        usage.prompt_tokens,
        usage.completion_tokens,
        int(estimated),
    )

    def insert(conn: sqlite3.Connection) -> int:
        cur = conn.execute(
            "INSERT INTO ledger(ts, run_id, task_id, candidate_id, version_id, model, purpose,"
            " prompt_tokens, completion_tokens, estimated) VALUES (?,?,?,?,?,?,?,?,?,?)",
            row,
        )
        return int(cur.lastrowid or 0)

    if isinstance(target, Store):
        return target.run(insert)
    return insert(target)


def _spent(store: Store, where: str, params: tuple[object, ...]) -> Spent:
    found = store.query_one(f"SELECT {_TOTAL} FROM ledger WHERE {where}", params)
    assert found is not None  # an aggregate always returns one row
    return Spent(int(found[0]), int(found[1]), int(found[2]))


def spent_by_task(store: Store, run_id: str, task_id: str) -> Spent:
    return _spent(store, "run_id = ? AND task_id = ?", (run_id, task_id))


def spent_by_run(store: Store, run_id: str) -> Spent:
    """One evaluation's spending (every task of the run)."""
    return _spent(store, "run_id = ?", (run_id,))


def spent_by_candidate(store: Store, candidate_id: int, purpose: Purpose | None = None) -> Spent:
    if purpose is None:
        return _spent(store, "candidate_id = ?", (candidate_id,))
    return _spent(store, "candidate_id = ? AND purpose = ?", (candidate_id, purpose))


def spent_by_version(store: Store, version_id: int, purpose: Purpose | None = None) -> Spent:
    if purpose is None:
        return _spent(store, "version_id = ?", (version_id,))
    return _spent(store, "version_id = ? AND purpose = ?", (version_id, purpose))


def spent_since(store: Store, since: float, purpose: Purpose | None = None) -> Spent:
    """Spending in the rolling window that started at ``since`` (all purposes, or one)."""
    if purpose is None:
        return _spent(store, "ts > ?", (since,))
    return _spent(store, "ts > ? AND purpose = ?", (since, purpose))


def _grouped(store: Store, key: str, having: str, params: tuple[object, ...]) -> list[sqlite3.Row]:
    return store.query(
        f"SELECT {key} AS k, {_TOTAL} FROM ledger WHERE {having} GROUP BY k ORDER BY k", params
    )


def totals_by_candidate(store: Store) -> dict[int, Spent]:
    rows = _grouped(store, "candidate_id", "candidate_id IS NOT NULL", ())
    return {int(r["k"]): Spent(int(r[1]), int(r[2]), int(r[3])) for r in rows}


def totals_by_version(store: Store) -> dict[int, Spent]:
    rows = _grouped(store, "version_id", "version_id IS NOT NULL", ())
    return {int(r["k"]): Spent(int(r[1]), int(r[2]), int(r[3])) for r in rows}


def totals_by_model_and_purpose(store: Store) -> dict[tuple[str, str], Spent]:
    """Everything spent, by (model, purpose): what the metrics count."""
    rows = store.query(
        f"SELECT model, purpose, {_TOTAL} FROM ledger GROUP BY model, purpose ORDER BY 1, 2"
    )
    return {(str(r[0]), str(r[1])): Spent(int(r[2]), int(r[3]), int(r[4])) for r in rows}


def totals_by_period(
    store: Store, period: Literal["hour", "day"], since: float = 0.0
) -> list[PeriodTotal]:
    """Spending per UTC clock hour or day from ``since`` on, oldest first (for status views)."""
    size = 3600 if period == "hour" else 86400
    rows = _grouped(store, f"CAST(ts / {size} AS INTEGER) * {size}", "ts >= ?", (since,))
    return [PeriodTotal(float(r["k"]), Spent(int(r[1]), int(r[2]), int(r[3]))) for r in rows]


def totals_by_hour(store: Store, since: float = 0.0) -> list[PeriodTotal]:
    return totals_by_period(store, "hour", since)


def totals_by_day(store: Store, since: float = 0.0) -> list[PeriodTotal]:
    return totals_by_period(store, "day", since)


def spend_span(store: Store) -> tuple[float, float] | None:
    """The first and last call's time, or None for an empty ledger."""
    row = store.query_one("SELECT MIN(ts), MAX(ts) FROM ledger")
    if row is None or row[0] is None:
        return None
    return float(row[0]), float(row[1])


def spend_by_bucket(store: Store, start: float, size: float) -> list[tuple[int, str, int]]:
    """``(bucket index, purpose, tokens)`` in buckets of ``size`` seconds from ``start``,
    oldest first: the loop's spending over time at any resolution, in one grouped query."""
    rows = store.query(
        "SELECT CAST((ts - ?) / ? AS INTEGER) AS b, purpose, "
        "SUM(prompt_tokens + completion_tokens) FROM ledger GROUP BY b, purpose ORDER BY b",
        (start, size),
    )
    return [(int(r[0]), str(r[1]), int(r[2])) for r in rows]


def window_charges(
    store: Store, since: float, purpose: Purpose | None = None
) -> list[tuple[float, int]]:
    """``(ts, tokens)`` of every call after ``since``, oldest first: when does a window reopen."""
    if purpose is None:
        rows = store.query(
            "SELECT ts, prompt_tokens + completion_tokens FROM ledger WHERE ts > ? ORDER BY ts",
            (since,),
        )
    else:
        rows = store.query(
            "SELECT ts, prompt_tokens + completion_tokens FROM ledger"
            " WHERE ts > ? AND purpose = ? ORDER BY ts",
            (since, purpose),
        )
    return [(float(r[0]), int(r[1])) for r in rows]


@dataclass(frozen=True)
class WindowSums:
    """Tokens in the rolling hour and day (all purposes) and the proposer's day, and the
    newest row id they include."""

    last_id: int
    hour: int
    day: int
    proposer: int


def window_sums(store: Store, *, hour_since: float, day_since: float) -> WindowSums:
    row = store.query_one(_WINDOWS_SQL, {"hour": hour_since, "day": day_since})
    assert row is not None  # an aggregate always returns one row
    return WindowSums(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def rows_after(store: Store, last_id: int) -> list[tuple[int, float, str, int]]:
    """``(id, ts, purpose, tokens)`` of the rows newer than ``last_id``, oldest first."""
    return [
        (int(r[0]), float(r[1]), str(r[2]), int(r[3]))
        for r in store.query(_NEW_ROWS_SQL, (last_id,))
    ]


def run_and_task_totals(store: Store, run_id: str, task_id: str | None) -> tuple[int, int]:
    """Tokens spent by ``task_id`` within run ``run_id``, and by the whole run."""
    row = store.query_one(_RUN_SQL, {"run": run_id, "task": task_id})
    assert row is not None  # an aggregate always returns one row
    return int(row[0]), int(row[1])


def attribute_run(store: Store, run_id: str, candidate_id: int) -> None:
    """Charge a run's calls (a proposal) to the candidate it became."""
    with store.tx() as conn:
        conn.execute("UPDATE ledger SET candidate_id=? WHERE run_id=?", (candidate_id, run_id))
