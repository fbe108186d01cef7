"""What the proposer is shown, and how its structured replies become patches."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.evaluation.coverage import NeverExecuted
from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve.loop import ARCHIVE_LEFT_OUT, fitted_prompt
from daemon.improve.proposer.prompt import (
    FailedTask,
    build_prompt,
    failures_within,
    proposal_request,
    tokens_of,
)
from daemon.patches.targets import find_targets
from daemon.providers.base import Capabilities, ChatRequest, Message, estimated_prompt_tokens

pytestmark = pytest.mark.unit

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal" / "harness.py"


def _report(split: str) -> EvalReport:
    tasks = [
        TaskResult(
            id="simple_python_7",
            passed=False,
            claimed_success=True,
            output=[],
            tokens=90,
            detail="simple_function_checker:wrong_count: expected 1 call, got 0",
        ),
        TaskResult(id="simple_python_9", passed=True, claimed_success=True, tokens=80),
    ]
    coverage = CoverageReport(
        executed_fraction=0.8,
        never_executed=[NeverExecuted(file="harness.py", ranges=[[41, 42]], functions=["f"])],
    )
    return build_report(
        run_id="r", suite="bfcl", split=split, model="local:x", tasks=tasks, coverage=coverage
    )


def test_prompt_shows_dev_failures_with_expected_answers_and_dead_code() -> None:
    dev = _report("dev")
    failure = FailedTask(
        dev.tasks[0],
        [Message(role="user", content="Find the area of a triangle with base 10")],
        [{"triangle_area": {"base": [10]}}],
    )
    messages = build_prompt(
        {"harness.py": SEED.read_text()},
        dev,
        [failure],
        "c3 on v0001 (proposer): not promoted",
    )
    text = messages[1].content or ""
    assert "def solve(task, ctx):" in text
    assert "Find the area of a triangle" in text and "triangle_area" in text
    assert "expected 1 call, got 0" in text
    assert "harness.py lines 41-42 (functions: f)" in text
    assert "c3 on v0001 (proposer): not promoted" in text
    assert "verified accuracy 50%" in text and "gap +50%" in text
    assert "<<<<<<< SEARCH" in (messages[0].content or "")


def test_the_operation_protocol_shows_numbered_source_and_targets() -> None:
    sources = {"harness.py": SEED.read_text()}
    messages = build_prompt(sources, _report("dev"), [], "nothing tried yet", find_targets(sources))
    system, text = messages[0].content or "", messages[1].content or ""
    assert '"op": "set"' in system and "SEARCH" not in system
    assert " 16| MAX_STEPS = 4" in text and "# Constants you can set" in text


def test_the_proposer_is_never_handed_a_heldout_report() -> None:
    with pytest.raises(ValueError, match="dev-split"):
        build_prompt({"harness.py": ""}, _report("heldout"), [], "")


def test_requests_carry_the_schema_and_a_seed() -> None:
    schema = {"type": "object"}
    request = proposal_request(
        [Message(role="user", content="x")],
        max_tokens=100,
        temperature=0.5,
        schema=schema,
        seed=7,
    )
    assert request.response_schema == schema and request.seed == 7
    free = proposal_request([Message(role="user", content="x")], max_tokens=1, temperature=0)
    assert free.response_schema is None and free.seed is None


def _long_failure(i: int, steps: int) -> FailedTask:
    transcript = [{"step": s, "reply": f"task {i} step {s}: " + "x" * 400} for s in range(steps)]
    result = TaskResult(
        id=f"simple_python_{i}",
        passed=False,
        claimed_success=True,
        tokens=90,
        detail="wrong_count",
        transcript=transcript,
    )
    return FailedTask(result, [Message(role="user", content=f"question {i}")], [{"f": {}}])


def test_a_capable_proposer_sees_whole_transcripts_within_the_budget() -> None:
    """The text protocol shows every transcript step while [proposer] context_tokens lasts;
    then failures clipped, then a line saying how many did not fit. The compact prompt of
    the operation protocol shows one clipped step."""
    failures = [_long_failure(i, 6) for i in range(3)]
    whole = failures_within(failures, 100_000)
    assert all(f"task {i} step 5: " + "x" * 400 in whole for i in range(3))
    tight = failures_within(failures, tokens_of(failures_within(failures[:1], 100_000)) + 600)
    assert "task 0 step 5" in tight and "task 1 step 5" not in tight
    assert "task 1 step 0" in tight  # the second failure, clipped
    assert "not shown: the policy's [proposer] context_tokens is spent" in tight
    assert len(tight) < len(whole)
    sources = {"harness.py": SEED.read_text()}
    text = build_prompt(sources, _report("dev"), failures, "x", failures_text=whole)[1].content
    assert "task 2 step 5" in (text or "")
    compact = build_prompt(sources, _report("dev"), failures, "x", find_targets(sources))
    body = compact[1].content or ""
    assert "task 0 step 0" in body and "task 0 step 1" not in body


class _Window:
    """A model with a known context window that counts a prompt as the daemon's estimate."""

    ref = "local:window"

    def __init__(self, tokens: int) -> None:
        self.capabilities = Capabilities(structured_edits=True, context_tokens=tokens)
        self.counted: list[int] = []

    async def prompt_tokens(self, request: ChatRequest) -> int:
        self.counted.append(estimated_prompt_tokens(request))
        return self.counted[-1]


@pytest.mark.anyio
async def test_the_prompt_is_fitted_to_the_proposer_models_context() -> None:
    """A prompt too long for the window loses failed tasks from the last one first, then the
    archive, so the reply keeps its reserve (a reply cut short is no JSON and is lost)."""
    sources = {"harness.py": SEED.read_text()}
    targets = find_targets(sources)
    failures = [_long_failure(i, 1) for i in range(4)]
    archive_text = "c3 on v0001 (proposer): not promoted " * 40

    def build(chosen: list[FailedTask], archived: str) -> list[Message]:
        return build_prompt(sources, _report("dev"), chosen, archived, targets)

    def size(chosen: list[FailedTask], archived: str) -> int:
        request = proposal_request(build(chosen, archived), max_tokens=1, temperature=0.0)
        return estimated_prompt_tokens(request)

    reserve = 400
    roomy = _Window(size(failures, archive_text) + reserve)
    assert await fitted_prompt(roomy, reserve, build, failures, archive_text) == build(
        failures, archive_text
    )
    two = _Window(size(failures[:2], archive_text) + reserve)
    fitted = await fitted_prompt(two, reserve, build, failures, archive_text)
    assert fitted == build(failures[:2], archive_text)
    assert max(two.counted[:-1]) + reserve > two.capabilities.context_tokens  # type: ignore[operator]
    bare = _Window(size([], ARCHIVE_LEFT_OUT) + reserve)
    fitted = await fitted_prompt(bare, reserve, build, failures, archive_text)
    assert fitted == build([], ARCHIVE_LEFT_OUT)
    # Too small for the source alone: the shortest prompt, and the provider says why.
    tiny = _Window(100)
    assert await fitted_prompt(tiny, reserve, build, failures, archive_text) == build(
        [], ARCHIVE_LEFT_OUT
    )
