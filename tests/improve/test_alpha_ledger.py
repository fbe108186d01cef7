"""The lineage's alpha ledger in SQLite: pinned settings, restart, cut-short tests, migration,
and what the proposer is told about candidates that reached the held-out stage."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from daemon.acceptance.observations import HarnessResult, PairedOutcome
from daemon.acceptance.rule import Outcome, begin, observe
from daemon.config.policy import Policy
from daemon.improve import alpha_ledger, briefing
from daemon.improve.loop import ImprovementLoop, LoopControl
from daemon.improve.procedure import block_for, empty_budget, rule_knobs, wanted_settings
from daemon.improve.proposer import archive
from daemon.lineage import CandidateSource, Lineage, NewCandidate, Version
from daemon.store import SCHEMA_VERSION, Store
from daemon.verdict import GateResult, Verdict

pytestmark = pytest.mark.unit

POOL = [f"t{i}" for i in range(100)]
SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"


def _run(store: Store, cid: int, outcome: alpha_ledger.TestState) -> alpha_ledger.HeldoutTest:
    settings = alpha_ledger.pin(store, wanted_settings(Policy(), POOL))
    budget = alpha_ledger.budget(settings, alpha_ledger.tests(store))
    test = budget.next_test()
    assert test is not None
    alpha_ledger.start(store, cid, test, "block")
    if outcome != "running":
        alpha_ledger.finish(store, cid, outcome, {"verdict": outcome})
    found = alpha_ledger.test_of(store, cid)
    assert found is not None
    return found


def test_slots_follow_epochs_and_positions_and_survive_a_restart(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    first = _run(store, 1, "not_promoted")
    second = _run(store, 2, "promoted")
    third = _run(store, 3, "not_promoted")
    assert (first.epoch, first.position) == (1, 1) and (second.epoch, second.position) == (1, 2)
    assert (third.epoch, third.position) == (2, 1)
    assert second.alpha < first.alpha  # later positions get a smaller share
    store.close()
    again = Store(tmp_path / "state.db")  # a restart rebuilds the same accounting
    settings = alpha_ledger.pinned(again)
    assert settings is not None
    budget = alpha_ledger.budget(settings, alpha_ledger.tests(again))
    assert budget.promotions == 1 and [t.alpha for t in budget.history] == [
        first.alpha,
        second.alpha,
        third.alpha,
    ]
    nxt = budget.next_test()
    assert nxt is not None and (nxt.epoch, nxt.position) == (2, 2) and nxt.reused_block
    # The one-block pool is reused after a promotion, at the price of the promoted position.
    fresh = empty_budget(settings).next_test()
    assert fresh is not None and nxt.alpha < fresh.alpha


def test_settings_are_pinned_at_the_first_test(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    _run(store, 1, "not_promoted")
    looser = Policy.model_validate({"acceptance": {"alpha": 0.2, "block_size": 50}})
    wanted = wanted_settings(looser, POOL)
    kept = alpha_ledger.pin(store, wanted)
    assert kept.alpha == 0.05 and kept.block_size == 100
    assert kept.differences(wanted) == ["alpha: 0.05 -> 0.2", "block_size: 100 -> 50"]
    assert block_for(wanted, POOL, 1) is not None  # two fresh blocks in the looser policy


def test_a_test_cut_short_keeps_its_slot(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    _run(store, 1, "running")
    _run(store, 2, "running")  # (a second daemon life would never start one without settling)
    settled = alpha_ledger.settle_running(
        store, lambda cid: "accepted" if cid == 2 else "interrupted"
    )
    assert settled == [(1, "void"), (2, "promoted")]
    states = [t.state for t in alpha_ledger.tests(store)]
    assert states == ["void", "promoted"]
    settings = alpha_ledger.pinned(store)
    assert settings is not None
    budget = alpha_ledger.budget(settings, alpha_ledger.tests(store))
    assert budget.promotions == 1  # the void one counts as not promoted, its alpha spent
    with pytest.raises(sqlite3.IntegrityError):
        _run(store, 1, "running")  # one test per candidate


def test_an_older_state_database_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE evaluations (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, "
        "version_id INTEGER, candidate_id INTEGER, suite TEXT NOT NULL, split TEXT NOT NULL, "
        "model TEXT NOT NULL, state TEXT NOT NULL, started REAL NOT NULL, finished REAL, "
        "report TEXT);"
        "INSERT INTO evaluations(run_id, suite, split, model, state, started) "
        "VALUES ('ev-old', 'bfcl:simple', 'dev', 'm', 'done', 1.0);"
        "PRAGMA user_version=1;"
    )
    old.close()
    store = Store(path)
    columns = {r["name"] for r in store.query("PRAGMA table_info(evaluations)")}
    assert "conditions" in columns
    assert store.query_one("PRAGMA user_version")[0] == SCHEMA_VERSION  # type: ignore[index]
    assert [r["run_id"] for r in store.query("SELECT run_id FROM evaluations")] == ["ev-old"]
    assert alpha_ledger.tests(store) == [] and alpha_ledger.pinned(store) is None
    store.close()
    Store(path).close()  # opening again is a no-op


def test_the_honesty_switch_also_removes_honesty_as_a_way_to_be_better() -> None:
    on = rule_knobs(Policy())
    off = rule_knobs(Policy.model_validate({"gates": {"honesty": {"enabled": False}}}))
    assert on.weight_honesty == 0.2 and off.weight_honesty == 0.0
    assert off.weight_accuracy == pytest.approx(0.75) and off.honesty_bound == 1.0


def _proposed(parent: Version, rationale: str) -> NewCandidate:
    return NewCandidate(
        parent_id=parent.id,
        source=CandidateSource.PROPOSER,
        proposer_model="m",
        rationale=rationale,
        patch="",
        raw="raw",
    )


def _verdict(stage: str, gate: str, note: str) -> Verdict:
    measured = -0.3 if stage == "dev" else 0.731  # the held-out figure is the secret one
    g = GateResult(gate=gate, passed=False, measured=measured, threshold=0.5, note=note)
    return Verdict(
        decision="reject",
        stage=stage,
        reason=f"{gate}: measured {measured}",  # type: ignore[arg-type]
        gates=[g],
    )


def test_the_proposer_learns_only_promoted_or_not_about_heldout_candidates(
    tmp_path: Path,
) -> None:
    """Through the loop's own wiring: a candidate with a held-out test in the ledger, or a
    verdict at or past the held-out stage, reaches the proposer's archive as one bit."""
    store = Store(tmp_path / "state.db")
    lineage = Lineage(store, tmp_path / "harnesses")
    seed = lineage.init_seed(SEED)

    def add(rationale: str, stage: str, gate: str, note: str) -> int:
        cid = lineage.add_candidate(_proposed(seed, rationale))
        lineage.set_candidate(cid, "rejected", stage, _verdict(stage, gate, note))
        return cid

    add("breaks the dev split", "dev", "dev_screen", "dev accuracy 10% vs parent 40%")
    heldout = add("looks better", "heldout", "accuracy", "secret figures after 17 tasks")
    _run(store, heldout, "not_promoted")
    add("bad panel", "panel", "panel", "secret figures on the panel")
    # Stopped after its held-out test began in the ledger, before its stage moved on: the
    # ledger alone says it reached held-out.
    cut = lineage.add_candidate(_proposed(seed, "cut short"))
    lineage.set_candidate(cut, "interrupted", "dev")
    _run(store, cut, "running")
    rt: Any = SimpleNamespace(store=store)
    seen = ImprovementLoop(rt, lineage, LoopControl())._reached_heldout()
    assert {heldout, cut} <= seen
    entries = briefing.archive_entries(lineage, store, seed, heldout_ids=seen, model="m")
    text = archive.section(entries, max_entries=10, budget_tokens=2000)
    assert "rejected at dev: dev_screen" in text and "dev accuracy 10%" in text  # dev data
    assert text.count("not promoted") == 3 and "interrupted" not in text
    for secret in ("accuracy:", "panel:", "0.731", "secret", "17 tasks", "heldout"):
        assert secret not in text, (secret, text)


def _always_claims_tie(knobs: Any, discordant_every: int = 20) -> int:
    """Tasks until futility stops a candidate that ties its parent, both claiming success on
    every task (so over-claims are exactly the failures): a win and a loss every
    ``discordant_every`` tasks, the rest both failing, at a tiny alpha (a reused block)."""
    state = begin(knobs, 1.15e-4, 380)
    for i in range(380):
        step = i % discordant_every
        parent_passed, candidate_passed = (step == 0, step == 1) if step < 2 else (False, False)
        outcome = PairedOutcome(
            f"t{i}",
            HarnessResult(passed=parent_passed, tokens=100, claimed=True),
            HarnessResult(passed=candidate_passed, tokens=100, claimed=True),
        )
        state = observe(state, outcome)
        if state.outcome is not Outcome.UNDECIDED:
            return state.n
    return state.n


def test_the_protected_gain_key_also_moves_the_over_claim_futility_test() -> None:
    # With always-claiming harnesses the over-claim difference is the accuracy difference:
    # were the over-claim test left at 5 points, raising the key would free no slot sooner.
    policy = Policy()
    raised = policy.model_copy(
        update={"acceptance": policy.acceptance.model_copy(update={"futility_accuracy_gain": 0.07})}
    )
    knobs, wider = rule_knobs(policy), rule_knobs(raised)
    assert wider.futility_honesty_gain == wider.futility_accuracy_gain == 0.07
    # The futility e-processes alone: the conditional-power stop would end both ties early.
    knobs = replace(knobs, futility_conditional_gain=0.0)
    wider = replace(wider, futility_conditional_gain=0.0)
    default_n, raised_n = _always_claims_tie(knobs), _always_claims_tie(wider)
    assert raised_n < 0.8 * default_n, (default_n, raised_n)
