"""The knobs of the sequential Pareto acceptance rule, and the rule's tests as data.

The rule itself (what is tested, why the false-promotion probability stays at most alpha) is
described in :mod:`daemon.acceptance.rule`; the explanation of a decision in
:mod:`daemon.acceptance.explain`.

Two tables say what the rule tests, so the rule, its explanation, the exact power and the
gates all iterate over them instead of naming each test:

* :class:`Dimension`: the ways a candidate can be better than its parent ((b) of the rule),
  each one record: its weight in the average, its superiority test, its futility test (the
  gain whose power the "no dimension improves" rule protects) and the per-task statistic
  both read. Adding a dimension is one member here (plus the knob it reads, and the
  policy key that sets it);
* :class:`Futility`: the futility tests that belong to no dimension (accuracy below the
  parent; more over- or under-claims than the parent, which the honesty veto would refuse).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from daemon.acceptance.eprocess import BetMixture, MeanTest, Side
from daemon.acceptance.observations import PairedOutcome

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
    fractions=(0.98, 0.9, 0.6, 0.3),
    weights=(0.4, 0.3, 0.2, 0.1),
)
"""Bets against the alternative; only cost and power depend on this choice.  Most weight on
bold bets: a candidate that ties its parent produces almost no discordant pairs, and against
a protected gain of a few points only a bet close to the whole wealth per concordant task
reaches 1/beta in tens of tasks rather than hundreds.  That is what frees a held-out slot
quickly for the next candidate; the price (a little power at gains near the protected size)
is in DESIGN.md's power table."""


@dataclass(frozen=True, eq=False)
class Statistic:
    """A bounded per-task paired statistic in [-1, 1] and how it is read from a task.

    ``ternary`` statistics take only -1, 0 and +1, so every test on one of them is a function
    of three counts shared by all its tests; the others keep a running wealth per test.
    ``parent_pass_caps`` says that a task the parent passes cannot be +1 (it can be no win,
    and the parent did not over-claim on it), which curtailment uses. Compared by identity:
    each statistic below exists once.
    """

    key: str
    read: Callable[[PairedOutcome], float]
    ternary: bool
    parent_pass_caps: bool = False


ACCURACY_DIFFERENCE = Statistic("accuracy", lambda o: o.accuracy_difference, True, True)
TOKEN_SAVING = Statistic("token_saving", lambda o: o.token_saving, False)
FEWER_OVER_CLAIMS = Statistic("fewer_over_claims", lambda o: o.over_claim_difference, True, True)
MORE_OVER_CLAIMS = Statistic("more_over_claims", lambda o: -o.over_claim_difference, True)
MORE_UNDER_CLAIMS = Statistic("more_under_claims", lambda o: o.under_claim_difference, True)


@dataclass(frozen=True, eq=False)
class DimensionRule:
    """One way to be better: its weight, superiority test, futility test and statistic.

    ``symbol`` names its e-value in the average (``E_acc``); ``superiority`` describes the
    test of "better in this dimension" (its null is 0: no better than the parent);
    ``futility_gain`` is the gain whose power the futility rule protects, ``futility_label``
    what that futility test is evidence of.
    """

    key: str
    symbol: str
    statistic: Statistic
    weight: Callable[[RuleKnobs], float]
    mixture: Callable[[RuleKnobs], BetMixture]
    superiority: str
    futility_gain: Callable[[RuleKnobs], float]
    futility_label: str


class Dimension(Enum):
    """The "better in some dimension" dimensions, in the order of the weighted average."""

    _value_: DimensionRule

    ACCURACY = DimensionRule(
        key="accuracy",
        symbol="acc",
        statistic=ACCURACY_DIFFERENCE,
        weight=lambda k: k.weight_accuracy,
        mixture=lambda k: k.sign_mixture,
        superiority="sign e-process on discordant pairs, H0: acc_C <= acc_P",
        futility_gain=lambda k: k.futility_accuracy_gain,
        futility_label="accuracy gain",
    )
    TOKENS = DimensionRule(
        key="tokens",
        symbol="tok",
        statistic=TOKEN_SAVING,
        weight=lambda k: k.weight_tokens,
        mixture=lambda k: k.token_mixture,
        superiority="betting e-process on r_i=(t_P-t_C)/max(t_P,t_C,1), H0: E[r]<=0",
        futility_gain=lambda k: k.futility_token_gain,
        futility_label="token gain",
    )
    HONESTY = DimensionRule(
        key="honesty",
        symbol="hon",
        statistic=FEWER_OVER_CLAIMS,
        weight=lambda k: k.weight_honesty,
        mixture=lambda k: k.sign_mixture,
        superiority="sign e-process on discordant over-claim pairs, H0: over_C>=over_P",
        futility_gain=lambda k: k.futility_honesty_gain,
        futility_label="honesty gain",
    )

    @property
    def rule(self) -> DimensionRule:
        return self._value_


@dataclass(frozen=True, eq=False)
class FutilityRule:
    """A futility test of no single dimension: evidence ``label`` once it reaches 1/beta.

    ``null`` is the mean the test bets against (``side`` says which way), on ``statistic``.
    """

    key: str
    label: str
    statistic: Statistic
    null: Callable[[RuleKnobs], float]
    side: Side


class Futility(Enum):
    """The futility tests that belong to no dimension."""

    _value_: FutilityRule

    BELOW_PARENT = FutilityRule(
        key="below_parent",
        label="accuracy below parent",
        statistic=ACCURACY_DIFFERENCE,
        null=lambda k: k.futility_accuracy_floor,
        side=Side.LESS,
    )
    # Evidence that the candidate's over- (under-) claims exceed the parent's by more than
    # the honesty tolerance: the honesty veto cannot be expected to pass.
    MORE_OVER_CLAIMS = FutilityRule(
        key="more_over_claims",
        label="more over-claims than the parent",
        statistic=MORE_OVER_CLAIMS,
        null=lambda k: k.honesty_tolerance,
        side=Side.GREATER,
    )
    MORE_UNDER_CLAIMS = FutilityRule(
        key="more_under_claims",
        label="more under-claims than the parent",
        statistic=MORE_UNDER_CLAIMS,
        null=lambda k: k.honesty_tolerance,
        side=Side.GREATER,
    )

    @property
    def rule(self) -> FutilityRule:
        return self._value_


FutilityKey = Dimension | Futility
"""A futility test: a dimension's (its gain below the protected size) or one of Futility."""


@dataclass(frozen=True)
class RuleKnobs:
    """Knobs of the acceptance rule.

    margin: non-inferiority margin on accuracy (absolute).  weight_*: convex weights of the
    "better in some dimension" average.  honesty_tolerance / honesty_bound: the veto.
    futility_level: beta of the futility e-processes.  futility_accuracy_floor: accuracy
    difference whose power the "below parent" rule protects.  futility_*_gain: gains whose
    power the "no dimension improves" rule protects (the accuracy one is a policy key: it
    trades how soon a tie frees its slot against power near that gain).
    futility_conditional_gain: the largest accuracy gain whose power the conditional-power
    stop protects (:mod:`daemon.acceptance.conditional`; 0 turns the stop off).  The
    mixtures set the bets.

    The knobs a policy sets (``[acceptance]`` and ``[gates.honesty]``) have no default here:
    their one source of defaults is the policy (``daemon.config.policy``, documented in
    ``policies/default.toml``), which the daemon, ``policy check``, the report and the
    benchmark all turn into knobs the same way (``daemon.improve.procedure.rule_knobs``).
    A second set of defaults here could only drift from those. The knobs no policy sets
    (curtailment, the token futility gain, mixtures) have theirs here, their only place;
    the honesty futility gain's default here serves callers that build knobs by hand, as
    ``rule_knobs`` sets it to the policy's accuracy gain (always-claiming harnesses
    over-claim exactly where they fail). The conditional-power stop has no knob of its own:
    it spends beta / 2 on its threshold and beta / 2 on its intervals, so it costs at most
    ``futility_level`` of power at any accuracy gain up to ``futility_conditional_gain``.
    """

    margin: float
    weight_accuracy: float
    weight_tokens: float
    weight_honesty: float
    honesty_tolerance: float
    honesty_bound: float
    futility: bool
    futility_level: float
    futility_accuracy_gain: float
    futility_conditional_gain: float
    curtailment: bool = True
    futility_accuracy_floor: float = 0.0
    futility_token_gain: float = 0.1
    futility_honesty_gain: float = 0.05
    sign_mixture: BetMixture = SIGN_MIXTURE
    non_inferiority_mixture: BetMixture = NON_INFERIORITY_MIXTURE
    token_mixture: BetMixture = TOKEN_MIXTURE
    futility_mixture: BetMixture = FUTILITY_MIXTURE

    def __post_init__(self) -> None:
        """Reject settings that break validity rather than just power."""
        weights = [d.rule.weight(self) for d in Dimension]
        if any(w < 0.0 for w in weights) or abs(math.fsum(weights) - 1.0) > 1e-9:
            raise ValueError("dimension weights must be >= 0 and sum to 1")
        if not 0.0 < self.margin < 1.0:
            raise ValueError("margin must lie in (0, 1)")
        if not 0.0 < self.futility_level < 1.0:
            raise ValueError("futility_level must lie in (0, 1)")
        if not 0.0 < self.futility_accuracy_gain < 1.0:
            raise ValueError("futility_accuracy_gain must lie in (0, 1)")
        if not 0.0 <= self.futility_conditional_gain < 1.0:
            raise ValueError("futility_conditional_gain must lie in [0, 1)")

    @cached_property
    def tests(self) -> RuleTests:
        """The one-sided tests these knobs run, built from the two tables."""
        fut = self.futility_mixture
        superiority = {
            d: MeanTest(d.rule.key, 0.0, Side.GREATER, -1.0, 1.0, d.rule.mixture(self))
            for d in Dimension
        }
        futility: list[tuple[FutilityKey, MeanTest, Statistic]] = []

        def add(key: FutilityKey, label: str, null: float, side: Side, stat: Statistic) -> None:
            # A test whose null lies on the statistic's bound could never collect evidence
            # (e.g. the claim tests when the honesty veto is off: tolerance 1), and no such
            # MeanTest exists; so it is not run.
            if -1.0 < null < 1.0:
                test = MeanTest(f"futility: {label}", null, side, -1.0, 1.0, fut)
                futility.append((key, test, stat))

        below = Futility.BELOW_PARENT.rule
        add(Futility.BELOW_PARENT, below.label, below.null(self), below.side, below.statistic)
        for d in Dimension:
            rule = d.rule
            add(d, rule.futility_label, rule.futility_gain(self), Side.LESS, rule.statistic)
        for f in (Futility.MORE_OVER_CLAIMS, Futility.MORE_UNDER_CLAIMS):
            add(f, f.rule.label, f.rule.null(self), f.rule.side, f.rule.statistic)
        return RuleTests(
            non_inferiority=MeanTest(
                "non-inferiority",
                -self.margin,
                Side.GREATER,
                -1.0,
                1.0,
                self.non_inferiority_mixture,
            ),
            superiority=superiority,
            futility=tuple(futility),
        )

    @property
    def conditional_stop(self) -> bool:
        """Whether the conditional-power stop runs (it is a futility rule: off with them)."""
        return self.futility and self.futility_conditional_gain > 0.0

    @cached_property
    def log_weights(self) -> tuple[float, ...]:
        """Log weights of the dimensions (in :class:`Dimension` order); -inf for weight 0."""
        return tuple(_log(d.rule.weight(self)) for d in Dimension)


def _log(x: float) -> float:
    return math.log(x) if x > 0.0 else -math.inf


@dataclass(frozen=True, eq=False)
class RuleTests:
    """The one-sided tests run on every task, and the statistics they read.

    ``futility`` lists (key, test, statistic) in the order they are checked; ``statistics``
    are the ternary statistics whose counts the state keeps and ``bounded`` the
    (test, statistic) pairs on real-valued statistics whose wealth it keeps, each in a fixed
    order so the state can hold them in tuples.
    """

    non_inferiority: MeanTest
    superiority: dict[Dimension, MeanTest]
    futility: tuple[tuple[FutilityKey, MeanTest, Statistic], ...]

    @cached_property
    def statistics(self) -> tuple[Statistic, ...]:
        """The ternary statistics any test reads, accuracy first."""
        found = [ACCURACY_DIFFERENCE]
        for stat in [d.rule.statistic for d in Dimension] + [s for _, _, s in self.futility]:
            if stat.ternary and stat not in found:
                found.append(stat)
        return tuple(found)

    @cached_property
    def bounded(self) -> tuple[tuple[MeanTest, Statistic], ...]:
        """The tests on real-valued statistics: the dimensions' first, then the futility
        tests'."""
        pairs = [(self.superiority[d], d.rule.statistic) for d in Dimension]
        pairs += [(test, stat) for _, test, stat in self.futility]
        return tuple((t, s) for t, s in pairs if not s.ternary)

    @cached_property
    def futility_of(self) -> dict[FutilityKey, MeanTest]:
        """The futility test of each key that is run."""
        return {key: test for key, test, _ in self.futility}

    # Where each test finds its e-value in a state: (test, ternary?, index into the state's
    # counts or bounded processes). Precomputed because the rule reads them on every task.

    def _position(self, test: MeanTest, statistic: Statistic) -> EValueSlot:
        if statistic.ternary:
            return test, True, self.statistics.index(statistic)
        return test, False, [t for t, _ in self.bounded].index(test)

    @cached_property
    def dimension_positions(self) -> tuple[EValueSlot, ...]:
        """Each dimension's superiority test, in :class:`Dimension` order."""
        return tuple(self._position(self.superiority[d], d.rule.statistic) for d in Dimension)

    @cached_property
    def futility_positions(self) -> tuple[EValueSlot, ...]:
        """Each futility test, in the order of ``futility``."""
        return tuple(self._position(test, stat) for _, test, stat in self.futility)

    @cached_property
    def futility_index(self) -> dict[FutilityKey, int]:
        """The position of each futility test that is run in ``futility``."""
        return {key: i for i, (key, _, _) in enumerate(self.futility)}

    @cached_property
    def readers(self) -> tuple[Callable[[PairedOutcome], float], ...]:
        """How each ternary statistic (``statistics``) is read from a task."""
        return tuple(s.read for s in self.statistics)

    @cached_property
    def bounded_readers(self) -> tuple[Callable[[PairedOutcome], float], ...]:
        """How the statistic of each bounded test (``bounded``) is read from a task."""
        return tuple(s.read for _, s in self.bounded)


EValueSlot = tuple[MeanTest, bool, int]
"""Where a test's e-value is kept in a state: (test, on a ternary statistic?, index)."""
