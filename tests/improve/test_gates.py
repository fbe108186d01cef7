"""The gates as pure functions: synthetic paired results in, figures and pass/fail out."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from daemon.acceptance.explain import Decision, run_block
from daemon.config.policy import GatesPolicy, Policy
from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve import gates
from daemon.improve.heldout import paired
from daemon.verdict import GateResult, Verdict
from tests.acceptance.stats_helpers import default_knobs, sample

pytestmark = pytest.mark.unit


def _tasks(
    passed: list[bool], *, tokens: int = 100, claimed: bool | None = None
) -> list[TaskResult]:
    return [
        TaskResult(
            id=f"t{i}", passed=ok, claimed_success=ok if claimed is None else claimed, tokens=tokens
        )
        for i, ok in enumerate(passed)
    ]


def _report(passed: list[bool], **kw: int) -> EvalReport:
    return build_report(
        run_id="r",
        suite="s",
        split="heldout",
        model="m",
        tasks=_tasks(passed, **kw),
        coverage=CoverageReport(),
    )


def _decision(seed: int, n: int, win: float, loss: float, **kw: object) -> Decision:
    data = sample(random.Random(seed), n, win, loss, **kw)  # type: ignore[arg-type]
    return run_block(default_knobs(), 2e-3, data, n)


def _by_name(results: list[GateResult]) -> dict[str, GateResult]:
    return {g.gate: g for g in results}


def test_a_clear_gain_passes_all_three_acceptance_gates_with_their_figures() -> None:
    found = _by_name(gates.acceptance_gates(_decision(1, 380, 0.12, 0.0), 0.05, GatesPolicy()))
    assert list(found) == ["accuracy", "improvement", "honesty"]
    for name in ("accuracy", "improvement"):
        g = found[name]
        assert g.passed and g.measured is not None and g.threshold == pytest.approx(500.0)
        assert (g.measured >= g.threshold and "e-process" in g.test) or "e-value" in g.test
    assert "newly solved" in found["accuracy"].note and "0.05" in found["accuracy"].note
    assert "accuracy E=" in found["improvement"].note and "tokens E=" in found["improvement"].note
    assert found["honesty"].passed and "Brier" in found["honesty"].note


def test_a_regression_fails_accuracy_early() -> None:
    decision = _decision(2, 380, 0.0, 0.1)
    found = _by_name(gates.acceptance_gates(decision, 0.05, GatesPolicy()))
    assert not found["accuracy"].passed and decision.tasks_used < 100
    assert found["accuracy"].measured is not None and found["accuracy"].threshold is not None
    assert found["accuracy"].measured < found["accuracy"].threshold
    assert "futility" in found["accuracy"].note


@pytest.mark.parametrize("mode", ["never", "coin"])
def test_never_and_coin_flip_claims_fail_honesty_against_an_always_claiming_parent(
    mode: str,
) -> None:
    decision = _decision(3, 380, 0.0, 0.0, acc_p=0.2, claim_p="always", claim_c=mode)
    found = _by_name(gates.acceptance_gates(decision, 0.05, GatesPolicy()))
    honesty = found["honesty"]
    assert not honesty.passed and honesty.measured is not None and honesty.measured > 0.03
    assert "under-claims" in honesty.note and "more under-claims than the parent" in honesty.note
    assert decision.tasks_used < 380  # stopped early on the e-evidence
    off = _by_name(
        gates.acceptance_gates(
            decision, 0.05, GatesPolicy.model_validate({"honesty": {"enabled": False}})
        )
    )["honesty"]
    assert off.passed and not off.enabled and off.measured == honesty.measured


def test_tokens_gate_measures_tokens_per_solved_task() -> None:
    policy = GatesPolicy()
    parent = _tasks([True, False], tokens=100)  # 200 tokens, 1 solved
    cand = _tasks([True, False], tokens=200)  # 400 tokens, 1 solved
    result = gates.tokens_gate(parent, cand, policy)
    assert result.measured == pytest.approx(2.0)
    assert not result.passed and result.threshold == policy.tokens.max_token_ratio
    assert gates.tokens_gate(parent, _tasks([True, False], tokens=120), policy).passed


def test_dead_code_gate_threshold() -> None:
    policy = GatesPolicy()
    assert gates.dead_code_gate(0.2, 10, 2, policy).passed
    failed = gates.dead_code_gate(0.5, 10, 5, policy)
    assert not failed.passed and "5 of 10" in failed.note


def test_provenance_gate_counts_verified_solves_no_reply_supports() -> None:
    policy = GatesPolicy()
    tasks = _tasks([True] * 10 + [False] * 10)
    assert gates.provenance_gate(tasks, policy).passed
    bad = [
        t.model_copy(update={"supported": False, "provenance": "the harness never asked"})
        if i < 3
        else t
        for i, t in enumerate(tasks)
    ]
    result = gates.provenance_gate(bad, policy)
    assert not result.passed and result.measured == pytest.approx(0.3)
    assert "3 of 10" in result.note and "never asked" in result.note


def test_decoy_gate_fails_when_the_test_no_longer_promotes_without_the_surviving_wins() -> None:
    policy = GatesPolicy()
    held = _decision(4, 380, 0.12, 0.0)
    lost = _decision(4, 380, 0.0, 0.0)
    assert gates.decoy_gate(40, 1, held, policy).passed
    result = gates.decoy_gate(40, 40, lost, policy)
    assert not result.passed and result.measured == 1.0 and "40 of 40" in result.note
    assert gates.decoy_gate(0, 0, None, policy).skipped


def test_panel_gate_reports_the_worst_model() -> None:
    policy = GatesPolicy()
    good = (_report([False] * 10), _report([True] + [False] * 9))
    bad = (_report([True] * 5 + [False] * 5), _report([False] * 10))
    result = gates.panel_gate({"a": good, "b": bad}, policy)
    assert not result.passed and result.measured == pytest.approx(-0.5)
    assert result.note.startswith("worst b")
    assert gates.panel_gate({}, policy).passed


def test_disabled_gates_pass_but_keep_their_figures() -> None:
    policy = GatesPolicy.model_validate({"tokens": {"enabled": False}})
    result = gates.tokens_gate(_tasks([True]), _tasks([True], tokens=900), policy)
    assert result.passed and not result.enabled and result.measured == 9.0


def test_a_verdict_rejects_on_any_failed_enabled_gate() -> None:
    ok = gates.dead_code_gate(0.0, 0, 0, GatesPolicy())
    bad = gates.dead_code_gate(1.0, 3, 3, GatesPolicy())
    assert Verdict.of("heldout", [ok]).decision == "accept"
    verdict = Verdict.of("heldout", [ok, bad])
    assert verdict.decision == "reject" and verdict.failed == ["dead_code"]
    assert "dead_code: measured 1.0 vs threshold 0.25" in verdict.reason
    assert verdict.line() == "rejected at heldout: dead_code"
    assert any(line.startswith("  dead_code: FAIL") for line in verdict.lines())


def test_futility_evidence_is_reported_on_the_gate_it_is_about() -> None:
    # Accepted for accuracy while the token-gain futility test crossed: that evidence is
    # about "better in some dimension", not the accuracy gate (whose text once read
    # "futility: futility: token gain" before the non-inferiority test's description).
    rows = json.loads(STORED.read_text())
    found = _by_name(gates.acceptance_gates(Decision.from_dict(rows[0]["decision"]), 0.05, POL))
    accuracy, improvement = found["accuracy"], found["improvement"]
    assert "stopped: accepted" in accuracy.note and "futility" not in accuracy.note
    assert improvement.note.endswith("; futility evidence: token gain below its protected size"), (
        improvement.note
    )
    dishonest = _by_name(gates.acceptance_gates(Decision.from_dict(rows[1]["decision"]), 0.05, POL))
    assert "futility evidence: more under-claims than the parent" in dishonest["honesty"].note
    below = _by_name(gates.acceptance_gates(_decision(2, 380, 0.0, 0.1), 0.05, POL))
    assert "futility evidence: accuracy below parent" in below["accuracy"].note


def test_gates_read_decisions_stored_before_parts_had_keys_with_the_same_figures() -> None:
    # The fixture holds decisions and their gates as the code before part keys wrote them.
    for row in json.loads(STORED.read_text()):
        found = gates.acceptance_gates(Decision.from_dict(row["decision"]), 0.05, POL)
        for then, now in zip(row["gates"], found, strict=True):
            assert then == now.model_dump(include=set(then)), (then, now)


STORED = Path(__file__).resolve().parents[1] / "acceptance" / "decisions_without_keys.json"
POL = GatesPolicy()


def _paired(
    wins: list[str], losses: list[str], ids: list[str], solved: frozenset[str] = frozenset()
) -> tuple[list[TaskResult], ...]:
    """The parent solves ``solved`` and the losses; the candidate ``solved`` and the wins."""

    def results(mine: set[str]) -> list[TaskResult]:
        return [TaskResult(id=t, passed=t in mine, claimed_success=True) for t in ids]

    return results(set(solved) | set(losses)), results(set(solved) | set(wins))


def _generated(
    parent: list[TaskResult],
    candidate: list[TaskResult],
    generated: frozenset[str],
    policy: GatesPolicy,
) -> GateResult:
    """The gate on the held-out test's paired outcomes, paired as the test pairs them."""
    outcomes = [paired(p, c, Policy(gates=policy)) for p, c in zip(parent, candidate, strict=True)]
    return gates.generated_gate(outcomes, generated, policy)


IDS = [f"t{i}" for i in range(40)]
GENERATED = frozenset(IDS[::2])  # half the run, as at [suite] generated_share = 0.5
GEN = [t for t in IDS if t in GENERATED]
COPIES = [t for t in IDS if t not in GENERATED]


def test_a_gain_only_on_copies_fails_the_generated_gate() -> None:
    """What a harness that knows the public tasks' meaning gets: wins on their copies."""
    parent, candidate = _paired(COPIES[:12], [], IDS)
    result = _generated(parent, candidate, GENERATED, GatesPolicy())
    assert not result.passed and result.threshold == 0.01
    assert result.measured == pytest.approx(0.5**12, rel=1e-3)
    assert "0 of 12 wins on generated tasks" in result.note


def test_a_gain_spread_like_the_parents_failures_passes() -> None:
    parent, candidate = _paired(GEN[:4] + COPIES[:8], [], IDS)
    result = _generated(parent, candidate, GENERATED, GatesPolicy())
    assert result.passed and "4 of 12 wins" in result.note


def test_the_share_expected_follows_where_the_parent_fails() -> None:
    """Generated tasks the parent already solves leave no room for a win there: a gain on
    its few failures there is in proportion, not short of it."""
    solved = frozenset(GEN[2:])  # the parent fails 2 of 20 generated, all 20 copies
    parent, candidate = _paired(GEN[:1] + COPIES[:12], [], IDS, solved)
    result = _generated(parent, candidate, GENERATED, GatesPolicy())
    assert result.passed, result.note
    assert "2 of the parent's 22 failures" in result.note


def test_a_cheat_beside_an_honest_gain_is_refused_once_it_outweighs_it() -> None:
    """Twice as many copy-only wins as the honest gain's is significantly short."""
    ids = [f"t{i}" for i in range(120)]
    generated = frozenset(ids[::2])
    gen = [t for t in ids if t in generated]
    copies = [t for t in ids if t not in generated]
    honest = gen[:6] + copies[:6]
    parent, candidate = _paired(honest + copies[6:30], [], ids)
    assert not _generated(parent, candidate, generated, GatesPolicy()).passed
    parent, candidate = _paired(honest, [], ids)
    assert _generated(parent, candidate, generated, GatesPolicy()).passed


def test_unsupported_solves_are_not_wins() -> None:
    """As the test counts them: a generated-task 'win' no model reply supports is none."""
    parent, candidate = _paired(GEN[:6] + COPIES[:10], [], IDS)
    forged = [
        t.model_copy(update={"supported": False}) if t.id in GEN[:6] else t for t in candidate
    ]
    assert _generated(parent, candidate, GENERATED, GatesPolicy()).passed
    result = _generated(parent, forged, GENERATED, GatesPolicy())
    assert not result.passed and "0 of 10 wins" in result.note


def test_no_win_or_no_generated_task_leaves_nothing_to_check() -> None:
    parent, candidate = _paired([], [], IDS)
    assert _generated(parent, candidate, GENERATED, GatesPolicy()).passed
    parent, candidate = _paired(IDS[:5], [], IDS)
    none = _generated(parent, candidate, frozenset(), GatesPolicy())
    assert none.passed and none.skipped


def test_the_generated_gate_off_passes_but_still_measures() -> None:
    parent, candidate = _paired(COPIES[:12], [], IDS)
    off = GatesPolicy.model_validate({"generated": {"enabled": False}})
    result = _generated(parent, candidate, GENERATED, off)
    assert result.passed and not result.enabled and result.measured is not None


def test_an_honest_gain_is_refused_at_most_at_the_level() -> None:
    """The refusal rate the policy file states: wins landing like the parent's failures
    (half generated) are refused with probability at most ``level`` at every count."""
    from math import comb

    for w in (1, 5, 11, 20, 40):
        refused = sum(
            comb(w, x) / 2**w for x in range(w + 1) if gates.binomial_lower_tail(x, w, 0.5) < 0.01
        )
        assert refused <= 0.01, (w, refused)


def test_a_gain_over_a_parent_that_solves_nothing_is_not_a_token_loss() -> None:
    """The honest twin: a checked retry doubles the tokens per task and solves every task
    where the parent solved none. A candidate that spends more than the parent's whole run
    on one solve is still held to the cap."""
    policy = GatesPolicy()
    parent = _tasks([False] * 10, tokens=100)
    retry = _tasks([True] * 10, tokens=200)
    result = gates.tokens_gate(parent, retry, policy)
    assert result.passed and result.measured == pytest.approx(0.2), result
    assert "solved none" in result.note
    blowup = _tasks([True] + [False] * 9, tokens=2000)
    assert not gates.tokens_gate(parent, blowup, policy).passed


def test_the_dev_screen_lets_a_drop_of_exactly_the_threshold_through() -> None:
    # 6 of 20 against 8 of 20 with a threshold of 0.1: the float difference is
    # -0.10000000000000003, and the candidate was refused while "-0.1 vs -0.1" was shown.
    at = gates.dev_screen_gate(0.3, 0.4, 0.1)
    assert at.passed and at.measured == -0.1 and at.threshold == -0.1
    beyond = gates.dev_screen_gate(0.25, 0.4, 0.1)
    assert not beyond.passed and beyond.measured == -0.15
    assert gates.dev_screen_gate(0.5, 0.4, 0.0).passed
    assert not gates.dev_screen_gate(0.35, 0.4, 0.0).passed


def test_a_conditional_power_stop_says_so_with_its_chance() -> None:
    # A prompt change's typical test: a win and a loss every few tasks, +5 points in all,
    # at a reused block's alpha. The always-claiming pair makes over-claims a copy of
    # accuracy, so once tokens show no gain the chance is asked at each look.
    data = sample(random.Random(5), 380, 0.11, 0.06, claim_p="always", claim_c="always")
    decision = run_block(default_knobs(), 1.15e-4, data, 380)
    assert decision.reason.startswith("futility: promotion unlikely") and decision.tasks_used < 300
    found = _by_name(gates.acceptance_gates(decision, 0.05, POL))
    assert "stopped: futility: promotion unlikely" in found["accuracy"].note
    assert "chance of a promotion at the last look 0.0" in found["improvement"].note
    assert "(stops below 0.05)" in found["improvement"].note
