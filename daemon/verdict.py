"""A candidate's verdict: the decision, the stage it reached, and every gate's figures.

A low-level contract: the improvement pipeline makes verdicts, the lineage stores them (as
this model's JSON, in ``candidates.verdict`` and in commit messages), the control views and
the proposer read them. Every gate result carries its measured value and threshold, so a
verdict explains itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Stage(StrEnum):
    """Where a candidate is, or the last stage it reached: the one vocabulary of the
    ``candidates`` table's ``stage`` and of a verdict's. The pipeline's stages, smoke to
    panel, are those ``daemon.improve.pipeline.STAGES`` runs, in its order; a verdict is
    reached at one of them, at ``STATIC`` (intake) or at ``DONE``."""

    PROPOSED = "proposed"  # recorded, waiting for the pipeline
    PARSE = "parse"  # its text held no usable patch
    STATIC = "static"  # the static stage (applies, compiles, no program tried before)
    SMOKE = "smoke"
    DEV = "dev"
    HELDOUT = "heldout"
    PANEL = "panel"
    DONE = "done"  # every gate passed, yet it could not be promoted
    REVIEW = "review"  # held for a person ([gates.review]), or rejected by one
    PROMOTED = "promoted"


class Gate(StrEnum):
    """The gates a verdict can list (the key of a :class:`GateResult`). Stored verdicts keep
    their gate names as text, so a name retired from here still loads."""

    DEV_SCREEN = "dev_screen"
    # Whether the candidate behaves differently from its parent on some dev task at all.
    DEV_CHANGE = "dev_change"
    ACCURACY = "accuracy"
    IMPROVEMENT = "improvement"
    HONESTY = "honesty"
    TOKENS = "tokens"
    DEAD_CODE = "dead_code"
    PROVENANCE = "provenance"
    # An accuracy gain must show on the held-out tasks generated for this installation.
    GENERATED = "generated"
    DECOY = "decoy"
    COMPUTE_MATCHED = "compute_matched"
    SECURITY = "security"
    # Recorded live requests replayed: the harness must not write into what it serves.
    LIVE = "live"
    PANEL = "panel"


class GateResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gate: str  # a Gate's value
    enabled: bool = True
    passed: bool
    measured: float | None = None
    threshold: float | None = None
    note: str = ""
    skipped: bool = False
    # The test or rule that decided it (e.g. "mixture-of-bets e-process, H0: ...").
    test: str = ""

    @property
    def failed(self) -> bool:
        """Whether this gate fails the candidate: the one definition of a failed gate (an
        enabled gate that was measured and did not pass)."""
        return self.enabled and not self.passed and not self.skipped

    @property
    def mark(self) -> str:
        """``pass``, ``FAIL``, ``off`` (disabled by the policy) or ``skip`` (not reached)."""
        if self.skipped:
            return "skip"
        if not self.enabled:
            return "off"
        return "pass" if self.passed else "FAIL"


class PolicyUsed(BaseModel):
    """Which policy a verdict was reached under: the one snapshot its candidate's evaluation
    read every threshold, limit and budget from."""

    model_config = ConfigDict(extra="forbid")

    path: str  # the policy file
    sha256: str  # of the validated policy's canonical JSON (daemon.evaluation.runtime)


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["accept", "reject"]
    stage: Stage  # the last stage reached
    reason: str
    gates: list[GateResult] = Field(default_factory=list)
    # None: a verdict reached before any policy was read (static stage), or stored by a
    # version that did not record it.
    policy: PolicyUsed | None = None

    @classmethod
    def of(
        cls,
        stage: Stage,
        gates: Sequence[GateResult],
        *,
        reason: str = "",
        policy: PolicyUsed | None = None,
    ) -> Verdict:
        """The verdict the gates reach: a rejection if any failed or there is a ``reason``
        (a stage that could not be run), else an acceptance."""
        failed = [g for g in gates if g.failed]
        if failed or reason:
            why = reason or "; ".join(
                f"{g.gate}: measured {g.measured} vs threshold {g.threshold}" for g in failed
            )
            return cls(decision="reject", stage=stage, reason=why, gates=list(gates), policy=policy)
        return cls(
            decision="accept",
            stage=stage,
            reason="every gate passed",
            gates=list(gates),
            policy=policy,
        )

    @property
    def failed(self) -> list[str]:
        return [g.gate for g in self.gates if g.failed]

    def lines(self, limit: int = 12) -> list[str]:
        """A short human summary: the reason, then one line per gate with its figures."""
        out = [self.reason] if self.reason else []
        for g in self.gates:
            figures = [
                f"{k}={v}" for k, v in (("measured", g.measured), ("threshold", g.threshold))
            ]
            note = f" ({g.note})" if g.note else ""
            out.append(f"  {g.gate}: {g.mark} {' '.join(figures)}{note}")
        return out[:limit]

    def deciding(self) -> list[dict[str, object]]:
        """The gates that decided, as event data: the failed ones of a rejection, every
        enabled one of an acceptance (each with its figures)."""
        if self.decision == "reject":
            chosen = [g for g in self.gates if g.failed]
        else:
            chosen = [g for g in self.gates if g.enabled and not g.skipped]
        keys = ("gate", "passed", "measured", "threshold")
        return [g.model_dump(include=set(keys)) for g in chosen]

    def line(self) -> str:
        """One line for the proposer and commit messages: pass/fail and which gate."""
        if self.decision == "accept":
            return "accepted: every gate passed"
        failed = ", ".join(self.failed) or self.stage
        return f"rejected at {self.stage}: {failed}"
