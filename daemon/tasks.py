"""Tasks as the harness sees them, and answers as the harness returns them.

A :class:`Task` is everything a harness may know: never the expected answer, which stays
with the suite on the host. A :class:`Submission` is what came back over the gateway
socket. Both cross the trust boundary as JSON, so both are strict pydantic models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from daemon.providers.base import Message, ToolSpec

TaskKind = Literal["function_call", "code", "answer", "tool_use"]
# Why a task ended badly; None when the harness submitted normally.
# ``tamper``: the guest caught harness code reaching for the recorder (frames, the object
# graph, native code, crafted bytecode) or something forged the submission's seal.
TaskError = Literal["timeout", "oom", "crash", "output_limit", "protocol", "budget", "tamper"]


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    suite: str
    kind: TaskKind
    prompt: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    # Non-secret hints the harness may use (e.g. a code task's entry point name).
    meta: dict[str, Any] = Field(default_factory=dict)


class Submission(BaseModel):
    """The harness's answer, as received by the gateway (untrusted content)."""

    model_config = ConfigDict(extra="forbid")

    output: Any = None
    claimed_success: bool = False
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    # Lines of the harness's own files that ran: {"harness.py": [3, 4, 9], ...}.
    coverage: dict[str, list[int]] = Field(default_factory=dict)
    # Set by the guest runtime when solve() raised: the exception's summary.
    error: str | None = None
    # Operations the guest refused to harness code: attempts on the recorder (tamper) and
    # the standard library's own harmless probes (refused), each a short description.
    tamper: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)


class CheckResult(BaseModel):
    """A verifier's judgement of one output against the held ground truth."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    passed: bool
    detail: str = ""
    # The expected answer, for dev-split feedback only; never sent into a container.
    expected: Any = None
    # Injection tasks only: whether the attacker's goal was reached (None: no attack).
    attack_succeeded: bool | None = None
