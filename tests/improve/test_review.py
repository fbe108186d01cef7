"""The review step's accounting: the alpha ledger's awaiting_review state, a person's
rejection spending its test's alpha, the loop and the held-out stage waiting, start-up
settlement, and what the proposer is told of reviewed candidates."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from daemon.config.policy import Policy
from daemon.improve import alpha_ledger, briefing
from daemon.improve.heldout import claim_slot
from daemon.improve.loop import ImprovementLoop, LoopControl
from daemon.improve.power_report import review_line
from daemon.improve.procedure import wanted_settings
from daemon.improve.proposer import archive
from daemon.lineage import CandidateSource, Lineage, NewCandidate, Review, Version
from daemon.store import Store
from daemon.verdict import GateResult, Verdict

pytestmark = pytest.mark.unit

POOL = [f"t{i}" for i in range(100)]
SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
PASSED = Verdict(
    decision="accept",
    stage="panel",
    reason="every gate passed",
    gates=[
        GateResult(
            gate="accuracy", passed=True, measured=731.0, threshold=20.0, note="secret 17 tasks"
        )
    ],
)


def _start(store: Store, cid: int) -> alpha_ledger.HeldoutTest:
    settings = alpha_ledger.pin(store, wanted_settings(Policy(), POOL))
    test = alpha_ledger.budget(settings, alpha_ledger.tests(store)).next_test()
    assert test is not None
    alpha_ledger.start(store, cid, test, "block")
    found = alpha_ledger.test_of(store, cid)
    assert found is not None
    return found


def _budget(store: Store) -> Any:
    settings = alpha_ledger.pinned(store)
    assert settings is not None
    return alpha_ledger.budget(settings, alpha_ledger.tests(store))


def _state(store: Store, cid: int) -> str:
    test = alpha_ledger.test_of(store, cid)
    assert test is not None
    return test.state


def test_a_reviewed_rejection_spends_its_alpha_and_an_approval_ends_the_epoch(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    first = _start(store, 1)
    alpha_ledger.hold(store, 1, {"outcome": "promote"})
    assert alpha_ledger.awaiting(store) == [1] and _state(store, 1) == "awaiting_review"
    assert alpha_ledger.test_of(store, 1).decision == {"outcome": "promote"}  # type: ignore[union-attr]

    assert alpha_ledger.decide_review(store, 1, promoted=False)
    assert _state(store, 1) == "not_promoted" and alpha_ledger.awaiting(store) == []
    budget = _budget(store)
    # Not a promotion (no new epoch, no new block), and its slot is not given back: the
    # next candidate takes position 2 of the same epoch at a smaller share.
    assert budget.promotions == 0 and [t.alpha for t in budget.history] == [first.alpha]
    nxt = budget.next_test()
    assert (nxt.epoch, nxt.position) == (1, 2) and nxt.alpha < first.alpha

    second = _start(store, 2)
    alpha_ledger.hold(store, 2, {"outcome": "promote"})
    store.close()
    store = Store(tmp_path / "state.db")  # a restart: still awaiting
    assert alpha_ledger.awaiting(store) == [2]
    assert alpha_ledger.decide_review(store, 2, promoted=True)
    assert not alpha_ledger.decide_review(store, 2, promoted=False)  # decided once
    budget = _budget(store)
    assert budget.promotions == 1
    assert [(t.epoch, t.position, t.promoted) for t in budget.history] == [
        (1, 1, False),
        (1, 2, True),
    ]
    third = budget.next_test()
    assert (third.epoch, third.position) == (2, 1) and second.alpha > 0
    store.close()


def test_start_up_settles_reviews_decided_just_before_a_stop(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    for cid in (1, 2, 3, 4):
        _start(store, cid)
        if cid < 4:
            alpha_ledger.hold(store, cid, None)
        # (one awaiting at a time in the daemon; several here to see each settle)
    lineage_state = {1: "accepted", 2: "rejected", 3: "awaiting_review", 4: "awaiting_review"}
    # 4: the lineage held it, a stop came before the ledger row followed.
    assert alpha_ledger.settle_running(store, lineage_state.__getitem__) == [(4, "awaiting_review")]
    settled = alpha_ledger.settle_reviewed(store, lineage_state.__getitem__)
    assert settled == [(1, "promoted"), (2, "not_promoted")]
    assert [_state(store, c) for c in (1, 2, 3, 4)] == [
        "promoted",
        "not_promoted",
        "awaiting_review",
        "awaiting_review",
    ]
    store.close()


def _proposed(parent: Version, rationale: str) -> NewCandidate:
    return NewCandidate(
        parent_id=parent.id,
        source=CandidateSource.PROPOSER,
        proposer_model="m",
        rationale=rationale,
        patch="",
        raw="raw",
    )


def _held(lineage: Lineage, store: Store, seed: Version, rationale: str) -> int:
    cid = lineage.add_candidate(_proposed(seed, rationale))
    lineage.set_candidate(cid, "evaluating", "panel")
    _start(store, cid)
    lineage.hold_for_review(cid, PASSED)
    alpha_ledger.hold(store, cid, {"outcome": "promote"})
    return cid


def test_while_a_candidate_awaits_review_the_loop_and_the_heldout_stage_wait(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    lineage = Lineage(store, tmp_path / "harnesses")
    seed = lineage.init_seed(SEED)
    cid = _held(lineage, store, seed, "waits")
    policy = Policy()
    rt: Any = SimpleNamespace(
        store=store,
        policy=SimpleNamespace(get=lambda: policy),
        splits=lambda policy=None: SimpleNamespace(heldout=POOL),
        guard=SimpleNamespace(window_state=lambda: SimpleNamespace(exhausted=[])),
    )
    loop = ImprovementLoop(rt, lineage, LoopControl())
    for external in (False, True):  # a queued patch of a person's waits too
        waiting = loop._why_waiting(external)
        assert waiting is not None and f"c{cid} awaiting review" in waiting.why
        assert "harnessctl approve cN" in waiting.why and not waiting.budget_spent
    other = lineage.add_candidate(_proposed(seed, "next"))
    refusal = claim_slot(rt, other, policy)
    assert isinstance(refusal, str) and f"c{cid} awaits review" in refusal
    assert alpha_ledger.test_of(store, other) is None  # no slot taken
    lineage.reject_reviewed(cid, "bob", "not this one")
    alpha_ledger.decide_review(store, cid, promoted=False)
    assert loop._why_waiting(False) is None
    slot = claim_slot(rt, other, policy)
    assert not isinstance(slot, str) and (slot.test.epoch, slot.test.position) == (1, 2)
    store.close()


def test_the_proposer_learns_of_a_reviewed_candidate_only_once_decided_and_one_bit(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "state.db")
    lineage = Lineage(store, tmp_path / "harnesses")
    seed = lineage.init_seed(SEED)
    rejected = _held(lineage, store, seed, "first idea")
    lineage.reject_reviewed(rejected, "bob", "SECRET-REASON it overfits the held-out block")
    alpha_ledger.decide_review(store, rejected, promoted=False)
    waiting = _held(lineage, store, seed, "second idea")
    rt: Any = SimpleNamespace(store=store)
    seen = ImprovementLoop(rt, lineage, LoopControl())._reached_heldout()
    entries = briefing.archive_entries(lineage, store, seed, heldout_ids=seen, model="m")
    ids = [e.candidate_id for e in entries]
    assert rejected in ids and waiting not in ids  # "awaiting" would say its test passed
    text = archive.section(entries, max_entries=10, budget_tokens=2000)
    assert "not promoted" in text and "second idea" not in text
    for secret in ("SECRET-REASON", "bob", "review", "731", "secret 17 tasks", "awaiting"):
        assert secret not in text, (secret, text)

    held = lineage.candidate(waiting).review
    assert held is not None
    approval = Review(held=held.held, decided=held.held + 1, reviewer="alice", reason="ok")
    tree = tmp_path / "tree"
    shutil.copytree(lineage.path(seed), tree)  # the candidate's patch is empty
    live = lineage.promote(waiting, tree, PASSED, approval)
    entries = briefing.archive_entries(lineage, store, live, heldout_ids=seen, model="m")
    mine = next(e for e in entries if e.candidate_id == waiting)
    assert mine.outcome == "promoted"
    store.close()


def test_policy_check_says_whether_the_review_step_is_on() -> None:
    assert Policy().gates.review.enabled is False
    on = Policy.model_validate({"gates": {"review": {"enabled": True}}})
    assert review_line(on).startswith("review: on") and "harnessctl approve" in review_line(on)
    assert review_line(Policy()).startswith("review: off")
    with pytest.raises(ValueError, match="extra"):
        Policy.model_validate({"gates": {"review": {"enable": True}}})
