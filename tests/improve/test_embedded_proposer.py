"""The embedded model as proposer, for real: llama.cpp takes the edit protocol's grammar
as it is (never relaxed), different seeds give different proposals, and what it writes
becomes patches of the seed that apply."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from daemon.config.policy import PatchPolicy, RetryPolicy
from daemon.config.settings import LoadedSettings, Settings
from daemon.evaluation.report import CoverageReport, TaskResult, build_report
from daemon.improve.proposer import components, edit_protocol, moves
from daemon.improve.proposer.prompt import FailedTask, build_prompt, proposal_request
from daemon.patches import ParseFailure, PatchRejected, Proposal, apply_proposal, static_check
from daemon.patches.targets import find_targets
from daemon.providers import Provider, make_provider
from daemon.providers.base import Message

pytestmark = [pytest.mark.anyio, pytest.mark.model, pytest.mark.slow]

SEED_DIR = Path(__file__).resolve().parents[2] / "seeds" / "minimal"


def _dev() -> tuple[list[FailedTask], object]:
    calls = [{"name": "calculate_bmi", "arguments": {"weight": 70, "height": 175}}] * 2
    tasks = [
        TaskResult(
            id="simple_python_107",
            passed=False,
            claimed_success=True,
            output=calls,
            tokens=300,
            detail="wrong_count: expected 1 call, got 2",
        ),
        TaskResult(id="simple_python_9", passed=True, claimed_success=True, tokens=280),
    ]
    dev = build_report(
        run_id="r",
        suite="bfcl",
        split="dev",
        model="local:smollm2-135m",
        tasks=tasks,
        coverage=CoverageReport(),
    )
    ask = [Message(role="user", content="Calculate the BMI of a person of 70 kg and 175 cm.")]
    expected = [{"calculate_bmi": {"weight": [70], "height": [175]}}]
    return [FailedTask(tasks[0], ask, expected)], dev


def _embedded(tmp_path: Path, asset_cache: Path) -> Provider:
    settings = LoadedSettings(
        settings=Settings(state_dir=tmp_path / "state", cache_dir=asset_cache),
        config_path=None,
        base_dir=tmp_path,
    )
    return make_provider("local:smollm2-135m", settings, RetryPolicy())


@pytest.mark.timeout(1200)  # two proposals on a busy 2-core machine
async def test_embedded_proposals_are_patches_that_apply(
    tmp_path: Path, asset_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    provider = _embedded(tmp_path, asset_cache)
    sources = {"harness.py": (SEED_DIR / "harness.py").read_text()}
    targets = find_targets(sources)
    failures, dev = _dev()
    messages = build_prompt(sources, dev, failures, "nothing tried yet", targets)  # type: ignore[arg-type]
    schema = edit_protocol.operations_schema(targets)
    replies, applied = [], 0
    try:
        for seed in (1, 2):
            request = proposal_request(
                messages, max_tokens=768, temperature=0.7, schema=schema, seed=seed
            )
            reply = await provider.chat(request)
            assert reply.finish_reason == "stop", reply  # the grammar's bounds end it in time
            replies.append(reply.content)
            parsed = edit_protocol.to_proposal(reply.content or "", sources, targets)
            assert isinstance(parsed, Proposal | PatchRejected), (reply.content, parsed)
            if isinstance(parsed, Proposal):
                dest = tmp_path / f"tree{seed}"
                try:
                    static_check(apply_proposal(SEED_DIR, parsed, dest), PatchPolicy())
                    applied += 1
                except PatchRejected:
                    pass  # its own line of code did not compile
                finally:
                    shutil.rmtree(dest, ignore_errors=True)
    finally:
        await provider.aclose()
    assert "relaxed" not in caplog.text  # llama.cpp took the grammar as it is
    assert len(set(replies)) == 2, replies  # fresh seeds, fresh proposals
    assert applied >= 1, replies


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("move", ["instruction", "demonstrate", "component"])
async def test_embedded_moves_are_patches_that_apply(
    tmp_path: Path, asset_cache: Path, caplog: pytest.LogCaptureFixture, move: moves.Move
) -> None:
    """Under each move's own grammar the embedded model makes that move (a demonstrate
    reply names only the offered solved task, a component reply one of the offered
    components), and the daemon's patch passes the static stage."""
    caplog.set_level(logging.WARNING)
    provider = _embedded(tmp_path, asset_cache)
    sources = {"harness.py": (SEED_DIR / "harness.py").read_text()}
    targets = find_targets(sources)
    failures, dev = _dev()
    demo = moves.Demo("simple_python_9", "What is the BMI of 60 kg and 160 cm?", [])
    offered = (
        components.Evidence("unique_calls", components.BY_KEY["unique_calls"].summary, 3),
        components.Evidence(
            "offered_tools_only", components.BY_KEY["offered_tools_only"].summary, 1
        ),
    )
    offer = moves.Offer(move, moves.prompt_constant(targets), (demo,), offered)
    messages = build_prompt(sources, dev, failures, "nothing tried yet", targets, offer=offer)  # type: ignore[arg-type]
    schema = edit_protocol.reply_schema(targets, offer)
    try:
        request = proposal_request(messages, max_tokens=768, temperature=0.7, schema=schema, seed=1)
        reply = await provider.chat(request)
    finally:
        await provider.aclose()
    assert reply.finish_reason == "stop", reply
    read = edit_protocol.read_reply(reply.content or "")
    assert not isinstance(read, ParseFailure), reply.content
    assert edit_protocol.move_of(read[0]) == move
    if move == "component":
        assert isinstance(read[0], edit_protocol.ChooseComponent), read
        assert read[0].key in {e.key for e in offered}, read
    parsed = edit_protocol.to_proposal(reply.content or "", sources, targets, offer)
    if isinstance(parsed, PatchRejected):  # only a hand-written examples header is refused
        assert "never by hand" in parsed.reason, parsed
        return
    assert isinstance(parsed, Proposal), (reply.content, parsed)
    if parsed.edits:  # an instruction equal to the current (empty) one changes nothing
        static_check(apply_proposal(SEED_DIR, parsed, tmp_path / "tree"), PatchPolicy())
    assert "relaxed" not in caplog.text
