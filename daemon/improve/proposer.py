"""The proposer: show a model the live harness and what went wrong on the dev split, and
ask for one patch with a short rationale.

What the proposer may see is decided here and nowhere else: harness source, the dev-split
report of the live version (failed tasks with prompts, transcripts and expected answers,
claimed vs verified, the token profile, never-executed code) and recent verdict lines
(pass/fail and which gate). Held-out ids, prompts, answers and scores never enter the
prompt: this module is never handed a held-out report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from daemon.evaluation.report import EvalReport, TaskResult
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


def edit_schema(files: list[str]) -> dict[str, Any]:
    """A JSON schema for a proposal, for models that need a grammar to write anything
    parseable (the embedded one). File names are pinned to the harness's own."""
    return {
        "type": "object",
        "properties": {
            # Bounded, so a rambling small model still gets to the edits within max_tokens
            # (llama.cpp grammars take bounds up to a few hundred; see local_grammar.MAX_REPEAT).
            "rationale": {"type": "string", "maxLength": 240},
            "edits": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "enum": sorted(files)},
                        "search": {"type": "string"},
                        "replace": {"type": "string"},
                    },
                    "required": ["file", "search", "replace"],
                },
            },
        },
        "required": ["rationale", "edits"],
    }


@dataclass(frozen=True)
class FailedTask:
    """One failed dev task as the proposer may see it."""

    result: TaskResult
    prompt: list[Message]
    expected: Any


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" …[{len(text) - limit} more]"


def _failure_block(f: FailedTask) -> str:
    r = f.result
    question = " / ".join(m.content or "" for m in f.prompt if m.role in ("system", "user"))
    lines = [
        f"- task {r.id}: {'error ' + r.error if r.error else 'wrong answer'}"
        f" (claimed success: {r.claimed_success}, tokens: {r.tokens})",
        f"  prompt: {_clip(question, 600)}",
        f"  harness output: {_clip(json.dumps(r.output, default=str), 400)}",
        f"  expected: {_clip(json.dumps(f.expected, default=str), 400)}",
    ]
    if r.detail:
        lines.append(f"  verifier: {_clip(r.detail, 300)}")
    for step in r.transcript[:4]:
        lines.append(f"  transcript: {_clip(json.dumps(step, default=str), 300)}")
    return "\n".join(lines)


def build_prompt(
    sources: dict[str, str],
    dev: EvalReport,
    failures: list[FailedTask],
    verdict_lines: list[str],
) -> list[Message]:
    if dev.split != "dev":
        raise ValueError("the proposer may only see dev-split reports")
    files = "\n\n".join(f"{name}\n```python\n{text}\n```" for name, text in sorted(sources.items()))
    never = [
        f"{n.file} lines {', '.join(f'{a}-{b}' if a != b else str(a) for a, b in n.ranges)}"
        + (f" (functions: {', '.join(n.functions)})" if n.functions else "")
        for n in dev.coverage.never_executed
    ]
    profile = (
        f"dev split, model {dev.model}: verified accuracy {dev.accuracy:.0%} on {dev.n} tasks; "
        f"claimed success {dev.claimed_success_rate:.0%} (gap {dev.verification_gap:+.0%}); "
        f"{dev.tokens_per_task:.0f} tokens and {dev.model_calls_per_task:.1f} model calls per "
        f"task; errors: {json.dumps(dev.errors) if dev.errors else 'none'}"
    )
    parts = [
        "# Harness source",
        files,
        "# How the current harness did",
        profile,
        "# Code that never ran on the dev tasks",
        "\n".join(never) or "none",
        "# Failed dev tasks",
        "\n".join(_failure_block(f) for f in failures) or "none",
        "# Recent verdicts on earlier proposals",
        "\n".join(verdict_lines) or "none yet",
        "Propose one change now.",
    ]
    return [
        Message(role="system", content=SYSTEM),
        Message(role="user", content="\n\n".join(parts)),
    ]


def proposal_request(
    messages: list[Message],
    *,
    max_tokens: int,
    temperature: float,
    structured_files: list[str] | None,
) -> ChatRequest:
    """``structured_files``: ask for JSON edits of these files (None: free text)."""
    schema = edit_schema(structured_files) if structured_files is not None else None
    return ChatRequest(
        messages=messages, max_tokens=max_tokens, temperature=temperature, response_schema=schema
    )


def structured_to_text(content: str) -> str:
    """Render a JSON edit list (structured output) as search/replace blocks for the parser.

    Anything that is not the expected JSON is returned unchanged, so the parser records it
    as an unparseable proposal with the raw text kept.
    """
    try:
        data = json.loads(content)
        edits = data["edits"]
        blocks = [f"Rationale: {str(data.get('rationale', '')).strip()}"]
        for e in edits:
            blocks.append(
                f"{e['file']}\n<<<<<<< SEARCH\n{str(e['search']).rstrip(chr(10))}\n=======\n"
                f"{str(e['replace']).rstrip(chr(10))}\n>>>>>>> REPLACE"
            )
        return "\n\n".join(blocks)
    except (ValueError, KeyError, TypeError):
        return content
