"""The review step in the lineage: awaiting_review, a person's approval or rejection, who
decided, a parent that is no longer live, and all of it across a reopen of the database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from lineage_helpers import (
    FIRST_CANDIDATE_COLUMNS,
    FIRST_VERSIONS_TABLE,
    assert_consistent,
    make_candidate,
)

from daemon.errors import LineageError, NotAwaitingReview, StaleParent
from daemon.lineage import Decider, Lineage, Review
from daemon.store import SCHEMA_VERSION, Store
from daemon.verdict import GateResult, Verdict

pytestmark = pytest.mark.unit

PASSED = Verdict(
    decision="accept",
    stage="panel",
    reason="every gate passed",
    gates=[GateResult(gate="accuracy", passed=True, measured=40.0, threshold=20.0)],
)


def _approval(lineage: Lineage, cid: int, who: str = "alice", why: str = "") -> Review:
    held = lineage.candidate(cid).review
    assert held is not None
    return Review(held=held.held, decided=held.held + 1.0, reviewer=who, reason=why)


def test_a_held_candidate_waits_for_a_person_and_an_approval_promotes_it(
    lineage: Lineage, seed_dir: Path, work: Path, tmp_path: Path
) -> None:
    lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    assert lineage.candidate(cid).decided_by is None  # evaluating: nobody decided yet
    lineage.hold_for_review(cid, PASSED)
    held = lineage.candidate(cid)
    assert (held.state, held.stage, held.decided_by) == ("awaiting_review", "review", None)
    assert held.review is not None and held.review.decided is None
    assert held.verdict == PASSED

    # Nothing but a person's decision moves it on.
    for state in ("evaluating", "rejected", "interrupted"):
        with pytest.raises(NotAwaitingReview, match=f"harnessctl approve c{cid}"):
            lineage.set_candidate(cid, state, "heldout")  # type: ignore[arg-type]
    with pytest.raises(NotAwaitingReview, match="only 'harnessctl approve"):
        lineage.promote(cid, tree, PASSED)  # an automatic promotion
    with pytest.raises(LineageError, match="only through hold_for_review"):
        lineage.set_candidate(cid, "awaiting_review", "review")
    assert [v.name for v in lineage.versions()] == ["v0001"]

    version = lineage.promote(cid, tree, PASSED, _approval(lineage, cid, why="read the diff"))
    assert version.name == "v0002" and lineage.current().name == "v0002"
    assert "Approved in review by alice: read the diff" in version.message
    assert_consistent(lineage.store, lineage.root)

    # A restart (a new connection to the same file) reads the same record.
    path = lineage.store.path
    lineage.store.close()
    again = Lineage(Store(path), lineage.root)
    done = again.candidate(cid)
    assert (done.state, done.decided_by) == ("accepted", Decider.PERSON)
    assert done.review is not None and done.review.reviewer == "alice"
    assert done.decision_reason == "read the diff" and done.verdict == PASSED
    with pytest.raises(NotAwaitingReview, match=r"does not await review \(it is accepted\)"):
        again.reject_reviewed(cid, "bob", "too late")
    again.store.close()


def test_a_person_rejects_with_a_reason_and_the_gates_verdict_stays(
    lineage: Lineage, seed_dir: Path, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    lineage.hold_for_review(cid, PASSED)
    with pytest.raises(LineageError, match="needs a reason"):
        lineage.reject_reviewed(cid, "bob", "  ")
    with pytest.raises(LineageError, match="reviewer's name"):
        lineage.reject_reviewed(cid, " ", "no")
    assert lineage.candidate(cid).state == "awaiting_review"  # refusals changed nothing

    cand = lineage.reject_reviewed(cid, "bob", "hard-codes the date format")
    assert (cand.state, cand.stage, cand.decided_by) == ("rejected", "review", Decider.PERSON)
    assert cand.verdict == PASSED  # the evidence is kept as the gates found it
    assert cand.decision_reason == "hard-codes the date format"
    with pytest.raises(NotAwaitingReview, match="does not await review"):
        lineage.reject_reviewed(cid, "bob", "again")
    with pytest.raises(LineageError, match="already rejected"):
        lineage.promote(cid, tree, PASSED, _approval(lineage, cid))

    path = lineage.store.path
    lineage.store.close()
    again = Lineage(Store(path), lineage.root)
    kept = again.candidate(cid)
    assert kept.state == "rejected" and kept.review is not None
    assert (kept.review.reviewer, kept.review.reason) == ("bob", "hard-codes the date format")
    assert [v.name for v in again.versions()] == ["v0001"]
    again.store.close()


def test_only_an_evaluating_candidate_that_passed_every_gate_is_held(
    lineage: Lineage, seed_dir: Path, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    proposed, _ = make_candidate(lineage, work, evaluating=False)
    with pytest.raises(LineageError, match="only one being evaluated"):
        lineage.hold_for_review(proposed, PASSED)
    cid, tree = make_candidate(lineage, work)
    failed = Verdict(decision="reject", stage="heldout", reason="accuracy fell")
    with pytest.raises(LineageError, match="passed every gate"):
        lineage.hold_for_review(cid, failed)
    # An approval for a candidate that never awaited review is refused.
    fake = Review(held=1.0, decided=2.0, reviewer="alice")
    with pytest.raises(NotAwaitingReview, match="does not await review"):
        lineage.promote(cid, tree, PASSED, fake)
    # Automatic decisions are the gates'.
    lineage.promote(cid, tree, PASSED)
    assert lineage.candidate(cid).decided_by is Decider.GATES
    assert lineage.candidate(cid).review is None


def test_an_approval_onto_a_parent_that_is_no_longer_live_is_refused(
    lineage: Lineage, seed_dir: Path, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    first, first_tree = make_candidate(lineage, work)
    lineage.promote(first, first_tree, PASSED)  # v0002
    cid, tree = make_candidate(lineage, work)  # made from v0002
    lineage.hold_for_review(cid, PASSED)
    lineage.rollback("v0001", "the operator went back")
    with pytest.raises(StaleParent) as refused:
        lineage.promote(cid, tree, PASSED, _approval(lineage, cid))
    message = str(refused.value)
    for part in ("tested against v0002", "v0001 is live now", "harnessctl rollback v0002"):
        assert part in message, message
    assert (refused.value.parent, refused.value.live) == ("v0002", "v0001")
    assert lineage.candidate(cid).state == "awaiting_review"  # refused, not decided
    # Its evidence is about v0002: with v0002 live again, the approval stands.
    lineage.rollback("v0002", "back to the tested parent")
    version = lineage.promote(cid, tree, PASSED, _approval(lineage, cid))
    assert version.parent_id == lineage.get("v0002").id
    # A candidate is not held for review onto a parent that is no longer live either.
    stale, _ = make_candidate(lineage, work)
    lineage.rollback("v0001", "again")
    with pytest.raises(StaleParent, match="evaluate it again against v0001"):
        lineage.hold_for_review(stale, PASSED)


def test_an_older_database_gains_the_review_columns(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old = sqlite3.connect(path)
    old.executescript(
        f"{FIRST_VERSIONS_TABLE}CREATE TABLE candidates ({FIRST_CANDIDATE_COLUMNS});"
        "INSERT INTO versions VALUES (1, 'v0001', NULL, NULL, 1.0, 'h', NULL, 'seed');"
        "INSERT INTO candidates VALUES (1, 1, 1.0, 1.0, 'proposer', 'm', 'r', '', 'raw', "
        "'rejected', 'dev', NULL);"
        "PRAGMA user_version=2;"
    )
    old.close()
    store = Store(path)
    assert store.query_one("PRAGMA user_version")[0] == SCHEMA_VERSION  # type: ignore[index]
    lineage = Lineage(store, tmp_path / "harnesses")
    cand = lineage.candidate(1)
    assert cand.review is None and cand.decided_by is Decider.GATES
    store.close()
