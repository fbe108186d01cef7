"""The gates as pure functions: synthetic paired reports in, figures and pass/fail out."""

from __future__ import annotations

import pytest

from daemon.config.policy import GatesPolicy
from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve import gates

pytestmark = pytest.mark.unit


def _report(passed: list[bool], *, tokens: int = 100, claimed: bool | None = None) -> EvalReport:
    tasks = [
        TaskResult(
            id=f"t{i}",
            passed=ok,
            claimed_success=ok if claimed is None else claimed,
            tokens=tokens,
        )
        for i, ok in enumerate(passed)
    ]
    return build_report(
        run_id="r", suite="s", split="heldout", model="m", tasks=tasks, coverage=CoverageReport()
    )


def test_paired_counts_wins_and_losses_on_common_tasks_only() -> None:
    parent = _report([True, False, False, True])
    cand = _report([True, True, False, False, True])  # t4 has no parent result
    assert gates.paired(parent, cand) == (1, 1, 4)


def test_accuracy_gate_passes_a_clear_win_and_fails_a_tie() -> None:
    policy = GatesPolicy()
    parent = _report([False] * 20)
    better = _report([True] * 8 + [False] * 12)
    result = gates.accuracy_gate(parent, better, policy)
    assert result.passed and result.measured is not None and result.measured <= 0.05
    tie = gates.accuracy_gate(parent, _report([False] * 20), policy)
    assert not tie.passed and tie.threshold == policy.accuracy.alpha


def test_tokens_gate_measures_tokens_per_solved_task() -> None:
    policy = GatesPolicy()
    parent = _report([True, False], tokens=100)  # 200 tokens, 1 solved
    cand = _report([True, False], tokens=200)  # 400 tokens, 1 solved
    result = gates.tokens_gate(parent, cand, policy)
    assert result.measured == pytest.approx(2.0)
    assert not result.passed and result.threshold == policy.tokens.max_token_ratio
    assert gates.tokens_gate(parent, _report([True, False], tokens=120), policy).passed


def test_honesty_gate_on_the_verification_gap() -> None:
    policy = GatesPolicy()
    truthful = gates.honesty_gate(_report([True, False]), policy)
    assert truthful.passed and truthful.measured == 0.0
    boastful = gates.honesty_gate(_report([True, False, False, False], claimed=True), policy)
    assert not boastful.passed and boastful.measured == pytest.approx(0.75)


def test_dead_code_gate_threshold() -> None:
    policy = GatesPolicy()
    assert gates.dead_code_gate(0.2, 10, 2, policy).passed
    failed = gates.dead_code_gate(0.5, 10, 5, policy)
    assert not failed.passed and "5 of 10" in failed.note


def test_panel_gate_reports_the_worst_model() -> None:
    policy = GatesPolicy()
    good = (_report([False] * 10), _report([True] + [False] * 9))
    bad = (_report([True] * 5 + [False] * 5), _report([False] * 10))
    result = gates.panel_gate({"a": good, "b": bad}, policy)
    assert not result.passed and result.measured == pytest.approx(-0.5)
    assert result.note.startswith("worst b")
    assert gates.panel_gate({}, policy).passed


def test_disabled_gates_pass_but_keep_their_figures() -> None:
    policy = GatesPolicy.model_validate({"honesty": {"enabled": False}})
    result = gates.honesty_gate(_report([False, False], claimed=True), policy)
    assert result.passed and not result.enabled and result.measured == 1.0


def test_decide_rejects_on_any_failed_enabled_gate() -> None:
    ok = gates.dead_code_gate(0.0, 0, 0, GatesPolicy())
    bad = gates.dead_code_gate(1.0, 3, 3, GatesPolicy())
    assert gates.decide("heldout", [ok]).decision == "accept"
    verdict = gates.decide("heldout", [ok, bad])
    assert verdict.decision == "reject" and verdict.failed == ["dead_code"]
    assert "dead_code: measured 1.0 vs threshold 0.25" in verdict.reason
    assert verdict.line() == "rejected at heldout: dead_code"
    assert any(line.startswith("  dead_code: FAIL") for line in verdict.lines())
