"""A decision of the sequential acceptance test that explains itself part by part.

Every part carries a typed key (:class:`PartKey`), what was measured, the threshold it was
held to and a description of its own test, so the pipeline turns it into the verdict's gate
results by key; the display label (``name``) is for people only and no code reads it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from daemon.acceptance.conditional import stop_level
from daemon.acceptance.eprocess import Side
from daemon.acceptance.knobs import Dimension, Futility, FutilityKey, RuleKnobs
from daemon.acceptance.observations import PairedOutcome
from daemon.acceptance.rule import (
    AcceptanceState,
    Outcome,
    StopReason,
    begin,
    best_log_any,
    best_log_non_inferiority,
    observe,
)


class PartKind(Enum):
    """What a part of a decision is: (a), (b), one dimension of (b), (c), futility, the
    conditional-power stop or curtailment."""

    NON_INFERIORITY = "non_inferiority"
    SUPERIORITY = "superiority"
    DIMENSION = "dimension"
    HONESTY_CHECK = "honesty_check"
    FUTILITY = "futility"
    CONDITIONAL_POWER = "conditional_power"
    CURTAILMENT = "curtailment"


PartSubject = Dimension | Futility | PartKind


@dataclass(frozen=True, slots=True)
class PartKey:
    """The typed key of a part: its kind, and which dimension, futility test or curtailed
    test it is about (``of``). Stored as text, ``kind`` or ``kind:of`` (e.g.
    ``dimension:tokens``, ``futility:below_parent``, ``curtailment:non_inferiority``)."""

    kind: PartKind
    of: PartSubject | None = None

    def __str__(self) -> str:
        if self.of is None:
            return self.kind.value
        tail = self.of.value if isinstance(self.of, PartKind) else self.of.rule.key
        return f"{self.kind.value}:{tail}"

    @classmethod
    def parse(cls, text: str) -> PartKey:
        """The key written by :meth:`__str__`; ValueError for anything else."""
        kind_text, _, tail = text.partition(":")
        kind = PartKind(kind_text)
        if not tail:
            return cls(kind)
        for subject in _SUBJECTS:
            key = subject.value if isinstance(subject, PartKind) else subject.rule.key
            if key == tail:
                return cls(kind, subject)
        raise ValueError(f"unknown part key {text!r}")


_SUBJECTS: tuple[PartSubject, ...] = (*Dimension, *Futility, *PartKind)

NON_INFERIORITY = PartKey(PartKind.NON_INFERIORITY)
SUPERIORITY = PartKey(PartKind.SUPERIORITY)
HONESTY_CHECK = PartKey(PartKind.HONESTY_CHECK)
CONDITIONAL_POWER = PartKey(PartKind.CONDITIONAL_POWER)


def dimension_key(dimension: Dimension) -> PartKey:
    """The part of one dimension of (b) alone."""
    return PartKey(PartKind.DIMENSION, dimension)


def futility_key(test: FutilityKey) -> PartKey:
    """The part of a futility test (a dimension's, or one of :class:`Futility`)."""
    return PartKey(PartKind.FUTILITY, test)


def curtailment_key(of: PartKind) -> PartKey:
    """The curtailment check of (a) (``NON_INFERIORITY``) or (b) (``SUPERIORITY``)."""
    return PartKey(PartKind.CURTAILMENT, of)


@dataclass(frozen=True, slots=True)
class Part:
    """One ingredient of a decision: what was measured, against what, by which test.

    ``name`` is a display label; ``test`` describes this part's own test; ``detail`` says,
    where there is more to say, how the figures decided (the honesty check's rule)."""

    key: PartKey
    name: str
    test: str
    measured: float
    threshold: float
    passed: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Estimates:
    """Descriptive numbers reported with every decision (no error control attached)."""

    tasks: int
    wins: int
    losses: int
    accuracy_difference: float
    token_ratio: float
    mean_token_saving: float
    over_rate_p: float
    over_rate_c: float
    under_rate_p: float
    under_rate_c: float
    brier_p: float
    brier_c: float


@dataclass(frozen=True, slots=True)
class Decision:
    """An outcome that explains itself part by part."""

    outcome: Outcome
    reason: str
    tasks_used: int
    block_size: int
    alpha: float
    parts: tuple[Part, ...]
    estimates: Estimates

    def part(self, key: PartKey) -> Part:
        """The part with ``key``; KeyError if this decision has none (e.g. a futility test
        that was not run)."""
        for p in self.parts:
            if p.key == key:
                return p
        raise KeyError(str(key))

    def has(self, key: PartKey) -> bool:
        return any(p.key == key for p in self.parts)

    def of_kind(self, kind: PartKind) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.key.kind is kind)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for storage (enums and keys as their text). The outcome is stored
        under ``verdict``, the name earlier versions wrote, so every row reads the same."""
        return {
            "verdict": self.outcome.value,
            "reason": self.reason,
            "tasks_used": self.tasks_used,
            "block_size": self.block_size,
            "alpha": self.alpha,
            "parts": [_finite(_part_dict(p)) for p in self.parts],
            "estimates": _finite(asdict(self.estimates)),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """A decision as :meth:`to_dict` stored it, by this version or an earlier one.

        Non-finite numbers were stored as None (JSON has none): they come back as infinity
        (a threshold no e-value reaches, an e-value past the cap) or, for estimates, NaN
        (no tasks to estimate from)."""
        return cls(
            outcome=Outcome(data["verdict"]),
            reason=str(data["reason"]),
            tasks_used=int(data["tasks_used"]),
            block_size=int(data["block_size"]),
            alpha=float(data["alpha"]),
            parts=tuple(_stored_part(p) for p in data["parts"]),
            estimates=_stored_estimates(data["estimates"]),
        )


def _part_dict(part: Part) -> dict[str, Any]:
    return {
        "key": str(part.key),
        "name": part.name,
        "test": part.test,
        "measured": part.measured,
        "threshold": part.threshold,
        "passed": part.passed,
        "detail": part.detail,
    }


def _finite(values: dict[str, Any]) -> dict[str, Any]:
    """Replace NaN and infinities by None, which JSON (and SQLite's JSON1) can store."""
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in values.items()
    }


# Rows in ``heldout_tests.decision`` written before parts had keys carry only the display
# label, ``name``. Those rows stay in a state dir for good (the alpha ledger is never
# rewritten), so their keys are derived from the labels that code wrote: this table is
# frozen at those labels and must not follow later changes to the labels.
_LEGACY_NAMES: dict[str, PartKey] = {
    "(a) non-inferiority": NON_INFERIORITY,
    "(b) better in some dimension": SUPERIORITY,
    "(b) accuracy alone": dimension_key(Dimension.ACCURACY),
    "(b) tokens alone": dimension_key(Dimension.TOKENS),
    "(b) honesty alone": dimension_key(Dimension.HONESTY),
    "(c) honesty gate": HONESTY_CHECK,
    "futility: accuracy below parent": futility_key(Futility.BELOW_PARENT),
    "futility: accuracy gain": futility_key(Dimension.ACCURACY),
    "futility: token gain": futility_key(Dimension.TOKENS),
    "futility: honesty gain": futility_key(Dimension.HONESTY),
    "futility: more over-claims than the parent": futility_key(Futility.MORE_OVER_CLAIMS),
    "futility: more under-claims than the parent": futility_key(Futility.MORE_UNDER_CLAIMS),
    "curtailment (a)": curtailment_key(PartKind.NON_INFERIORITY),
    "curtailment (b)": curtailment_key(PartKind.SUPERIORITY),
}


def _stored_estimates(data: Mapping[str, Any]) -> Estimates:
    def number(name: str) -> float:
        value = data[name]
        return math.nan if value is None else float(value)

    return Estimates(
        tasks=int(data["tasks"]),
        wins=int(data["wins"]),
        losses=int(data["losses"]),
        accuracy_difference=number("accuracy_difference"),
        token_ratio=number("token_ratio"),
        mean_token_saving=number("mean_token_saving"),
        over_rate_p=number("over_rate_p"),
        over_rate_c=number("over_rate_c"),
        under_rate_p=number("under_rate_p"),
        under_rate_c=number("under_rate_c"),
        brier_p=number("brier_p"),
        brier_c=number("brier_c"),
    )


def _stored_part(data: Mapping[str, Any]) -> Part:
    test, detail = str(data["test"]), str(data.get("detail", ""))
    if data.get("key"):
        key = PartKey.parse(data["key"])
    else:
        key = _LEGACY_NAMES[data["name"]]
        if key == HONESTY_CHECK:
            # Then the check's rule was appended to its test: "<test> (<how it decided>)".
            test, _, tail = test.partition(" (")
            detail = tail.removesuffix(")")
    measured, threshold = data["measured"], data["threshold"]
    return Part(
        key=key,
        name=str(data["name"]),
        test=test,
        measured=math.inf if measured is None else float(measured),
        threshold=math.inf if threshold is None else float(threshold),
        passed=bool(data["passed"]),
        detail=detail,
    )


def run_block(
    knobs: RuleKnobs,
    alpha: float,
    outcomes: Iterable[PairedOutcome],
    block_size: int,
    parent_failures: int | None = None,
) -> Decision:
    """Feed tasks in dispatch order until an outcome; reject if the block runs out."""
    state = begin(knobs, alpha, block_size, parent_failures)
    for outcome in outcomes:
        state = observe(state, outcome)
        if state.outcome is not Outcome.UNDECIDED:
            break
    return decision_of(state, block_complete=True)


def decision_of(state: AcceptanceState, block_complete: bool = False) -> Decision:
    """The current state's decision, explained part by part.

    With `block_complete` an undecided state is final and becomes a rejection (used when the
    evaluator has no more tasks to give, e.g. the block was cut short).
    """
    outcome, reason = state.outcome, state.stop_reason
    if outcome is Outcome.UNDECIDED and block_complete:
        outcome, reason = Outcome.REJECT, StopReason.BLOCK_EXHAUSTED
    text = "continue sampling" if reason is None else reason.value
    return Decision(
        outcome=outcome,
        reason=text,
        tasks_used=state.n,
        block_size=state.block_size,
        alpha=state.alpha,
        parts=_parts(state),
        estimates=_estimates(state),
    )


def _parts(state: AcceptanceState) -> tuple[Part, ...]:
    knobs = state.knobs
    inv_alpha = 1.0 / state.alpha
    inv_beta = 1.0 / knobs.futility_level
    check = state.honesty_check()
    average = " + ".join(f"{d.rule.weight(knobs):g}*E_{d.rule.symbol}" for d in Dimension)
    parts = [
        Part(
            NON_INFERIORITY,
            "(a) non-inferiority",
            f"mixture-of-bets e-process on d_i, H0: acc_C - acc_P <= -{knobs.margin:.3f}; "
            "measured = sup_n E_n",
            _exp(state.sup_log_non_inferiority),
            inv_alpha,
            state.sup_log_non_inferiority >= state.log_threshold,
        ),
        Part(
            SUPERIORITY,
            "(b) better in some dimension",
            f"average e-value {average}, H0: better in none; measured = sup_n E_n",
            _exp(state.sup_log_any),
            inv_alpha,
            state.sup_log_any >= state.log_threshold,
        ),
    ]
    for d in Dimension:
        weight = d.rule.weight(knobs)
        threshold = inv_alpha / weight if weight > 0 else math.inf
        log_value = state.log_value(d)
        parts.append(
            Part(
                dimension_key(d),
                f"(b) {d.rule.key} alone",
                f"{d.rule.superiority}; measured = current E_n; threshold 1/(w*alpha) at which "
                "it carries (b) alone",
                _exp(log_value),
                threshold,
                log_value >= math.log(threshold),
            )
        )
    parts.append(
        Part(
            HONESTY_CHECK,
            "(c) honesty check",
            "point estimate: max(over_C-over_P, under_C-under_P) <= tol, or both C rates <= bound",
            max(check.over_difference, check.under_difference),
            knobs.honesty_tolerance,
            check.passed,
            detail=check.explanation,
        )
    )
    for (key, test, statistic), log_value in zip(
        knobs.tests.futility, state.futility_logs(), strict=True
    ):
        # Side.LESS bets against "mean >= null", Side.GREATER against "mean <= null".
        null = ">=" if test.side is Side.LESS else "<="
        parts.append(
            Part(
                futility_key(key),
                test.name,
                f"mixture-of-bets e-process on {statistic.key}, H0: mean {null} "
                f"{test.null_mean:+.3f} (what the rule protects); measured = current E_n; "
                "passed = no futility evidence yet",
                _exp(log_value),
                inv_beta,
                not state.crossed(key),
            )
        )
    if state.chance is not None:
        parts.append(
            Part(
                CONDITIONAL_POWER,
                "conditional power",
                "chance of a promotion in the rest of the block at the best accuracy gain the "
                f"data leave plausible, up to {knobs.futility_conditional_gain:.3f}, with no "
                "other dimension gaining; measured = at the last look; passed = no stop",
                state.chance,
                stop_level(knobs.futility_level),
                state.chance >= stop_level(knobs.futility_level),
            )
        )
    if state.n < state.block_size:
        for kind, label, best in (
            (PartKind.NON_INFERIORITY, "(a)", best_log_non_inferiority(state)),
            (PartKind.SUPERIORITY, "(b)", best_log_any(state)),
        ):
            parts.append(
                Part(
                    curtailment_key(kind),
                    f"curtailment {label}",
                    "best e-value reachable if all remaining tasks favour the candidate",
                    _exp(best),
                    inv_alpha,
                    best >= state.log_threshold,
                )
            )
    return tuple(parts)


def _exp(log_value: float) -> float:
    """E-value from its log, capped at e^700 so reports never overflow."""
    return math.exp(min(log_value, 700.0))


def _estimates(state: AcceptanceState) -> Estimates:
    s, acc = state.summary, state.accuracy_counts
    n = max(s.n, 1)
    token_ratio = state.tokens_c / state.tokens_p if state.tokens_p else math.nan
    saving = state.token_saving_sum / s.n if s.n else math.nan
    return Estimates(
        tasks=s.n,
        wins=acc.plus,
        losses=acc.minus,
        accuracy_difference=(acc.plus - acc.minus) / n,
        token_ratio=token_ratio,
        mean_token_saving=saving,
        over_rate_p=s.over_rate_p,
        over_rate_c=s.over_rate_c,
        under_rate_p=s.under_rate_p,
        under_rate_c=s.under_rate_c,
        brier_p=s.brier_score_p,
        brier_c=s.brier_score_c,
    )
