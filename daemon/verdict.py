"""A candidate's verdict: the decision, the stage it reached, and every gate's figures.

A low-level contract: the improvement pipeline makes verdicts, the lineage stores them (as
this model's JSON, in ``candidates.verdict`` and in commit messages), the control views and
the proposer read them. Every gate result carries its measured value and threshold, so a
verdict explains itself.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Stage = Literal["static", "smoke", "dev", "heldout", "panel", "done"]


class GateResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gate: str
    enabled: bool = True
    passed: bool
    measured: float | None = None
    threshold: float | None = None
    note: str = ""
    skipped: bool = False
    # The test or rule that decided it (e.g. "mixture-of-bets e-process, H0: ...").
    test: str = ""

    @property
    def mark(self) -> str:
        """``pass``, ``FAIL``, ``off`` (disabled by the policy) or ``skip`` (not reached)."""
        if self.skipped:
            return "skip"
        if not self.enabled:
            return "off"
        return "pass" if self.passed else "FAIL"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["accept", "reject"]
    stage: Stage  # the last stage reached
    reason: str
    gates: list[GateResult] = Field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [g.gate for g in self.gates if g.enabled and not g.passed and not g.skipped]

    def lines(self, limit: int = 12) -> list[str]:
        """A short human summary: the reason, then one line per gate with its figures."""
        out = [self.reason] if self.reason else []
        for g in self.gates:
            mark = (
                "skip" if g.skipped else "off" if not g.enabled else "pass" if g.passed else "FAIL"
            )
            figures = [
                f"{k}={v}" for k, v in (("measured", g.measured), ("threshold", g.threshold))
            ]
            note = f" ({g.note})" if g.note else ""
            out.append(f"  {g.gate}: {mark} {' '.join(figures)}{note}")
        return out[:limit]

    def deciding(self) -> list[dict[str, object]]:
        """The gates that decided, as event data: the failed ones of a rejection, every
        enabled one of an acceptance (each with its figures)."""
        if self.decision == "reject":
            chosen = [g for g in self.gates if g.enabled and not g.passed and not g.skipped]
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
