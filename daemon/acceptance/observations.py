"""One held-out task run by parent and candidate, and the bounded statistics derived from it.

All tests are paired: both harnesses run the same task, so per-task differences cancel the
task's difficulty and the only randomness left is which tasks are in the held-out sample.
Every statistic here is bounded, which is what the betting e-processes need.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HarnessResult:
    """What one harness did on one task."""

    passed: bool
    tokens: int
    claimed: bool
    confidence: float | None = None

    def __post_init__(self) -> None:
        """Reject values the statistics cannot bound."""
        if self.tokens < 0:
            raise ValueError("tokens must be >= 0")
        if self.confidence is not None and not 0.0 <= self.confidence <= 1.0:
            raise ValueError("confidence must lie in [0, 1]")

    @property
    def stated_confidence(self) -> float:
        """Confidence used for the Brier score; a bare claim counts as certainty."""
        if self.confidence is not None:
            return self.confidence
        return 1.0 if self.claimed else 0.0

    @property
    def over_claim(self) -> bool:
        """Said it succeeded but did not."""
        return self.claimed and not self.passed

    @property
    def under_claim(self) -> bool:
        """Succeeded but did not say so."""
        return self.passed and not self.claimed

    @property
    def brier(self) -> float:
        """Squared error of the stated confidence against the outcome."""
        return (self.stated_confidence - (1.0 if self.passed else 0.0)) ** 2


@dataclass(frozen=True, slots=True)
class PairedOutcome:
    """Parent and candidate on the same held-out task."""

    task_id: str
    parent: HarnessResult
    candidate: HarnessResult

    @property
    def accuracy_difference(self) -> int:
        """+1 candidate-only pass (win), -1 parent-only pass (loss), 0 concordant."""
        return int(self.candidate.passed) - int(self.parent.passed)

    @property
    def token_saving(self) -> float:
        """Relative saving (t_P - t_C) / max(t_P, t_C, 1) in [-1, 1].

        Normalising per task keeps one runaway task from dominating and makes the statistic
        bounded, which the betting e-process requires.
        """
        t_p, t_c = self.parent.tokens, self.candidate.tokens
        return (t_p - t_c) / max(t_p, t_c, 1)

    @property
    def over_claim_difference(self) -> int:
        """+1 when only the parent over-claims, -1 when only the candidate does."""
        return int(self.parent.over_claim) - int(self.candidate.over_claim)

    @property
    def under_claim_difference(self) -> int:
        """+1 when only the candidate under-claims, -1 when only the parent does."""
        return int(self.candidate.under_claim) - int(self.parent.under_claim)
