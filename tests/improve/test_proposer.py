"""What the proposer is shown, and how its structured replies become patches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.evaluation.coverage import NeverExecuted
from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve.proposer import FailedTask, build_prompt, proposal_request, structured_to_text
from daemon.patches import Proposal, parse_proposal
from daemon.providers.base import Message

pytestmark = pytest.mark.unit

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal" / "harness.py"


def _report(split: str) -> EvalReport:
    tasks = [
        TaskResult(id="simple_python_7", passed=False, claimed_success=True, output=[], tokens=90,
                   detail="simple_function_checker:wrong_count: expected 1 call, got 0"),
        TaskResult(id="simple_python_9", passed=True, claimed_success=True, tokens=80),
    ]  # fmt: skip
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
        ["c3 ('x'): rejected at heldout: tokens"],
    )
    text = messages[1].content or ""
    assert "def solve(task, ctx):" in text
    assert "Find the area of a triangle" in text and "triangle_area" in text
    assert "expected 1 call, got 0" in text
    assert "harness.py lines 41-42 (functions: f)" in text
    assert "rejected at heldout: tokens" in text
    assert "verified accuracy 50%" in text and "gap +50%" in text


def test_the_proposer_is_never_handed_a_heldout_report() -> None:
    with pytest.raises(ValueError, match="dev-split"):
        build_prompt({"harness.py": ""}, _report("heldout"), [], [])


def test_structured_edits_become_search_replace_blocks() -> None:
    source = SEED.read_text()
    reply = json.dumps(
        {
            "rationale": "drop duplicate calls",
            "edits": [
                {
                    "file": "harness.py",
                    "search": "    output = answer(task, state)\n",
                    "replace": "    output = answer(task, state)\n    output = output\n",
                }
            ],
        }
    )
    parsed = parse_proposal(structured_to_text(reply))
    assert isinstance(parsed, Proposal), parsed
    assert parsed.rationale == "drop duplicate calls"
    assert "    output = answer(task, state)" in source
    # Not JSON at all: passed through for the parser to record as unparseable.
    assert structured_to_text("no idea") == "no idea"


def test_structured_request_pins_file_names() -> None:
    request = proposal_request(
        [Message(role="user", content="x")], max_tokens=100, temperature=0.5,
        structured_files=["harness.py", "helpers.py"],
    )  # fmt: skip
    assert request.response_schema is not None
    items = request.response_schema["properties"]["edits"]["items"]
    assert items["properties"]["file"]["enum"] == ["harness.py", "helpers.py"]
    free = proposal_request(
        [Message(role="user", content="x")], max_tokens=1, temperature=0, structured_files=None
    )
    assert free.response_schema is None
