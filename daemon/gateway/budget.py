"""Token budgets from the policy's ``[budget]`` table, checked before every model call.

The rule: a call is refused (:class:`~daemon.errors.BudgetExceeded`) when any scope that
applies has already spent its limit (``spent >= limit``), and, before it is sent, when its
prompt (counted by the provider or estimated, see ``Provider.prompt_tokens``) alone does
not fit what its task or evaluation has left. Otherwise the call's ``max_tokens`` is capped
to the smallest allowance left after the prompt. So a task or evaluation overshoots only by
the error of a prompt estimate, and a daemon-wide window by at most one call's prompt.
Calls in flight hold a reservation of their prompt and capped ``max_tokens``, so concurrent
calls cannot together overrun a scope either.

==========  ============================  ===========================================
scope       applies to                    limit
==========  ============================  ===========================================
task        calls with run_id and task_id ``tokens_per_task``
eval        calls with a run_id           ``tokens_per_eval`` (one evaluation run)
proposer    purpose ``propose``           ``proposer_tokens_per_day``, rolling 24 h
hour        every call                    ``tokens_per_hour``, rolling 60 min
day         every call                    ``tokens_per_day``, rolling 24 h
==========  ============================  ===========================================

The policy is read through ``policy_getter`` on every check, so a reloaded policy applies
to the next call; except that an evaluation may hold its calls to the task and eval limits
of the policy it started under (``run_budget``: run id -> those budgets), so one
evaluation's results are measured under one budget. The rolling windows are kept as
running sums (see :class:`_RollingSums`), so a check costs the same on a ledger of ten rows
or of a hundred thousand.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from daemon.config.policy import BudgetPolicy
from daemon.errors import BudgetExceeded
from daemon.gateway import ledger
from daemon.gateway.ledger import Charge
from daemon.store import Store

Scope = Literal["task", "eval", "proposer", "hour", "day"]
WindowScope = Literal["hour", "day", "proposer"]
HOUR = 3600.0
DAY = 86400.0

# A full sum over a day of rows costs time in proportion to them (8 ms for 10,000 rows on
# the reference machine), so it is redone at most this often; in between, new rows are added.
REBASE_S = 30.0
# A refusal is confirmed by a full sum unless the last one is at most this old.
CONFIRM_S = 1.0


@dataclass(frozen=True)
class Grant:
    """A reservation for one call in flight: a prompt of about ``prompt_tokens`` and at most
    ``max_tokens`` generated; both are held against the scopes until it settles."""

    key: int
    charge: Charge
    max_tokens: int
    prompt_tokens: int = 0

    @property
    def held(self) -> int:
        return self.max_tokens + self.prompt_tokens


@dataclass(frozen=True)
class WindowUsage:
    """One daemon-wide rolling window: spending, limit, and when it reopens if spent."""

    scope: WindowScope
    spent: int
    limit: int
    reopens_at: float | None  # Unix time; None while the window is open

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit


@dataclass(frozen=True)
class WindowState:
    """What the improvement loop needs to know to pause and resume."""

    windows: tuple[WindowUsage, ...]

    @property
    def exhausted(self) -> tuple[WindowUsage, ...]:
        return tuple(w for w in self.windows if w.exhausted)

    @property
    def paused(self) -> bool:
        return bool(self.exhausted)

    @property
    def resume_at(self) -> float | None:
        """When every exhausted window has reopened (None when none is exhausted)."""
        times = [w.reopens_at for w in self.exhausted if w.reopens_at is not None]
        return max(times) if times else None


def _in_scope(scope: Scope, grant: Charge, charge: Charge) -> bool:
    if scope == "task":
        return grant.run_id == charge.run_id and grant.task_id == charge.task_id
    if scope == "eval":
        return grant.run_id == charge.run_id
    if scope == "proposer":
        return grant.purpose == "propose"
    return True


def _reopens_at(charges: list[tuple[float, int]], spent: int, limit: int, span: float) -> float:
    """When enough of the oldest charges have aged out of the window to bring it under limit."""
    dropped = 0
    for ts, tokens in charges:
        dropped += tokens
        if spent - dropped < limit:
            return ts + span
    return (charges[-1][0] if charges else time.time()) + span


class _RollingSums:
    """Hour, day and proposer-day spending, kept current from the ledger's new rows.

    Between full sums, rows that age out of a window are still counted, so the figures can
    be high but never low: a budget may cap a call a little early, and a refusal is
    confirmed with a fresh full sum before it is made. Any writer's rows are seen, because
    new rows are found by id, not reported by the writer. Not thread-safe: the guard locks.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._base_at: float | None = None
        self._last_id = 0
        self._sums: dict[WindowScope, int] = {"hour": 0, "day": 0, "proposer": 0}

    def get(self, now: float, *, fresh: bool = False) -> dict[WindowScope, int]:
        base = self._base_at
        stale = base is None or now < base or now - base > (CONFIRM_S if fresh else REBASE_S)
        if stale:
            self._rebase(now)
        else:
            self._add_new_rows(now)
        return dict(self._sums)

    def _rebase(self, now: float) -> None:
        sums = ledger.window_sums(self._store, hour_since=now - HOUR, day_since=now - DAY)
        self._last_id = sums.last_id
        self._sums = {"hour": sums.hour, "day": sums.day, "proposer": sums.proposer}
        self._base_at = now

    def _add_new_rows(self, now: float) -> None:
        for row_id, ts, purpose, tokens in ledger.rows_after(self._store, self._last_id):
            self._last_id = int(row_id)
            if ts > now - HOUR:
                self._sums["hour"] += int(tokens)
            if ts > now - DAY:
                self._sums["day"] += int(tokens)
                if purpose == "propose":
                    self._sums["proposer"] += int(tokens)


class BudgetGuard:
    """Decides how many tokens the next call may use; thread-safe."""

    def __init__(
        self,
        store: Store,
        policy_getter: Callable[[], BudgetPolicy],
        *,
        run_budget: Callable[[str], BudgetPolicy | None] = lambda run_id: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._policy = policy_getter
        self._run_budget = run_budget
        self._clock = clock
        # Held across the ledger read so two callers cannot both claim the same allowance.
        self._reserve_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: dict[int, Grant] = {}
        self._keys = itertools.count(1)
        self._windows_lock = threading.Lock()
        self._windows = _RollingSums(store)

    def now(self) -> float:
        return self._clock()

    def allowance(self, charge: Charge) -> int:
        """Most completion tokens the next call may use; raises BudgetExceeded when spent."""
        return self._left(charge, self._pending_snapshot())

    def reserve(self, charge: Charge, max_tokens: int, prompt_tokens: int = 0) -> Grant:
        """Check the budgets and hold ``prompt_tokens`` plus the capped ``max_tokens`` for
        one call in flight.

        ``prompt_tokens`` is the provider's count or estimate of the request's prompt. A
        request whose prompt alone does not fit what its task or evaluation has left is
        refused before it is sent, so no run is overrun by a huge prompt. The daemon-wide
        windows keep their rule (refused once spent; otherwise the completion is capped and
        only a prompt can overshoot), so the loop pauses on them exactly when they are spent.
        """
        with self._reserve_lock:
            # Pending before ledger: a call that settles in between is then counted twice
            # (safe) rather than not at all (see MeteredModel: record, then release).
            pending = self._pending_snapshot()
            left, _, _ = self._left_and_scope(charge, pending)
            run = self._run_left(charge, pending)
            if run is not None and prompt_tokens >= run[0]:
                run_left, scope, limit = run
                # Reported as the scope's spending with this prompt added, against its limit.
                raise BudgetExceeded(scope, limit - run_left + prompt_tokens, limit)
            completion = max(1, min(max_tokens, left - prompt_tokens))
            grant = Grant(next(self._keys), charge, completion, prompt_tokens)
            with self._pending_lock:
                self._pending[grant.key] = grant
            return grant

    def _run_left(self, charge: Charge, pending: list[Grant]) -> tuple[int, Scope, int] | None:
        """What the call's task or evaluation has left (the tighter), or None outside a run."""
        if charge.run_id is None:
            return None
        policy = self._run_budget(charge.run_id) or self._policy()
        task_spent, run_spent = ledger.run_and_task_totals(
            self._store, charge.run_id, charge.task_id
        )
        scopes: list[tuple[Scope, int, int]] = [("eval", run_spent, policy.tokens_per_eval)]
        if charge.task_id is not None:
            scopes.insert(0, ("task", task_spent, policy.tokens_per_task))
        found = [
            (
                limit - spent - sum(g.held for g in pending if _in_scope(s, g.charge, charge)),
                s,
                limit,
            )
            for s, spent, limit in scopes
        ]
        return min(found)

    def release(self, grant: Grant) -> None:
        """Drop a reservation (after the call's usage is in the ledger, or the call failed)."""
        with self._pending_lock:
            self._pending.pop(grant.key, None)

    def in_flight(self) -> int:
        with self._pending_lock:
            return len(self._pending)

    def window_state(self) -> WindowState:
        """The daemon-wide windows (hour, day, proposer): spent or not, and when they reopen."""
        policy = self._policy()
        now = self._clock()
        sums = self._window_sums(now)
        specs: list[tuple[WindowScope, float, int, Literal["propose"] | None]] = [
            ("hour", HOUR, policy.tokens_per_hour, None),
            ("day", DAY, policy.tokens_per_day, None),
            ("proposer", DAY, policy.proposer_tokens_per_day, "propose"),
        ]
        windows = []
        for scope, span, limit, purpose in specs:
            spent, reopens = sums[scope], None
            if spent >= limit:  # the running sum may be high: count this window exactly
                charges = ledger.window_charges(self._store, now - span, purpose)
                spent = sum(tokens for _, tokens in charges)
                if spent >= limit:
                    reopens = _reopens_at(charges, spent, limit, span)
            windows.append(WindowUsage(scope, spent, limit, reopens))
        return WindowState(tuple(windows))

    def _pending_snapshot(self) -> list[Grant]:
        with self._pending_lock:
            return list(self._pending.values())

    def _window_sums(self, now: float, *, fresh: bool = False) -> dict[WindowScope, int]:
        with self._windows_lock:
            return self._windows.get(now, fresh=fresh)

    def _left(self, charge: Charge, pending: list[Grant]) -> int:
        return self._left_and_scope(charge, pending)[0]

    def _left_and_scope(self, charge: Charge, pending: list[Grant]) -> tuple[int, Scope, int]:
        """What the tightest scope has left, which scope that is, and its limit."""
        try:
            return self._left_from(charge, pending, self._window_sums(self._clock()))
        except BudgetExceeded as exc:
            if exc.scope in ("task", "eval"):
                raise  # counted exactly from the run's rows
            # Confirm with an exact count; it raises again if the window is really spent.
            return self._left_from(charge, pending, self._window_sums(self._clock(), fresh=True))

    def _left_from(
        self, charge: Charge, pending: list[Grant], windows: dict[WindowScope, int]
    ) -> tuple[int, Scope, int]:
        policy = self._policy()
        scopes: list[tuple[Scope, int, int]] = []
        if charge.run_id is not None:
            run = self._run_budget(charge.run_id) or policy
            task_spent, run_spent = ledger.run_and_task_totals(
                self._store, charge.run_id, charge.task_id
            )
            if charge.task_id is not None:
                scopes.append(("task", task_spent, run.tokens_per_task))
            scopes.append(("eval", run_spent, run.tokens_per_eval))
        if charge.purpose == "propose":
            scopes.append(("proposer", windows["proposer"], policy.proposer_tokens_per_day))
        scopes.append(("hour", windows["hour"], policy.tokens_per_hour))
        scopes.append(("day", windows["day"], policy.tokens_per_day))
        tightest: tuple[int, Scope, int] | None = None
        for scope, spent, limit in scopes:
            spent += sum(g.held for g in pending if _in_scope(scope, g.charge, charge))
            if spent >= limit:
                raise BudgetExceeded(scope, spent, limit)
            if tightest is None or limit - spent < tightest[0]:
                tightest = (limit - spent, scope, limit)
        assert tightest is not None  # hour and day always apply
        return tightest
