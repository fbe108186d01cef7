"""Lineage: versions, candidates, promotion, rollback, git history and start-up repair."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from lineage_helpers import (
    FIRST_CANDIDATE_COLUMNS,
    FIRST_VERSIONS_TABLE,
    assert_consistent,
    make_candidate,
)

from daemon.errors import LineageError, UnknownRef
from daemon.lineage import CandidateSource, CandidateState, Lineage, NewCandidate, PointerKind
from daemon.lineage.fs import tree_hash
from daemon.lineage.git import GitHistory
from daemon.lineage.records import commit_message
from daemon.patches.model import ParseFailure
from daemon.patches.parse import parse_proposal
from daemon.patches.tree import read_tree
from daemon.store import Store
from daemon.verdict import GateResult, Stage, Verdict

pytestmark = pytest.mark.unit

VERDICT = Verdict(
    decision="accept",
    stage="heldout",
    reason="every gate passed",
    gates=[
        GateResult(gate="accuracy", passed=True, measured=0.01, threshold=0.05),
        GateResult(gate="dead_code", passed=True, measured=0.0, threshold=0.25),
    ],
)


def test_seed_is_materialised_once(
    lineage: Lineage, seed_dir: Path, root: Path, store: Store
) -> None:
    first = lineage.init_seed(seed_dir)
    assert (first.id, first.name, first.parent_id, first.candidate_id) == (1, "v0001", None, None)
    assert read_tree(root / "versions" / "v0001") == read_tree(seed_dir)
    assert os.readlink(root / "current") == "versions/v0001"
    assert lineage.current() == first
    (seed_dir / "harness.py").write_text("changed later\n")
    assert Lineage(store, root).init_seed(seed_dir) == first
    assert len(lineage.versions()) == 1
    mode = (root / "versions" / "v0001" / "harness.py").stat().st_mode
    assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert_consistent(store, root)


def test_no_version_yet_is_a_clear_error(lineage: Lineage) -> None:
    with pytest.raises(LineageError, match="has no version yet"):
        lineage.current()


def test_promote_records_everything(
    lineage: Lineage, seed_dir: Path, root: Path, store: Store, work: Path
) -> None:
    seed = lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    version = lineage.promote(cid, tree, VERDICT)
    assert (version.name, version.parent_id, version.candidate_id) == ("v0002", seed.id, cid)
    assert lineage.current() == version
    assert read_tree(lineage.path(version)) == read_tree(tree)
    assert os.readlink(root / "current") == "versions/v0002"
    candidate = lineage.candidate(cid)
    assert (candidate.state, candidate.stage, candidate.verdict) == (
        "accepted",
        "promoted",
        VERDICT,
    )
    assert candidate.proposer_model == "local:test-model"
    assert lineage.diff(seed, version) == candidate.patch
    message = GitHistory(root).log()[0]
    assert message.sha == version.git_commit
    assert message.trailers["Harnessd-Candidate"] == str(cid)
    assert "Rationale: bump the mark to 1." in version.message
    # Every gate by name with its figures (a dict-shaped verdict once showed them as "?").
    assert "  accuracy: pass measured=0.01 threshold=0.05" in version.message
    assert "  dead_code: pass measured=0.0 threshold=0.25" in version.message
    assert_consistent(store, root)


def test_get_by_name_id_commit_and_current(lineage: Lineage, seed_dir: Path, work: Path) -> None:
    seed = lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    second = lineage.promote(cid, tree, VERDICT)
    assert second.git_commit is not None
    assert lineage.get("v0001") == lineage.get(1) == lineage.get("1") == seed
    assert lineage.get(second.git_commit[:8]) == second
    assert lineage.get("current") == second
    for bad in ("v0009", "12", "zz", ""):
        with pytest.raises(LineageError, match="no accepted version"):
            lineage.get(bad)


def test_promote_refuses_stale_final_and_unknown_candidates(
    lineage: Lineage, seed_dir: Path, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    stale, stale_tree = make_candidate(lineage, work)
    fresh, fresh_tree = make_candidate(lineage, work)
    lineage.promote(fresh, fresh_tree, VERDICT)
    with pytest.raises(LineageError, match="v0002 is live now; evaluate it again"):
        lineage.promote(stale, stale_tree, VERDICT)
    with pytest.raises(LineageError, match="already accepted"):
        lineage.promote(fresh, fresh_tree, VERDICT)
    lineage.set_candidate(
        stale,
        "rejected",
        "heldout",
        Verdict(decision="reject", stage="heldout", reason="accuracy fell"),
    )
    with pytest.raises(LineageError, match="already rejected"):
        lineage.promote(stale, stale_tree, VERDICT)
    with pytest.raises(UnknownRef, match="no candidate c99"):
        lineage.promote(99, stale_tree, VERDICT)
    assert [v.name for v in lineage.versions()] == ["v0001", "v0002"]


def test_candidate_states(lineage: Lineage, seed_dir: Path, work: Path) -> None:
    # Stored as text: the values stay what earlier releases wrote.
    assert [s.value for s in CandidateState] == [
        "proposed",
        "evaluating",
        "awaiting_review",
        "accepted",
        "rejected",
        "interrupted",
    ]
    seed = lineage.init_seed(seed_dir)
    cid, _ = make_candidate(lineage, work, evaluating=False)
    assert lineage.candidate(cid).state is CandidateState.PROPOSED
    lineage.set_candidate(cid, CandidateState.EVALUATING, Stage.SMOKE)
    lineage.set_candidate(cid, CandidateState.INTERRUPTED, Stage.SMOKE)
    lineage.set_candidate(cid, CandidateState.EVALUATING, Stage.DEV)
    smoke = Verdict(decision="reject", stage=Stage.SMOKE, reason="smoke failed")
    lineage.set_candidate(cid, CandidateState.REJECTED, Stage.DEV, smoke)
    rejected = lineage.candidate(cid)
    assert (rejected.state, rejected.stage, rejected.verdict) == ("rejected", "dev", smoke)
    assert rejected.stage is Stage.DEV
    with pytest.raises(LineageError, match="already rejected"):
        lineage.set_candidate(cid, CandidateState.EVALUATING, Stage.DEV)
    with pytest.raises(LineageError, match="only through promote"):
        lineage.set_candidate(cid, CandidateState.ACCEPTED, Stage.DEV)
    with pytest.raises(LineageError, match="unknown candidate state 'done'"):
        lineage.set_candidate(cid, "done", Stage.DEV)  # type: ignore[arg-type]
    with pytest.raises(LineageError, match="source must be one of"):
        lineage.add_candidate(
            NewCandidate(
                parent_id=seed.id,
                source="someone",  # type: ignore[arg-type]
                proposer_model=None,
                rationale="",
                patch="",
                raw="",
            )
        )
    failure = parse_proposal("Looks fine to me.\nno patch here")
    assert isinstance(failure, ParseFailure)
    unparseable = lineage.add_unparseable(
        NewCandidate(
            parent_id=seed.id,
            source=CandidateSource.PROPOSER,
            proposer_model="local:m",
            rationale=failure.rationale,
            patch="",
            raw=failure.raw,
        ),
        failure,
    )
    recorded = lineage.candidate(unparseable)
    assert (recorded.state, recorded.stage, recorded.raw) == (
        "rejected",
        "parse",
        "Looks fine to me.\nno patch here",
    )
    assert recorded.verdict is not None and "no patch found" in recorded.verdict.reason
    assert recorded.verdict.decision == "reject" and recorded.verdict.gates == []
    assert [c.id for c in lineage.candidates(state=CandidateState.REJECTED)] == [unparseable, cid]
    assert [c.id for c in lineage.candidates(parent=seed, limit=1)] == [unparseable]


def test_rollback_is_recorded_in_sqlite_and_git(
    lineage: Lineage, seed_dir: Path, root: Path, store: Store, work: Path
) -> None:
    seed = lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    second = lineage.promote(cid, tree, VERDICT)
    back = lineage.rollback("v0001", "accuracy regressed in production")
    assert back == seed and lineage.current() == seed
    assert os.readlink(root / "current") == "versions/v0001"
    change = lineage.history()[-1]
    assert change.kind is PointerKind.ROLLBACK and change.is_rollback
    assert change.reason == "accuracy regressed in production"
    assert change.summary == "rollback: accuracy regressed in production"
    kinds = [c.kind for c in lineage.history()]
    assert kinds == [PointerKind.SEED, PointerKind.PROMOTE, PointerKind.ROLLBACK]
    newest = GitHistory(root).log()[0]
    assert newest.trailers["Harnessd-Version"] == "v0001"
    assert lineage.get(newest.sha[:10]) == seed  # a rollback commit names its version
    with pytest.raises(LineageError, match="already the live version"):
        lineage.rollback(seed.name, "again")
    with pytest.raises(LineageError, match="needs a reason"):
        lineage.rollback(second.name, "  ")
    with pytest.raises(LineageError, match="no accepted version 'v0007'"):
        lineage.rollback("v0007", "nope")
    assert lineage.rollback(second.git_commit or "", "forward again") == second
    assert_consistent(store, root)


def test_tree_lists_branches_depth_first(lineage: Lineage, seed_dir: Path, work: Path) -> None:
    lineage.init_seed(seed_dir)
    a, tree_a = make_candidate(lineage, work)
    lineage.promote(a, tree_a, VERDICT)  # v0002 from v0001
    lineage.rollback("v0001", "try another branch")
    b, tree_b = make_candidate(lineage, work)
    lineage.promote(b, tree_b, VERDICT)  # v0003 from v0001
    c, tree_c = make_candidate(lineage, work)
    lineage.promote(c, tree_c, VERDICT)  # v0004 from v0003
    rejected, _ = make_candidate(lineage, work)
    lineage.set_candidate(rejected, "rejected", "static")
    rows = [(e.version.name, e.depth, e.is_current, e.candidates) for e in lineage.tree()]
    assert rows == [
        ("v0001", 0, False, {"accepted": 2}),
        ("v0002", 1, False, {}),
        ("v0003", 1, False, {"accepted": 1}),
        ("v0004", 2, True, {"rejected": 1}),
    ]


def test_reconcile_on_a_clean_lineage_changes_nothing(
    lineage: Lineage, seed_dir: Path, root: Path, store: Store, work: Path
) -> None:
    assert lineage.reconcile() == []
    lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    lineage.promote(cid, tree, VERDICT)
    head = GitHistory(root).head()
    assert Lineage(store, root).reconcile() == []
    assert GitHistory(root).head() == head
    assert_consistent(store, root)


def test_reconcile_marks_evaluating_candidates_interrupted(
    lineage: Lineage, seed_dir: Path, store: Store, root: Path, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    cid, _ = make_candidate(lineage, work)
    waiting, _ = make_candidate(lineage, work, evaluating=False)
    notes = Lineage(store, root).reconcile()
    assert notes == [
        f"candidate {cid} was being evaluated when harnessd stopped; marked interrupted"
    ]
    assert lineage.candidate(cid).state == "interrupted"
    assert lineage.candidate(waiting).state == "proposed"


def test_reconcile_restores_a_deleted_or_damaged_version_from_git(
    lineage: Lineage, seed_dir: Path, store: Store, root: Path, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    second = lineage.promote(cid, tree, VERDICT)
    expected = tree_hash(lineage.path(second))
    damaged = lineage.path(second) / "harness.py"
    damaged.chmod(0o644)
    damaged.write_text("oops\n")
    shutil.rmtree(lineage.path(lineage.get(1)))
    notes = Lineage(store, root).reconcile()
    assert len(notes) == 2 and all(n.startswith("restored versions/v000") for n in notes)
    assert tree_hash(lineage.path(second)) == expected
    assert_consistent(store, root)


def test_reconcile_rewinds_git_when_sqlite_lost_its_last_promotion(
    lineage: Lineage, seed_dir: Path, store: Store, root: Path, work: Path
) -> None:
    """A power loss can drop SQLite's newest commits (synchronous=NORMAL); git follows SQLite."""
    lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    lineage.promote(cid, tree, VERDICT)
    with store.tx() as conn:
        conn.execute("DELETE FROM pointer WHERE version_id = 2")
        conn.execute("DELETE FROM versions WHERE id = 2")
        conn.execute("UPDATE candidates SET state = 'evaluating' WHERE id = ?", (cid,))
    notes = Lineage(store, root).reconcile()
    assert any("moved the git branch back" in n for n in notes)
    assert any(n.startswith("removed versions/v0002") for n in notes)
    assert "pointed 'current' at versions/v0001 (it was versions/v0002)" in notes
    assert lineage.candidate(cid).state == "interrupted"
    assert_consistent(store, root)
    again, again_tree = make_candidate(lineage, work)
    assert lineage.promote(again, again_tree, VERDICT).name == "v0002"
    assert_consistent(store, root)


def test_symlinks_in_a_promoted_tree_are_refused(
    lineage: Lineage, seed_dir: Path, root: Path, store: Store, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    os.symlink("/etc/passwd", tree / "leak.txt")
    with pytest.raises(LineageError, match=r"'leak\.txt' is a symlink"):
        lineage.promote(cid, tree, VERDICT)
    assert lineage.current().name == "v0001"
    lineage.set_candidate(cid, "rejected", "promote")
    assert_consistent(store, root)


def test_a_tree_that_differs_from_the_recorded_patch_is_refused(
    lineage: Lineage, seed_dir: Path, work: Path
) -> None:
    lineage.init_seed(seed_dir)
    cid, tree = make_candidate(lineage, work)
    (tree / "helpers" / "util.py").write_text("def clamp(value):\n    return value\n")
    with pytest.raises(LineageError, match="not v0001 plus the candidate's recorded patch"):
        lineage.promote(cid, tree, VERDICT)
    assert [v.name for v in lineage.versions()] == ["v0001"]


def test_an_older_database_gains_its_typed_facts_from_the_text_it_held(tmp_path: Path) -> None:
    """Schema 5: a repeat's earlier candidate and a pointer change's kind were text in the
    reason; opening the database once moves them into their columns, and the rollback's git
    message is the same as the one written from the old row."""
    duplicate = Verdict(
        decision="reject", stage=Stage.STATIC, reason="duplicate of c1; not evaluated again"
    )
    other = Verdict(decision="reject", stage=Stage.STATIC, reason="duplicate of nothing")
    path = tmp_path / "state.db"
    old = sqlite3.connect(path)
    old.executescript(
        f"{FIRST_VERSIONS_TABLE}CREATE TABLE candidates ({FIRST_CANDIDATE_COLUMNS}, "
        "base_candidate_id INTEGER, review_held REAL, review_decided REAL, reviewer TEXT, "
        "review_reason TEXT);"
        "CREATE TABLE pointer (id INTEGER PRIMARY KEY, ts REAL NOT NULL, version_id INTEGER "
        "NOT NULL, reason TEXT NOT NULL, candidate_id INTEGER);"
        "INSERT INTO versions VALUES (1, 'v0001', NULL, NULL, 1.0, 'h', NULL, 'seed');"
        "INSERT INTO versions VALUES (2, 'v0002', 1, 2, 2.0, 'h2', NULL, 'v0002: promote');"
        "INSERT INTO pointer VALUES (1, 1.0, 1, 'seed: minimal', NULL);"
        "INSERT INTO pointer VALUES (2, 2.0, 2, 'promote: candidate 2', 2);"
        "INSERT INTO pointer VALUES (3, 3.0, 1, 'rollback: worse: by 3 points', NULL);"
        "PRAGMA user_version=4;"
    )
    rows = [(1, "rejected", "smoke", None), (2, "rejected", "static", duplicate)]
    rows.append((3, "rejected", "static", other))
    for cid, state, stage, verdict in rows:
        old.execute(
            "INSERT INTO candidates(id, parent_version_id, created, updated, source, "
            "proposer_model, rationale, patch, raw, state, stage, verdict) "
            "VALUES (?, 1, 1.0, 1.0, 'proposer', 'm', 'r', '', 'raw', ?, ?, ?)",
            (cid, state, stage, verdict.model_dump_json() if verdict else None),
        )
    old.commit()
    old.close()
    store = Store(path)
    lineage = Lineage(store, tmp_path / "harnesses")
    assert [lineage.candidate(c).duplicate_of for c in (1, 2, 3)] == [None, 1, None]
    history = lineage.history()
    assert [(h.kind, h.reason) for h in history] == [
        (PointerKind.SEED, "minimal"),
        (PointerKind.PROMOTE, "candidate 2"),
        (PointerKind.ROLLBACK, "worse: by 3 points"),
    ]
    assert [h.summary for h in history] == [
        "seed: minimal",
        "promote: candidate 2",
        "rollback: worse: by 3 points",
    ]
    seed = lineage.get("v0001")
    message = commit_message(history[-1], seed, "v0002")
    assert message.startswith("rollback to v0001 (from v0002)\n\nReason: worse: by 3 points\n")
    store.close()
    store = Store(path)  # opening it again changes nothing
    assert [h.reason for h in Lineage(store, tmp_path / "harnesses").history()][-1] == (
        "worse: by 3 points"
    )
    store.close()
