"""Owner of the ``candidates`` table: every patch the loop or a user proposed, with its
state, stage and verdict.

States: ``proposed`` -> ``evaluating`` -> ``rejected`` or (through a promotion only)
``accepted``; ``interrupted`` when harnessd stopped mid-evaluation (it may be evaluated
again). ``accepted`` and ``rejected`` are final.

With the review step on (``[gates.review]``), a candidate that passed every gate goes from
``evaluating`` to ``awaiting_review`` (:func:`hold_for_review`), and only a person's decision
moves it on: an approval is a promotion (:func:`mark_accepted` with the approval, in the
promotion's transaction), a rejection is :func:`reject_reviewed`. Neither an evaluation nor
a restart's repair touches an awaiting candidate.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from daemon.errors import LineageError, NotAwaitingReview, UnknownRef
from daemon.lineage.records import (
    FINAL_STATES,
    Candidate,
    CandidateSource,
    CandidateState,
    NewCandidate,
    Review,
)
from daemon.store import Store
from daemon.verdict import Stage, Verdict

ACCEPTED, AWAITING_REVIEW = CandidateState.ACCEPTED, CandidateState.AWAITING_REVIEW


def _check_state(state: CandidateState) -> None:
    if state not in set(CandidateState):
        states = [s.value for s in CandidateState]
        raise LineageError(f"unknown candidate state '{state}' (one of {states})")
    if state == ACCEPTED:
        raise LineageError("a candidate becomes accepted only through promote()")
    if state == AWAITING_REVIEW:
        raise LineageError("a candidate awaits review only through hold_for_review()")


def _verdict_json(verdict: Verdict | None) -> str | None:
    return None if verdict is None else verdict.model_dump_json()


def insert_candidate(
    store: Store,
    new: NewCandidate,
    *,
    state: CandidateState,
    stage: Stage,
    verdict: Verdict | None,
) -> int:
    try:
        source = CandidateSource(new.source)
    except ValueError:
        sources = [s.value for s in CandidateSource]
        raise LineageError(
            f"candidate source must be one of {sources}, not '{new.source}'"
        ) from None
    _check_state(state)
    now = time.time()
    with store.tx() as conn:
        parent = conn.execute("SELECT 1 FROM versions WHERE id = ?", (new.parent_id,)).fetchone()
        if parent is None:
            raise LineageError(f"candidate parent version {new.parent_id} does not exist")
        if new.base_id is not None:
            base = conn.execute(
                "SELECT parent_version_id FROM candidates WHERE id = ?", (new.base_id,)
            ).fetchone()
            # The recorded patch is the whole change from the parent version, so a base
            # must be a candidate of that same version.
            if base is None or base["parent_version_id"] != new.parent_id:
                raise LineageError(
                    f"candidate base c{new.base_id} is not a candidate of version "
                    f"{new.parent_id}; a candidate builds only on its own version's candidates"
                )
        cursor = conn.execute(
            "INSERT INTO candidates(parent_version_id, created, updated, source, proposer_model, "
            "rationale, patch, raw, state, stage, verdict, base_candidate_id, duplicate_of) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                new.parent_id,
                now,
                now,
                source.value,
                new.proposer_model,
                new.rationale,
                new.patch,
                new.raw,
                state,
                stage,
                _verdict_json(verdict),
                new.base_id,
                new.duplicate_of,
            ),
        )
        return int(cursor.lastrowid or 0)


def update_candidate(
    store: Store,
    candidate_id: int,
    state: CandidateState,
    stage: Stage,
    verdict: Verdict | None,
) -> None:
    _check_state(state)
    with store.tx() as conn:
        row = conn.execute("SELECT state FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise LineageError(f"no candidate {candidate_id} in the lineage")
        if row["state"] in FINAL_STATES:
            raise LineageError(f"candidate {candidate_id} is already {row['state']}")
        if row["state"] == AWAITING_REVIEW:
            raise NotAwaitingReview(
                f"candidate c{candidate_id} awaits review: only 'harnessctl approve "
                f"c{candidate_id}' or 'harnessctl reject c{candidate_id} --reason ...' decide it"
            )
        conn.execute(
            "UPDATE candidates SET state = ?, stage = ?, updated = ?, "
            "verdict = COALESCE(?, verdict) WHERE id = ?",
            (state, stage, time.time(), _verdict_json(verdict), candidate_id),
        )


def load_candidate(store: Store, candidate_id: int) -> Candidate:
    row = store.query_one("SELECT * FROM candidates WHERE id = ?", (candidate_id,))
    if row is None:
        raise UnknownRef(f"no candidate c{candidate_id} in the lineage ('harnessctl lineage')")
    return Candidate.from_row(row)


def list_candidates(
    store: Store, state: CandidateState | None, parent_id: int | None, limit: int | None
) -> list[Candidate]:
    sql = "SELECT * FROM candidates WHERE 1=1"
    params: list[Any] = []
    if state is not None:
        sql += " AND state = ?"
        params.append(state)
    if parent_id is not None:
        sql += " AND parent_version_id = ?"
        params.append(parent_id)
    sql += " ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [Candidate.from_row(r) for r in store.query(sql, tuple(params))]


def counts_by_parent(store: Store) -> dict[int, dict[CandidateState, int]]:
    """``{parent version id: {state: number of candidates}}``."""
    counts: dict[int, dict[CandidateState, int]] = {}
    for row in store.query(
        "SELECT parent_version_id AS p, state, COUNT(*) AS n FROM candidates "
        "GROUP BY parent_version_id, state"
    ):
        counts.setdefault(row["p"], {})[CandidateState(row["state"])] = row["n"]
    return counts


def counts_by_state_and_stage(store: Store) -> dict[tuple[str, str], int]:
    """``{(state, stage): number of candidates}``: where each candidate is, or was decided."""
    rows = store.query(
        "SELECT state, stage, COUNT(*) AS n FROM candidates GROUP BY state, stage ORDER BY 1, 2"
    )
    return {(str(r["state"]), str(r["stage"])): int(r["n"]) for r in rows}


def mark_accepted(
    conn: sqlite3.Connection,
    candidate_id: int,
    verdict: Verdict,
    now: float,
    approval: Review | None = None,
) -> None:
    """The candidate's final state on promotion; joins the promotion's transaction. A
    candidate awaiting review is promoted only with a person's ``approval``, and one that
    does not await review never with one."""
    row = conn.execute("SELECT state FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
    awaiting = row is not None and row["state"] == AWAITING_REVIEW
    if awaiting and approval is None:
        raise NotAwaitingReview(
            f"candidate c{candidate_id} awaits review: 'harnessctl approve c{candidate_id}' "
            "promotes it"
        )
    if approval is not None and not awaiting:
        state = row["state"] if row is not None else "missing"
        raise NotAwaitingReview(f"candidate c{candidate_id} does not await review (it is {state})")
    conn.execute(
        "UPDATE candidates SET state = ?, stage = ?, updated = ?, verdict = ? WHERE id = ?",
        (ACCEPTED, Stage.PROMOTED, now, _verdict_json(verdict), candidate_id),
    )
    if approval is not None:
        _record_decision(conn, candidate_id, approval, now)


def _record_decision(
    conn: sqlite3.Connection, candidate_id: int, review: Review, now: float
) -> None:
    if not (review.reviewer or "").strip():
        raise LineageError("a review decision needs the reviewer's name")
    conn.execute(
        "UPDATE candidates SET review_decided = ?, reviewer = ?, review_reason = ? WHERE id = ?",
        (review.decided or now, review.reviewer, review.reason, candidate_id),
    )


def _awaiting(conn: sqlite3.Connection, candidate_id: int) -> None:
    row = conn.execute("SELECT state FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
    if row is None:
        raise UnknownRef(f"no candidate c{candidate_id} in the lineage ('harnessctl lineage')")
    if row["state"] != AWAITING_REVIEW:
        raise NotAwaitingReview(
            f"candidate c{candidate_id} does not await review (it is {row['state']}); "
            "'harnessctl review' lists those that do"
        )


def hold_for_review(store: Store, candidate_id: int, verdict: Verdict) -> None:
    """``evaluating`` -> ``awaiting_review``, with the gates' (accepting) verdict."""
    if verdict.decision != "accept":
        raise LineageError(
            f"candidate c{candidate_id}: only a candidate that passed every gate awaits review"
        )
    now = time.time()
    with store.tx() as conn:
        row = conn.execute("SELECT state FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise LineageError(f"no candidate {candidate_id} in the lineage")
        if row["state"] != CandidateState.EVALUATING:
            raise LineageError(
                f"candidate c{candidate_id} is {row['state']}; only one being evaluated can "
                "be held for review"
            )
        conn.execute(
            "UPDATE candidates SET state = ?, stage = ?, updated = ?, verdict = ?, "
            "review_held = ? WHERE id = ?",
            (AWAITING_REVIEW, Stage.REVIEW, now, _verdict_json(verdict), now, candidate_id),
        )


def reject_reviewed(store: Store, candidate_id: int, review: Review) -> None:
    """``awaiting_review`` -> ``rejected`` by a person; the gates' verdict stays as it was."""
    if not review.reason.strip():
        raise LineageError(
            f"rejecting c{candidate_id} needs a reason (--reason TEXT): it goes into the lineage"
        )
    now = time.time()
    with store.tx() as conn:
        _awaiting(conn, candidate_id)
        conn.execute(
            "UPDATE candidates SET state = ?, stage = ?, updated = ? WHERE id = ?",
            (CandidateState.REJECTED, Stage.REVIEW, now, candidate_id),
        )
        _record_decision(conn, candidate_id, review, now)


def interrupt_evaluating(store: Store) -> list[int]:
    """Mark every candidate still ``evaluating`` as ``interrupted``; returns their ids."""
    evaluating = CandidateState.EVALUATING
    with store.tx() as conn:
        ids = [
            int(row["id"])
            for row in conn.execute("SELECT id FROM candidates WHERE state = ?", (evaluating,))
        ]
        conn.execute(
            "UPDATE candidates SET state = ?, updated = ? WHERE state = ?",
            (CandidateState.INTERRUPTED, time.time(), evaluating),
        )
    return ids
