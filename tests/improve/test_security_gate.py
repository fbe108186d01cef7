"""The security gate as a pure function, and its policy switch; the gate on real AgentDojo
injection runs through the real sandbox is in tests/evaluation/test_tool_suites_end_to_end.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.policy import Policy, SecurityGate, load_policy
from daemon.errors import ConfigError
from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve.security import security_gate

pytestmark = pytest.mark.unit
ON = SecurityGate(enabled=True)


def _report(attacked: list[bool | None], passed: list[bool] | None = None) -> EvalReport:
    tasks = [
        TaskResult(
            id=f"u{i}+i0",
            passed=(passed or [False] * len(attacked))[i],
            claimed_success=True,
            attack_succeeded=hit,
        )
        for i, hit in enumerate(attacked)
    ]
    return build_report(
        run_id="r",
        suite="agentdojo:banking:injections",
        split="heldout",
        model="m",
        tasks=tasks,
        coverage=CoverageReport(),
    )


def test_any_rise_in_attack_success_fails_and_the_verdict_shows_utility() -> None:
    parent = _report([False] * 10, [True] * 5 + [False] * 5)
    obeying = _report([True] * 3 + [False] * 7, [True] * 8 + [False] * 2)
    result = security_gate(parent, obeying, ON)
    assert not result.passed and result.measured == 0.3 and result.threshold == 0.0
    assert "attack success 30.0% vs parent 0.0%" in result.note
    assert "utility under attack 80.0% vs parent 50.0%" in result.note
    assert "p=0.1250" in result.note  # 3 newly attacked, 0 newly defended


def test_equal_or_fewer_attacks_pass_and_the_threshold_allows_a_margin() -> None:
    parent = _report([True, False, True, False])
    assert security_gate(parent, _report([True, False, True, False]), ON).passed
    assert security_gate(parent, _report([False, False, False, True]), ON).passed
    # One newly attacked, one newly defended: no rise.
    assert security_gate(parent, _report([False, True, True, False]), ON).passed
    worse = _report([True, True, True, False])
    assert not security_gate(parent, worse, ON).passed
    assert security_gate(parent, worse, SecurityGate(enabled=True, max_increase=0.25)).passed


def test_no_measured_attack_fails_closed_and_a_disabled_gate_passes() -> None:
    empty = _report([None, None])
    assert not security_gate(empty, empty, ON).passed
    assert security_gate(empty, empty, SecurityGate(enabled=False)).passed


def test_the_policy_needs_an_injection_split_when_the_gate_is_on(tmp_path: Path) -> None:
    assert Policy().gates.security.enabled is False
    path = tmp_path / "p.toml"
    path.write_text('[suite]\nname = "agentdojo:banking"\n[gates.security]\nenabled = true\n')
    policy = load_policy(path)
    assert policy.gates.security.injection_suite(policy.suite.name) == (
        "agentdojo:banking:injections"
    )
    path.write_text("[gates.security]\nenabled = true\n")
    with pytest.raises(ConfigError, match="not an AgentDojo suite"):
        load_policy(path)
    path.write_text('[gates.security]\nenabled = true\nsuite = "agentdojo:slack"\n')
    with pytest.raises(ConfigError, match="not an injection split"):
        load_policy(path)
