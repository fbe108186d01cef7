"""BudgetGuard: every scope, the refuse-at-limit rule, reservations, rolling windows."""

from __future__ import annotations

import pytest
from metering_helpers import Clock, Policies

from daemon.errors import BudgetExceeded
from daemon.gateway import ledger
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.providers.base import Usage
from daemon.store import Store

pytestmark = pytest.mark.unit

HOUR, DAY = 3600.0, 86400.0
SOLVE = Charge("local:m", "solve", run_id="run-1", task_id="task-1")
PROPOSE = Charge("local:m", "propose")


def _spend(store: Store, charge: Charge, tokens: int, ts: float) -> None:
    ledger.record(store, charge, Usage(prompt_tokens=tokens, completion_tokens=0), ts=ts)


def _guard(store: Store, policies: Policies, clock: Clock) -> BudgetGuard:
    return BudgetGuard(store, policies, clock=clock)


def _refused(guard: BudgetGuard, charge: Charge) -> BudgetExceeded:
    with pytest.raises(BudgetExceeded) as caught:
        guard.allowance(charge)
    return caught.value


def test_allowance_is_the_smallest_remainder(
    store: Store, policies: Policies, clock: Clock
) -> None:
    policies.set(tokens_per_task=1000, tokens_per_eval=5000, tokens_per_hour=10_000)
    guard = _guard(store, policies, clock)
    assert guard.allowance(SOLVE) == 1000
    _spend(store, SOLVE, 300, clock.now)
    assert guard.allowance(SOLVE) == 700
    # Another task of the same run: its own task budget, but the run's spending counts.
    policies.set(tokens_per_eval=800)
    assert guard.allowance(Charge("local:m", "solve", run_id="run-1", task_id="task-2")) == 500


def test_task_scope_refuses_at_the_limit(store: Store, policies: Policies, clock: Clock) -> None:
    policies.set(tokens_per_task=100)
    guard = _guard(store, policies, clock)
    _spend(store, SOLVE, 99, clock.now)
    assert guard.allowance(SOLVE) == 1  # one token left is still a call
    _spend(store, SOLVE, 1, clock.now)
    refused = _refused(guard, SOLVE)
    assert (refused.scope, refused.spent, refused.limit) == ("task", 100, 100)
    # Other tasks are not affected.
    assert guard.allowance(Charge("local:m", "solve", run_id="run-1", task_id="task-2")) == 100


def test_eval_scope_covers_every_task_of_a_run(
    store: Store, policies: Policies, clock: Clock
) -> None:
    policies.set(tokens_per_task=1000, tokens_per_eval=1500)
    guard = _guard(store, policies, clock)
    for task in ("a", "b"):
        _spend(store, Charge("local:m", "solve", run_id="run-1", task_id=task), 800, clock.now)
    refused = _refused(guard, Charge("local:m", "solve", run_id="run-1", task_id="c"))
    assert (refused.scope, refused.spent) == ("eval", 1600)
    assert guard.allowance(Charge("local:m", "solve", run_id="run-2", task_id="a")) == 1000


def test_proposer_scope_only_limits_proposals(
    store: Store, policies: Policies, clock: Clock
) -> None:
    policies.set(proposer_tokens_per_day=500)
    guard = _guard(store, policies, clock)
    _spend(store, PROPOSE, 500, clock.now - DAY + 10)
    assert _refused(guard, PROPOSE).scope == "proposer"
    assert guard.allowance(SOLVE) == 4000
    clock.now += 10  # the proposal ages out of the rolling day
    assert guard.allowance(PROPOSE) == 500


@pytest.mark.parametrize(("scope", "span"), [("hour", HOUR), ("day", DAY)])
def test_daemon_wide_windows_roll(
    store: Store, policies: Policies, clock: Clock, scope: str, span: float
) -> None:
    other = "tokens_per_day" if scope == "hour" else "tokens_per_hour"
    policies.set(**{f"tokens_per_{scope}": 1000, other: 10**9, "tokens_per_task": 10**9})
    guard = _guard(store, policies, clock)
    judge = Charge("local:m", "judge")
    _spend(store, judge, 600, clock.now - span + 100)
    _spend(store, judge, 400, clock.now - 50)
    refused = _refused(guard, SOLVE)
    assert (refused.scope, refused.spent, refused.limit) == (scope, 1000, 1000)

    state = guard.window_state()
    (spent,) = state.exhausted
    assert spent.scope == scope and state.paused
    # Reopens when the oldest charge leaves the window: 1000 - 600 < 1000.
    assert spent.reopens_at == clock.now + 100
    assert state.resume_at == clock.now + 100
    clock.now += 101
    assert not guard.window_state().paused
    assert guard.allowance(SOLVE) == 600


def test_window_state_reports_every_window(store: Store, policies: Policies, clock: Clock) -> None:
    policies.set(tokens_per_hour=100, tokens_per_day=1000, proposer_tokens_per_day=50)
    guard = _guard(store, policies, clock)
    _spend(store, PROPOSE, 30, clock.now - 2 * HOUR)
    _spend(store, PROPOSE, 30, clock.now - 1)
    state = guard.window_state()
    assert [(w.scope, w.spent, w.limit, w.exhausted) for w in state.windows] == [
        ("hour", 30, 100, False),
        ("day", 60, 1000, False),
        ("proposer", 60, 50, True),
    ]
    # Dropping the older 30 brings the proposer window to 30 < 50.
    assert state.resume_at == clock.now - 2 * HOUR + DAY


def test_reservations_hold_allowance_for_calls_in_flight(
    store: Store, policies: Policies, clock: Clock
) -> None:
    policies.set(tokens_per_task=1000, tokens_per_hour=1500)
    guard = _guard(store, policies, clock)
    first = guard.reserve(SOLVE, 600)
    assert first.max_tokens == 600
    second = guard.reserve(SOLVE, 600)
    assert second.max_tokens == 400  # capped to what the first left
    refused = _refused(guard, SOLVE)
    assert (refused.scope, refused.spent) == ("task", 1000)
    other = Charge("local:m", "solve", run_id="run-2", task_id="x")
    assert guard.allowance(other) == 500  # the hour sees both reservations
    guard.release(first)
    guard.release(second)
    assert guard.in_flight() == 0
    assert guard.allowance(SOLVE) == 1000


def test_a_reloaded_policy_applies_to_the_next_call(
    store: Store, policies: Policies, clock: Clock
) -> None:
    guard = _guard(store, policies, clock)
    _spend(store, SOLVE, 500, clock.now)
    assert guard.allowance(SOLVE) == 3500
    policies.set(tokens_per_task=400)
    assert _refused(guard, SOLVE).scope == "task"


def test_calls_outside_a_run_have_no_task_or_eval_budget(
    store: Store, policies: Policies, clock: Clock
) -> None:
    policies.set(tokens_per_task=10, tokens_per_eval=10, tokens_per_hour=5000)
    guard = _guard(store, policies, clock)
    assert guard.allowance(Charge("local:m", "judge")) == 5000
    assert guard.allowance(Charge("local:m", "solve", run_id="run-9")) == 10  # eval only


def test_running_window_sums_see_every_writer_and_never_undercount(
    store: Store, policies: Policies, clock: Clock
) -> None:
    policies.set(tokens_per_hour=1000, tokens_per_task=10**6)
    guard = _guard(store, policies, clock)
    assert guard.allowance(SOLVE) == 1000
    # Written straight into the ledger (not through the guard): seen by the next check.
    _spend(store, Charge("local:m", "judge"), 300, clock.now - HOUR + 5)
    assert guard.allowance(SOLVE) == 700
    # Once that row ages out, the running sum still counts it until the next full count
    # (the call is capped a little early, never late)...
    clock.now += 10
    assert guard.allowance(SOLVE) == 700
    # ...but a refusal is only ever made on an exact count.
    _spend(store, Charge("local:m", "judge"), 800, clock.now)
    assert guard.allowance(SOLVE) == 200
    clock.now += 60
    assert guard.allowance(SOLVE) == 200
