"""Owner of the ``heldout_budget`` and ``heldout_tests`` tables: the lineage's alpha ledger.

``heldout_budget`` holds one row: the lineage-wide settings (alpha, schedules, held-out pool,
block size) pinned when the first candidate reached the held-out stage; the guarantee is
about one fixed procedure, so later policy edits of these do not apply to this lineage.
``heldout_tests`` holds one row per candidate that reached the held-out stage, in order:
its epoch, position, alpha and block, and how the test ended (``running`` while it runs,
then ``promoted``, ``not_promoted``, or ``void`` when harnessd stopped mid-test). With the
review step on, a test whose candidate passed every gate is ``awaiting_review`` until a
person decides: then ``promoted`` (approved) or ``not_promoted`` (rejected: the test has
spent its alpha all the same). No other test starts while one awaits review, since its
outcome decides the next test's epoch (DESIGN.md, "The review step").

The :class:`~daemon.acceptance.spending.LineageBudget` is rebuilt from these rows, so a
restart resumes with exactly the same alpha accounting. A void test keeps its slot and
counts as not promoted: its alpha is spent, which is always sound (DESIGN.md, "Acceptance").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from daemon.acceptance.spending import LineageBudget, NextTest
from daemon.lineage.records import FINAL_STATES, CandidateState
from daemon.store import Store

TestState = Literal["running", "awaiting_review", "promoted", "not_promoted", "void"]


@dataclass(frozen=True)
class PinnedSettings:
    """The lineage-wide procedure, fixed at the first held-out test."""

    alpha: float
    pool: str  # sha256 of the pool's task ids in their (secret) order
    pool_size: int
    block_size: int
    reuse_block: bool
    budget: dict[str, Any]  # LineageBudget.to_dict() without history

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PinnedSettings:
        data = json.loads(text)
        return cls(
            alpha=float(data["alpha"]),
            pool=str(data["pool"]),
            pool_size=int(data["pool_size"]),
            block_size=int(data["block_size"]),
            reuse_block=bool(data["reuse_block"]),
            budget=dict(data["budget"]),
        )

    def differences(self, other: PinnedSettings) -> list[str]:
        """What ``other`` (the policy's current wish) changes, as 'key: pinned -> wanted'."""
        keys = ("alpha", "pool_size", "block_size", "reuse_block", "pool")
        return [
            f"{k}: {getattr(self, k)} -> {getattr(other, k)}"
            for k in keys
            if getattr(self, k) != getattr(other, k)
        ]


@dataclass(frozen=True)
class HeldoutTest:
    """One candidate's held-out test as recorded."""

    candidate_id: int
    epoch: int
    position: int
    alpha: float
    block_index: int
    reused: bool
    block: str
    state: TestState
    decision: dict[str, Any] | None
    started: float
    finished: float | None


def pinned(store: Store) -> PinnedSettings | None:
    row = store.query_one("SELECT settings FROM heldout_budget WHERE id = 1")
    return None if row is None else PinnedSettings.from_json(row["settings"])


def pin(store: Store, wanted: PinnedSettings) -> PinnedSettings:
    """The pinned settings: ``wanted`` if nothing was pinned yet, else the earlier ones."""
    with store.tx() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO heldout_budget(id, created, settings) VALUES (1, ?, ?)",
            (time.time(), wanted.to_json()),
        )
        row = conn.execute("SELECT settings FROM heldout_budget WHERE id = 1").fetchone()
    return PinnedSettings.from_json(row["settings"])


def _test(row: Any) -> HeldoutTest:
    return HeldoutTest(
        candidate_id=int(row["candidate_id"]),
        epoch=int(row["epoch"]),
        position=int(row["position"]),
        alpha=float(row["alpha"]),
        block_index=int(row["block_index"]),
        reused=bool(row["reused"]),
        block=str(row["block"]),
        state=row["state"],
        decision=json.loads(row["decision"]) if row["decision"] else None,
        started=float(row["started"]),
        finished=row["finished"],
    )


def tests(store: Store) -> list[HeldoutTest]:
    """Every held-out test, in the order they were started."""
    return [_test(r) for r in store.query("SELECT * FROM heldout_tests ORDER BY id")]


def test_of(store: Store, candidate_id: int) -> HeldoutTest | None:
    row = store.query_one("SELECT * FROM heldout_tests WHERE candidate_id = ?", (candidate_id,))
    return None if row is None else _test(row)


def budget(settings: PinnedSettings, history: list[HeldoutTest]) -> LineageBudget:
    """The lineage budget after ``history``; a running, void or awaiting test counts as not
    promoted (an awaiting one is always the last: :func:`awaiting` stops the next test)."""
    items = [
        {
            "epoch": t.epoch,
            "position": t.position,
            "alpha": t.alpha,
            "promoted": t.state == "promoted",
        }
        for t in history
    ]
    return LineageBudget.from_dict({**settings.budget, "history": items})


def start(store: Store, candidate_id: int, test: NextTest, block: str) -> None:
    """Record that ``candidate_id`` is tested now at ``test``'s slot. One test per candidate
    (``candidate_id`` is unique): a second attempt fails rather than spend a second slot."""
    with store.tx() as conn:
        conn.execute(
            "INSERT INTO heldout_tests(candidate_id, epoch, position, alpha, block_index, "
            "reused, block, state, started) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                candidate_id,
                test.epoch,
                test.position,
                test.alpha,
                test.block_index,
                int(test.reused_block),
                block,
                "running",
                time.time(),
            ),
        )


def finish(
    store: Store, candidate_id: int, state: TestState, decision: dict[str, Any] | None
) -> None:
    with store.tx() as conn:
        conn.execute(
            "UPDATE heldout_tests SET state = ?, decision = ?, finished = ? WHERE candidate_id = ?",
            (
                state,
                json.dumps(decision, allow_nan=False) if decision is not None else None,
                time.time(),
                candidate_id,
            ),
        )


def awaiting(store: Store) -> list[int]:
    """The candidates whose test awaits a person's review; while there is one, no test may
    start (its outcome says whether the next test opens a new epoch)."""
    rows = store.query(
        "SELECT candidate_id FROM heldout_tests WHERE state = 'awaiting_review' ORDER BY id"
    )
    return [int(r["candidate_id"]) for r in rows]


def hold(store: Store, candidate_id: int, decision: dict[str, Any] | None) -> None:
    """The test passed and its candidate waits for review: its decision is recorded now."""
    finish(store, candidate_id, "awaiting_review", decision)


def decide_review(store: Store, candidate_id: int, promoted: bool) -> bool:
    """A person decided: the awaiting test becomes ``promoted`` or ``not_promoted`` (its
    decision kept). ``running`` counts as awaiting: a stop fell between the lineage's hold
    and this table's. False if the test was neither (already settled)."""
    state: TestState = "promoted" if promoted else "not_promoted"
    with store.tx() as conn:
        cursor = conn.execute(
            "UPDATE heldout_tests SET state = ?, finished = ? WHERE candidate_id = ? "
            "AND state IN ('awaiting_review', 'running')",
            (state, time.time(), candidate_id),
        )
        return cursor.rowcount > 0


def settle_reviewed(
    store: Store, state_of: Callable[[int], CandidateState]
) -> list[tuple[int, TestState]]:
    """At start-up: a test still ``awaiting_review`` whose candidate was decided (a stop
    fell between the lineage's commit and this table's) takes the decision: ``promoted``
    if the candidate is accepted, ``not_promoted`` if rejected. Tests whose candidate
    still awaits review are left as they are."""
    settled: list[tuple[int, TestState]] = []
    for cid in awaiting(store):
        state = state_of(cid)
        if state in FINAL_STATES:
            promoted = state == CandidateState.ACCEPTED
            decide_review(store, cid, promoted)
            settled.append((cid, "promoted" if promoted else "not_promoted"))
    return settled


def settle_running(
    store: Store, state_of: Callable[[int], CandidateState]
) -> list[tuple[int, TestState]]:
    """At start-up: a test still ``running`` was cut short by a stop or a crash. It becomes
    ``promoted`` if its candidate was in fact promoted (the promotion commits before the
    ledger row is updated), ``awaiting_review`` if its candidate was held for review (the
    hold commits first too), else ``void``. ``state_of`` gives a candidate's lineage state.
    Returns (candidate id, new state) per row."""
    rows = store.query("SELECT candidate_id FROM heldout_tests WHERE state = 'running'")
    settled: list[tuple[int, TestState]] = []
    for row in rows:
        cid = int(row["candidate_id"])
        lineage_state = state_of(cid)
        state: TestState = (
            "promoted"
            if lineage_state == CandidateState.ACCEPTED
            else "awaiting_review"
            if lineage_state == CandidateState.AWAITING_REVIEW
            else "void"
        )
        with store.tx() as conn:
            conn.execute(
                "UPDATE heldout_tests SET state = ?, finished = ? WHERE candidate_id = ? "
                "AND state = 'running'",
                (state, time.time(), cid),
            )
        settled.append((cid, state))
    return settled
