"""The proposer: show a model the live harness, what went wrong on the dev split and what was
tried before, and ask for one patch with a short rationale.

What the proposer may see is decided here and in :mod:`daemon.improve.archive` and nowhere
else: harness source, the dev-split report of the live version (failed tasks with prompts,
transcripts and expected answers, claimed vs verified, the token profile, never-executed
code) and the archive of earlier candidates, whose held-out outcomes are shown only as
"promoted" or "not promoted" (the lineage-wide error bound depends on it). Held-out ids,
prompts, answers, scores, e-values, task counts and timings never enter the prompt: this
module is never handed a held-out report.

Two protocols: free text (search/replace blocks or unified diffs, for models that write
them) and typed edit operations under a JSON schema (:mod:`daemon.improve.edit_protocol`,
for small models that only write well-formed output under a grammar).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from daemon.evaluation.report import EvalReport, Split, TaskResult
from daemon.improve.proposer import components, edit_protocol, moves
from daemon.patches.targets import Targets
from daemon.providers.base import ChatRequest, Message

SYSTEM = """\
You improve an agent harness: the Python code around a language model that solves tasks.
You see the harness source and how it did on some development tasks. Propose ONE small,
focused change that makes it solve more tasks, spend fewer tokens, or report its own
success more honestly. Every line you add must actually run: code that never executes is
rejected. Claims of success that are not true are rejected. Keep the entry point
`solve(task, ctx)` and its return shape.

Answer with a line starting "Rationale:" (one or two sentences), then one or more edits,
each in exactly this form:

path/to/file.py
<<<<<<< SEARCH
lines copied exactly from the current file
=======
the new lines
>>>>>>> REPLACE

A unified diff (---/+++/@@) is accepted too."""


@dataclass(frozen=True)
class FailedTask:
    """One failed dev task as the proposer may see it."""

    result: TaskResult
    prompt: list[Message]
    expected: Any


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" …[{len(text) - limit} more]"


@dataclass(frozen=True)
class Clips:
    """How much of each failed task is shown (the operation protocol's small models have a
    small context, so they get less of each)."""

    prompt: int = 600
    output: int = 400
    detail: int = 300
    transcript_steps: int = 4
    step: int = 300


COMPACT = Clips(prompt=300, output=160, detail=160, transcript_steps=1, step=200)
# A capable proposer's view of a failure: everything, the whole transcript included (full
# traces beat scores alone by a wide margin in Meta-Harness's ablation).
WHOLE = Clips(prompt=10**9, output=10**9, detail=10**9, transcript_steps=10**9, step=10**9)
# A rough, generous conversion for the budgets: English runs ~4 characters a token, code ~3.
CHARS_PER_TOKEN = 3


def _failure_block(f: FailedTask, clips: Clips) -> str:
    r = f.result
    question = " / ".join(m.content or "" for m in f.prompt if m.role in ("system", "user"))
    lines = [
        f"- task {r.id}: {'error ' + r.error if r.error else 'wrong answer'}"
        f" (claimed success: {r.claimed_success}, tokens: {r.tokens})",
        f"  prompt: {_clip(question, clips.prompt)}",
        f"  harness output: {_clip(json.dumps(r.output, default=str), clips.output)}",
        f"  expected: {_clip(json.dumps(f.expected, default=str), clips.output)}",
    ]
    if r.detail:
        lines.append(f"  verifier: {_clip(r.detail, clips.detail)}")
    for step in r.transcript[: clips.transcript_steps]:
        lines.append(f"  transcript: {_clip(json.dumps(step, default=str), clips.step)}")
    return "\n".join(lines)


def failures_within(failures: list[FailedTask], budget_tokens: int) -> str:
    """The failed tasks for a capable proposer: each whole (prompt, output, expected answer,
    verifier detail and every transcript step) while ``budget_tokens`` lasts; a failure that
    no longer fits whole is shown clipped, and one that does not fit clipped is left out
    (with a line saying how many were)."""
    left = budget_tokens * CHARS_PER_TOKEN
    blocks: list[str] = []
    for f in failures:
        for clips in (WHOLE, Clips()):
            block = _failure_block(f, clips)
            if len(block) + 1 <= left:
                blocks.append(block)
                left -= len(block) + 1
                break
    if len(blocks) < len(failures):
        blocks.append(
            f"({len(failures) - len(blocks)} more failed tasks not shown: "
            "the policy's [proposer] context_tokens is spent)"
        )
    return "\n".join(blocks)


def tokens_of(text: str) -> int:
    """The budgets' estimate of ``text``'s tokens."""
    return -(-len(text) // CHARS_PER_TOKEN)


def build_prompt(
    sources: dict[str, str],
    dev: EvalReport,
    failures: list[FailedTask],
    archive: str,
    targets: Targets | None = None,
    *,
    failures_text: str | None = None,
    offer: moves.Offer | None = None,
    history: list[moves.Trial] | None = None,
) -> list[Message]:
    """The proposer's messages. With ``targets``, the edit-operation protocol (numbered
    source and its targets, compact failures); without, the free-text patch protocol.
    ``failures_text``: the failed tasks rendered already (:func:`failures_within`, the text
    protocol's whole transcripts); None renders ``failures`` clipped. ``offer``: the move
    asked for (the operations protocol's; None: an edit), with ``history``, the earlier
    instruction candidates an instruction move is shown."""
    if dev.split != Split.DEV:
        raise ValueError("the proposer may only see dev-split reports")
    if offer is not None and offer.move != "edit":
        return _move_prompt(dev, failures, archive, offer, history or [])
    if targets is None:
        system, clips = SYSTEM, Clips()
        harness = "\n\n".join(
            f"{name}\n```python\n{text}\n```" for name, text in sorted(sources.items())
        )
    else:
        system, clips = edit_protocol.SYSTEM, COMPACT
        harness = edit_protocol.targets_section(sources, targets)
    never = [
        f"{n.file} lines {', '.join(f'{a}-{b}' if a != b else str(a) for a, b in n.ranges)}"
        + (f" (functions: {', '.join(n.functions)})" if n.functions else "")
        for n in dev.coverage.never_executed
    ]
    profile = _profile(dev)
    parts = [
        "# Harness source",
        harness,
        "# How the current harness did",
        profile,
        "# Code that never ran on the dev tasks",
        "\n".join(never) or "none",
        "# Failed dev tasks",
        (
            failures_text
            if failures_text is not None
            else "\n".join(_failure_block(f, clips) for f in failures)
        )
        or "none",
        "# Earlier proposals and what came of them",
        archive,
        "Propose one change now.",
    ]
    return [
        Message(role="system", content=system),
        Message(role="user", content="\n\n".join(parts)),
    ]


def _profile(dev: EvalReport) -> str:
    return (
        f"dev split, model {dev.model}: verified accuracy {dev.accuracy:.0%} on {dev.n} tasks; "
        f"claimed success {dev.claimed_success_rate:.0%} (gap {dev.verification_gap:+.0%}); "
        f"{dev.tokens_per_task:.0f} tokens and {dev.model_calls_per_task:.1f} model calls per "
        f"task; errors: {json.dumps(dev.errors) if dev.errors else 'none'}"
    )


def _move_prompt(
    dev: EvalReport,
    failures: list[FailedTask],
    archive: str,
    offer: moves.Offer,
    history: list[moves.Trial],
) -> list[Message]:
    """An instruction, demonstrate or component move's messages: its own system text, the
    prompt text it rewrites (none for a component), the dev profile and failures, its
    evidence, the archive."""
    failed = "\n".join(_failure_block(f, COMPACT) for f in failures) or "none"
    if offer.move == "component":
        parts = [
            "# How the current harness did",
            _profile(dev),
            "# Failed dev tasks",
            failed,
            "# Components you may add",
            components.section(offer.components),
            "# Earlier proposals and what came of them",
            archive,
            "Choose the component now.",
        ]
        return [
            Message(role="system", content=components.SYSTEM),
            Message(role="user", content="\n\n".join(parts)),
        ]
    if offer.prompt is None:
        raise ValueError(f"the {offer.move} move needs a prompt text constant")
    if offer.move == "instruction":
        system, ask = moves.INSTRUCTION_SYSTEM, "Write the new instruction now."
        evidence = ["# Earlier instructions and their dev results", moves.history_section(history)]
    else:
        system, ask = moves.DEMONSTRATE_SYSTEM, "Choose the worked examples now."
        evidence = ["# Solved dev tasks you may choose", moves.demos_section(offer.demos)]
    parts = [
        "# The prompt text",
        moves.current_section(offer.prompt),
        "# How the current harness did",
        _profile(dev),
        "# Failed dev tasks",
        failed,
        *evidence,
        "# Earlier proposals and what came of them",
        archive,
        ask,
    ]
    return [
        Message(role="system", content=system),
        Message(role="user", content="\n\n".join(parts)),
    ]


def proposal_request(
    messages: list[Message],
    *,
    max_tokens: int,
    temperature: float,
    schema: dict[str, Any] | None = None,
    seed: int | None = None,
) -> ChatRequest:
    """``schema``: the edit-operation protocol's reply schema (None: free text)."""
    return ChatRequest(
        messages=messages,
        max_tokens=max_tokens,
        temperature=temperature,
        response_schema=schema,
        seed=seed,
    )
