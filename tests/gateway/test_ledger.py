"""The token ledger: rows in, totals out, by task, run, candidate, version, window and period."""

from __future__ import annotations

import pytest

from daemon.gateway import ledger
from daemon.gateway.ledger import Charge, PeriodTotal, Spent
from daemon.providers.base import Usage
from daemon.store import Store

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC, on an hour boundary
HOUR, DAY = 3600.0, 86400.0


def _use(prompt: int, completion: int) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def test_spending_by_task_run_candidate_and_version(store: Store) -> None:
    solve = Charge("local:m", "solve", run_id="r1", task_id="t1", candidate_id=7, version_id=3)
    ledger.record(store, solve, _use(100, 10), ts=T0)
    ledger.record(store, solve, _use(50, 5), ts=T0 + 1)
    other_task = Charge("local:m", "solve", run_id="r1", task_id="t2", candidate_id=7, version_id=3)
    ledger.record(store, other_task, _use(30, 3), ts=T0 + 2)
    propose = Charge("local:m", "propose", version_id=3)
    ledger.record(store, propose, _use(200, 400), ts=T0 + 3)

    assert ledger.spent_by_task(store, "r1", "t1") == Spent(150, 15, 2)
    assert ledger.spent_by_task(store, "r1", "t1").total == 165
    assert ledger.spent_by_run(store, "r1") == Spent(180, 18, 3)
    assert ledger.spent_by_candidate(store, 7) == Spent(180, 18, 3)
    assert ledger.spent_by_candidate(store, 7, "propose") == Spent()
    assert ledger.spent_by_version(store, 3).total == 798
    assert ledger.spent_by_version(store, 3, "propose") == Spent(200, 400, 1)
    assert ledger.spent_by_run(store, "nope") == Spent()


def test_rolling_windows_and_purposes(store: Store) -> None:
    ledger.record(store, Charge("a:b", "solve"), _use(10, 0), ts=T0)
    ledger.record(store, Charge("a:b", "judge"), _use(20, 0), ts=T0 + HOUR)
    ledger.record(store, Charge("a:b", "propose"), _use(40, 0), ts=T0 + 2 * HOUR)
    assert ledger.spent_since(store, T0 - 1).total == 70
    assert ledger.spent_since(store, T0).total == 60  # the window excludes its start
    assert ledger.spent_since(store, T0 - 1, "propose").total == 40
    assert ledger.window_charges(store, T0 - 1) == [(T0, 10), (T0 + HOUR, 20), (T0 + 2 * HOUR, 40)]
    assert ledger.window_charges(store, T0 - 1, "judge") == [(T0 + HOUR, 20)]


def test_totals_by_hour_and_day(store: Store) -> None:
    charge = Charge("a:b", "solve")
    for ts, tokens in [(T0 + 5, 1), (T0 + 3599, 2), (T0 + HOUR, 4), (T0 + DAY, 8)]:
        ledger.record(store, charge, _use(tokens, 0), ts=ts)
    assert ledger.totals_by_hour(store) == [
        PeriodTotal(T0, Spent(3, 0, 2)),
        PeriodTotal(T0 + HOUR, Spent(4, 0, 1)),
        PeriodTotal(T0 + DAY, Spent(8, 0, 1)),
    ]
    day_start = T0 - T0 % DAY
    assert ledger.totals_by_day(store) == [
        PeriodTotal(day_start, Spent(7, 0, 3)),
        PeriodTotal(day_start + DAY, Spent(8, 0, 1)),
    ]
    assert ledger.totals_by_hour(store, since=T0 + HOUR) == ledger.totals_by_hour(store)[1:]


def test_totals_by_candidate_and_version(store: Store) -> None:
    ledger.record(store, Charge("a:b", "solve", candidate_id=1, version_id=10), _use(1, 1))
    ledger.record(store, Charge("a:b", "solve", candidate_id=2, version_id=10), _use(2, 2))
    ledger.record(store, Charge("a:b", "propose"), _use(5, 5))
    assert ledger.totals_by_candidate(store) == {1: Spent(1, 1, 1), 2: Spent(2, 2, 1)}
    assert ledger.totals_by_version(store) == {10: Spent(3, 3, 2)}


def test_a_connection_joins_the_callers_transaction(store: Store) -> None:
    charge = Charge("a:b", "solve", run_id="r")
    with pytest.raises(RuntimeError), store.tx() as conn:
        ledger.record(conn, charge, _use(5, 5))
        raise RuntimeError("the surrounding state change failed")
    assert ledger.spent_by_run(store, "r") == Spent()
    store.run(lambda conn: ledger.record(conn, charge, _use(5, 5)))
    assert ledger.spent_by_run(store, "r") == Spent(5, 5, 1)
