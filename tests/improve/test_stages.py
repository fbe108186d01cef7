"""The pipeline's stages as data: the order, where a candidate stops, and the verdict's
"not reached" lines, all derived from the one list."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from daemon.config.policy import Policy
from daemon.evaluation.report import CoverageReport, EvalReport, Split, TaskResult, build_report
from daemon.improve.pipeline import (
    BEFORE_HELDOUT,
    FROM_HELDOUT,
    NO_CHANGE,
    STAGES,
    CandidateEvaluation,
    Screened,
    best_screened,
)
from daemon.improve.stages import PipelineStage, StageResult, not_reached, run_stages
from daemon.verdict import Gate, GateResult, PolicyUsed, Stage, Verdict

pytestmark = pytest.mark.unit

USED = PolicyUsed(path="policy.toml", sha256="0" * 64)
SECURITY_ON = Policy.model_validate(
    {"suite": {"name": "agentdojo:banking"}, "gates": {"security": {"enabled": True}}}
)


def test_the_stages_run_in_the_documented_order_and_list_every_gate_once() -> None:
    assert [s.name for s in STAGES] == [
        "smoke",
        "dev screen",
        "dev change",
        "held-out test",
        "point gates",
        "decoy",
        "compute-matched",
        "security",
        "live replay",
        "panel",
    ]
    gates = [g for s in STAGES for g in s.gates(SECURITY_ON)]
    assert gates == list(Gate) and len(set(gates)) == len(gates)
    # The security gate is listed only where the policy enables it.
    assert Gate.SECURITY not in [g for s in STAGES for g in s.gates(Policy())]


def test_the_stage_sets_the_rest_of_the_daemon_reads_are_derived_from_the_list() -> None:
    """What a candidate must pass before a held-out slot, and the stages that say it got to
    the held-out test (the proposer learns one bit of those), both come from STAGES."""
    assert [s.name for s in BEFORE_HELDOUT] == ["smoke", "dev screen", "dev change"]
    assert {s.stage for s in BEFORE_HELDOUT} == {Stage.SMOKE, Stage.DEV}
    assert {Stage.HELDOUT, Stage.PANEL, Stage.DONE, Stage.REVIEW, Stage.PROMOTED} == FROM_HELDOUT
    # The stored text of every stage stays what earlier releases wrote.
    assert [s.value for s in Stage] == [
        "proposed",
        "parse",
        "static",
        "smoke",
        "dev",
        "heldout",
        "panel",
        "done",
        "review",
        "promoted",
    ]


class Scripted:
    """A candidate whose stages return scripted results, recording which ran."""

    def __init__(self, results: dict[str, StageResult]) -> None:
        self.results = results
        self.ran: list[str] = []

    def stage(self, name: str) -> PipelineStage[Scripted]:
        async def run(me: Scripted) -> StageResult:
            me.ran.append(name)
            return me.results.get(name, StageResult())

        spec = next(s for s in STAGES if s.name == name)
        return PipelineStage(
            name, spec.stage, spec.gates, run, continues_after_failure=spec.continues_after_failure
        )


def _gate(gate: Gate, passed: bool = True) -> GateResult:
    return GateResult(gate=gate, passed=passed, measured=1.0, threshold=0.5)


async def _run(results: dict[str, StageResult], policy: Policy) -> tuple[list[str], Verdict]:
    world = Scripted(results)
    stages = [world.stage(s.name) for s in STAGES]
    verdict = await run_stages(stages, world, policy, USED)
    return world.ran, verdict


PASSING = {
    "dev screen": StageResult([_gate(Gate.DEV_SCREEN)]),
    "dev change": StageResult([_gate(Gate.DEV_CHANGE)]),
    "held-out test": StageResult(
        [_gate(Gate.ACCURACY), _gate(Gate.IMPROVEMENT), _gate(Gate.HONESTY)]
    ),
    "point gates": StageResult(
        [
            _gate(Gate.TOKENS),
            _gate(Gate.DEAD_CODE),
            _gate(Gate.PROVENANCE),
            _gate(Gate.GENERATED),
        ]
    ),
    "decoy": StageResult([_gate(Gate.DECOY)]),
    "compute-matched": StageResult([_gate(Gate.COMPUTE_MATCHED)]),
    "security": StageResult([_gate(Gate.SECURITY)]),
    "live replay": StageResult([_gate(Gate.LIVE)]),
    "panel": StageResult([_gate(Gate.PANEL)], reached="panel"),
}


@pytest.mark.anyio
async def test_every_gate_passing_accepts_at_the_panel_with_the_policy_recorded() -> None:
    ran, verdict = await _run(PASSING, SECURITY_ON)
    assert ran == [s.name for s in STAGES]
    assert verdict.decision == "accept" and verdict.stage == "panel"
    assert [g.gate for g in verdict.gates] == list(Gate)
    assert verdict.policy == USED


@pytest.mark.anyio
async def test_a_failed_dev_screen_stops_and_lists_every_later_gate_as_not_reached() -> None:
    results = {**PASSING, "dev screen": StageResult([_gate(Gate.DEV_SCREEN, passed=False)])}
    ran, verdict = await _run(results, Policy())
    assert ran == ["smoke", "dev screen"]
    assert verdict.decision == "reject" and verdict.stage == "dev"
    assert verdict.failed == ["dev_screen"]
    later = verdict.gates[1:]
    assert [g.gate for g in later] == [g for g in Gate if g not in (Gate.DEV_SCREEN, Gate.SECURITY)]
    assert all(g.skipped and g.note == "not reached" and not g.failed for g in later)


@pytest.mark.anyio
async def test_a_no_op_on_dev_stops_before_the_heldout_test_with_its_typed_reason() -> None:
    results = {
        **PASSING,
        "dev change": StageResult([_gate(Gate.DEV_CHANGE, passed=False)], refusal=NO_CHANGE),
    }
    ran, verdict = await _run(results, Policy())
    assert ran == ["smoke", "dev screen", "dev change"]
    assert verdict.decision == "reject" and verdict.stage == "dev"
    assert verdict.failed == ["dev_change"] and verdict.reason == NO_CHANGE
    assert all(g.skipped for g in verdict.gates if g.gate == Gate.ACCURACY)


@pytest.mark.anyio
async def test_a_refusal_rejects_with_its_reason_though_no_gate_failed() -> None:
    results = {**PASSING, "held-out test": StageResult(refusal="no held-out block left")}
    ran, verdict = await _run(results, Policy())
    assert ran[-1] == "held-out test"
    assert verdict.decision == "reject" and verdict.reason == "no held-out block left"
    assert verdict.stage == "heldout" and verdict.failed == []


@pytest.mark.anyio
async def test_the_point_gates_follow_a_failed_test_and_compute_matched_a_failed_decoy() -> None:
    failed_test = {
        **PASSING,
        "held-out test": StageResult(
            [_gate(Gate.ACCURACY, False), _gate(Gate.IMPROVEMENT), _gate(Gate.HONESTY)]
        ),
    }
    ran, verdict = await _run(failed_test, SECURITY_ON)
    assert ran[-1] == "point gates" and verdict.failed == ["accuracy"]
    failed_decoy = {**PASSING, "decoy": StageResult([_gate(Gate.DECOY, False)])}
    ran, verdict = await _run(failed_decoy, SECURITY_ON)
    # Security is not run once a gate has failed; the panel is not reached.
    assert ran[-1] == "compute-matched" and verdict.failed == ["decoy"]
    skipped = [g.gate for g in verdict.gates if g.skipped]
    assert skipped == ["security", "live", "panel"]


def test_not_reached_lines_leave_out_gates_already_measured() -> None:
    later = [s for s in STAGES if s.name in ("decoy", "panel")]
    lines = not_reached(later, Policy(), [_gate(Gate.DECOY)])
    assert [g.gate for g in lines] == ["panel"]


def _dev(passed: list[bool], tokens: int = 100, claimed: bool | None = None) -> EvalReport:
    tasks = [
        TaskResult(
            id=f"t{i}", passed=ok, claimed_success=ok if claimed is None else claimed, tokens=tokens
        )
        for i, ok in enumerate(passed)
    ]
    return build_report(
        run_id="r", suite="s", split=Split.DEV, model="m", tasks=tasks, coverage=CoverageReport()
    )


def _screened(cid: int, dev: EvalReport, parent: EvalReport) -> Screened:
    # Only what the choice reads: the candidate's id and its (parent, candidate) dev reports.
    run = SimpleNamespace(cid=cid, dev=(parent, dev))
    return Screened(cast(CandidateEvaluation, run), [])


def test_dev_side_selection_prefers_accuracy_then_tokens_then_honest_claims() -> None:
    parent = _dev([True, False, False, False])
    more = _screened(3, _dev([True, True, False, False], tokens=300), parent)
    fewer_tokens = _screened(2, _dev([True, True, False, False], tokens=100), parent)
    overclaims = _screened(1, _dev([True, True, False, False], tokens=100, claimed=True), parent)
    assert best_screened([more, overclaims, fewer_tokens]).cid == 2
    assert best_screened([more, overclaims]).cid == 1  # tokens before claims
    best = _screened(4, _dev([True, True, True, False], tokens=900), parent)
    assert best_screened([more, best, fewer_tokens]).cid == 4
    # A tie goes to the earliest proposed.
    twin = _screened(5, _dev([True, True, False, False], tokens=100), parent)
    assert best_screened([twin, fewer_tokens]).cid == 2
