"""The knobs of the sequential Pareto acceptance rule and the one-sided tests they define.

The rule itself (what is tested, why the false-promotion probability stays at most alpha) is
described in :mod:`daemon.acceptance.rule`; the explanation of a verdict in
:mod:`daemon.acceptance.explain`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from daemon.acceptance.eprocess import BetMixture, MeanTest, Side

SIGN_MIXTURE = BetMixture(
    fractions=(0.98, 0.93, 0.85, 0.7, 0.5),
    weights=(0.35, 0.25, 0.2, 0.12, 0.08),
)
"""Bets on discordant pairs.  Most weight on bold bets: with no losses about 11 wins must reach
1/(0.6 alpha_1) ~ 850, which needs bets worth nearly a doubling per win; the milder bets keep
power when a few losses are mixed in."""

NON_INFERIORITY_MIXTURE = BetMixture(
    fractions=(0.97, 0.85, 0.6, 0.35),
    weights=(0.4, 0.3, 0.2, 0.1),
)
"""Bets for non-inferiority.  With no discordance the e-value grows by at most 1/(1 - margin)
per task, so the boldest bet must carry real weight or NI could never be shown on a block."""

TOKEN_MIXTURE = BetMixture(
    fractions=(0.8, 0.5, 0.3, 0.15, 0.07),
    weights=(0.2, 0.2, 0.2, 0.2, 0.2),
)
"""Bets on relative token savings, which are small but numerous; a flat prior over scales."""

FUTILITY_MIXTURE = BetMixture(
    fractions=(0.9, 0.6, 0.35, 0.15),
    weights=(0.25, 0.25, 0.25, 0.25),
)
"""Bets against the alternative; only cost and power depend on this choice."""


@dataclass(frozen=True)
class AcceptancePolicy:
    """Knobs of the acceptance rule; defaults are the recommended policy (see DESIGN.md).

    margin: non-inferiority margin on accuracy (absolute).  weight_*: convex weights of the
    "better in some dimension" average.  honesty_tolerance / honesty_bound: the gate.
    futility_level: beta of the futility e-processes.  futility_accuracy_floor: accuracy
    difference whose power the "below parent" rule protects.  futility_*_gain: gains whose
    power the "no dimension improves" rule protects.  The mixtures set the bets.
    """

    margin: float = 0.04
    weight_accuracy: float = 0.6
    weight_tokens: float = 0.2
    weight_honesty: float = 0.2
    honesty_tolerance: float = 0.03
    honesty_bound: float = 0.05
    futility: bool = True
    curtailment: bool = True
    futility_level: float = 0.1
    futility_accuracy_floor: float = 0.0
    futility_accuracy_gain: float = 0.03
    futility_token_gain: float = 0.1
    futility_honesty_gain: float = 0.05
    sign_mixture: BetMixture = SIGN_MIXTURE
    non_inferiority_mixture: BetMixture = NON_INFERIORITY_MIXTURE
    token_mixture: BetMixture = TOKEN_MIXTURE
    futility_mixture: BetMixture = FUTILITY_MIXTURE

    def __post_init__(self) -> None:
        """Reject settings that break validity rather than just power."""
        weights = (self.weight_accuracy, self.weight_tokens, self.weight_honesty)
        if any(w < 0.0 for w in weights) or abs(math.fsum(weights) - 1.0) > 1e-9:
            raise ValueError("dimension weights must be >= 0 and sum to 1")
        if not 0.0 < self.margin < 1.0:
            raise ValueError("margin must lie in (0, 1)")
        if not 0.0 < self.futility_level < 1.0:
            raise ValueError("futility_level must lie in (0, 1)")

    @cached_property
    def tests(self) -> AcceptanceTests:
        """The eight one-sided tests this policy runs."""
        sign, fut = self.sign_mixture, self.futility_mixture
        return AcceptanceTests(
            accuracy=MeanTest("accuracy", 0.0, Side.GREATER, -1.0, 1.0, sign),
            non_inferiority=MeanTest(
                "non-inferiority",
                -self.margin,
                Side.GREATER,
                -1.0,
                1.0,
                self.non_inferiority_mixture,
            ),
            tokens=MeanTest("tokens", 0.0, Side.GREATER, -1.0, 1.0, self.token_mixture),
            honesty=MeanTest("honesty", 0.0, Side.GREATER, -1.0, 1.0, sign),
            futility_below_parent=MeanTest(
                "futility: accuracy below parent",
                self.futility_accuracy_floor,
                Side.LESS,
                -1.0,
                1.0,
                fut,
            ),
            futility_accuracy=MeanTest(
                "futility: accuracy gain", self.futility_accuracy_gain, Side.LESS, -1.0, 1.0, fut
            ),
            futility_tokens=MeanTest(
                "futility: token gain", self.futility_token_gain, Side.LESS, -1.0, 1.0, fut
            ),
            futility_honesty=MeanTest(
                "futility: honesty gain", self.futility_honesty_gain, Side.LESS, -1.0, 1.0, fut
            ),
            futility_over_claims=MeanTest(
                "futility: more over-claims than the parent",
                self.honesty_tolerance,
                Side.GREATER,
                -1.0,
                1.0,
                fut,
            ),
            futility_under_claims=MeanTest(
                "futility: more under-claims than the parent",
                self.honesty_tolerance,
                Side.GREATER,
                -1.0,
                1.0,
                fut,
            ),
        )

    @cached_property
    def log_weights(self) -> tuple[float, float, float]:
        """Log weights of (accuracy, tokens, honesty) in the average; -inf for weight 0."""
        return (_log(self.weight_accuracy), _log(self.weight_tokens), _log(self.weight_honesty))


def _log(x: float) -> float:
    return math.log(x) if x > 0.0 else -math.inf


@dataclass(frozen=True)
class AcceptanceTests:
    """The one-sided tests run on every task (see the module docstring)."""

    accuracy: MeanTest
    non_inferiority: MeanTest
    tokens: MeanTest
    honesty: MeanTest
    futility_below_parent: MeanTest
    futility_accuracy: MeanTest
    futility_tokens: MeanTest
    futility_honesty: MeanTest
    # Evidence that the candidate's over- (under-) claims exceed the parent's by more than
    # the honesty tolerance: the honesty gate cannot be expected to pass.
    futility_over_claims: MeanTest
    futility_under_claims: MeanTest
