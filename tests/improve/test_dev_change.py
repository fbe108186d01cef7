"""What counts as an observable change on dev: anything a task's result records of the
harness's behaviour, except token counts within the policy's noise."""

from __future__ import annotations

import pytest

from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve.pipeline import changed_tasks

pytestmark = pytest.mark.unit


def _report(*tasks: TaskResult) -> EvalReport:
    return build_report(
        run_id="r", suite="s", split="dev", model="m", tasks=list(tasks), coverage=CoverageReport()
    )


BASE = TaskResult(
    id="t1",
    passed=False,
    claimed_success=True,
    output=[{"name": "f", "arguments": {"x": 1}}],
    tokens=1000,
    model_calls=1,
)


def test_the_same_behaviour_with_tokens_within_noise_is_no_change() -> None:
    same = BASE.model_copy(update={"tokens": 1015, "wall_s": 9.0})
    assert changed_tasks(_report(BASE), _report(same), 0.02) == []


@pytest.mark.parametrize(
    "update",
    [
        {"output": [{"name": "f", "arguments": {"x": 2}}]},
        {"claimed_success": False},
        {"passed": True},
        {"model_calls": 2},
        {"error": "crash"},
        {"tokens": 900},  # a token saving is a change dev can see
    ],
)
def test_any_observable_difference_is_a_change(update: dict[str, object]) -> None:
    other = BASE.model_copy(update=update)
    assert changed_tasks(_report(BASE), _report(other), 0.02) == ["t1"]


def test_a_task_the_parent_did_not_run_counts_as_changed() -> None:
    other = BASE.model_copy(update={"id": "t2"})
    assert changed_tasks(_report(BASE), _report(BASE, other), 0.02) == ["t2"]
