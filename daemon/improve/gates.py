"""The gates: pure functions from measured figures to gate results, one reason per gate.

Nothing here runs anything; the pipeline's stages (:mod:`daemon.improve.stages`, which say
in which order the gates are measured) feed in the sequential test's decision, reports, the
dead-code measure and the decoy re-run. A gate's result always carries the measured value,
the threshold it was held to and the test that decided it, so a verdict explains itself.
The held-out decision appears as three gates, read from its parts by key: ``accuracy``
(non-inferiority), ``improvement`` (better in at least one dimension) and ``honesty`` (the
veto); each also reports the futility evidence about it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from daemon.acceptance.explain import (
    CONDITIONAL_POWER,
    HONESTY_CHECK,
    NON_INFERIORITY,
    SUPERIORITY,
    Decision,
    PartKind,
    dimension_key,
)
from daemon.acceptance.knobs import Dimension, Futility, FutilityKey
from daemon.acceptance.observations import PairedOutcome
from daemon.acceptance.rule import Outcome
from daemon.config.policy import GatesPolicy
from daemon.evaluation.report import EvalReport, TaskResult
from daemon.verdict import Gate, GateResult


def _figure(x: float) -> float:
    """A readable, JSON-safe number (e-values can be astronomically large)."""
    return float(f"{x:.4g}") if math.isfinite(x) else 1e300


# Which held-out gate each futility test is evidence about: a dimension's (its gain below
# the protected size) is about "better in some dimension".
_FUTILITY_GATE: dict[Futility, Gate] = {
    Futility.BELOW_PARENT: Gate.ACCURACY,
    Futility.MORE_OVER_CLAIMS: Gate.HONESTY,
    Futility.MORE_UNDER_CLAIMS: Gate.HONESTY,
}


def _futility_label(key: FutilityKey) -> str:
    if isinstance(key, Dimension):
        return f"{key.rule.futility_label} below its protected size"
    return key.rule.label


def _futility_evidence(decision: Decision, gate: Gate) -> str:
    """The note's clause naming the crossed futility tests about ``gate`` ("" if none)."""
    found = []
    for part in decision.of_kind(PartKind.FUTILITY):
        key = part.key.of
        assert isinstance(key, Dimension | Futility)
        about = Gate.IMPROVEMENT if isinstance(key, Dimension) else _FUTILITY_GATE[key]
        if about is gate and not part.passed:
            found.append(_futility_label(key))
    return f"; futility evidence: {', '.join(found)}" if found else ""


def acceptance_gates(
    decision: Decision, alpha_lineage: float, policy: GatesPolicy
) -> list[GateResult]:
    """The sequential test's three parts, each with its e-value (or estimate) and threshold."""
    e = decision.estimates
    ni = decision.part(NON_INFERIORITY)
    better = decision.part(SUPERIORITY)
    veto = decision.part(HONESTY_CHECK)
    stopped = f"; stopped: {decision.reason}" if decision.reason else ""
    share = (
        f"alpha {decision.alpha:.3g} = this candidate's share of the lineage's {alpha_lineage:g}"
    )
    accuracy = GateResult(
        gate=Gate.ACCURACY,
        passed=ni.passed,
        measured=_figure(ni.measured),
        threshold=_figure(ni.threshold),
        test=ni.test,
        note=(
            f"{e.wins} newly solved, {e.losses} newly failed over {e.tasks} of "
            f"{decision.block_size} paired held-out tasks ({e.accuracy_difference:+.1%}); "
            f"{share}{stopped}" + _futility_evidence(decision, Gate.ACCURACY)
        ),
    )
    ratio = "-" if math.isnan(e.token_ratio) else f"{e.token_ratio:.3f}"
    odds = ""
    if decision.has(CONDITIONAL_POWER):
        chance = decision.part(CONDITIONAL_POWER)
        odds = (
            f"; chance of a promotion at the last look {chance.measured:.3f} (stops below "
            f"{chance.threshold:g})"
        )
    alone = []
    for d in Dimension:
        p = decision.part(dimension_key(d))
        alone.append(
            f"{d.rule.key} E={_figure(p.measured):g} (alone needs {_figure(p.threshold):g})"
        )
    improvement = GateResult(
        gate=Gate.IMPROVEMENT,
        passed=better.passed,
        measured=_figure(better.measured),
        threshold=_figure(better.threshold),
        test=better.test,
        note=(
            "; ".join(alone)
            + f"; token ratio C/P {ratio}; over-claims {e.over_rate_p:.1%} -> {e.over_rate_c:.1%}"
            + odds
            + _futility_evidence(decision, Gate.IMPROVEMENT)
        ),
    )
    honesty = GateResult(
        gate=Gate.HONESTY,
        enabled=policy.honesty.enabled,
        passed=veto.passed or not policy.honesty.enabled,
        measured=round(veto.measured, 4),
        threshold=veto.threshold,
        test=veto.test,
        note=(
            f"over-claims {e.over_rate_c:.1%} (parent {e.over_rate_p:.1%}), under-claims "
            f"{e.under_rate_c:.1%} (parent {e.under_rate_p:.1%}); absolute bound "
            f"{policy.honesty.bound:g}; Brier score {e.brier_c:.3f} (parent {e.brier_p:.3f})"
            + _futility_evidence(decision, Gate.HONESTY)
        ),
    )
    return [accuracy, improvement, honesty]


def _common_tokens(tasks: Sequence[TaskResult]) -> tuple[int, int, int]:
    return sum(t.tokens for t in tasks), sum(t.passed for t in tasks), len(tasks)


def relies_on_tokens(decision: Decision) -> bool:
    """Whether "better in some dimension" holds only thanks to tokens: the other dimensions,
    each against the level at which it would carry (b) alone, do not add up to it."""
    if not decision.part(SUPERIORITY).passed:
        return False
    others = [decision.part(dimension_key(d)) for d in Dimension if d is not Dimension.TOKENS]
    return sum(p.measured / p.threshold for p in others if math.isfinite(p.threshold)) < 1.0


def tokens_gate(
    parent: Sequence[TaskResult],
    candidate: Sequence[TaskResult],
    policy: GatesPolicy,
    decision: Decision | None = None,
) -> GateResult:
    """A hard cap on tokens per solved task relative to the parent, on the same tasks; and a
    candidate better only in tokens (``decision``) must spend fewer of them in total.

    The token e-process is about the typical relative saving per task, so a harness much
    cheaper on most tasks and far costlier on a few passes it while spending more in all;
    promoted for saving tokens, it must save them."""
    cfg = policy.tokens
    c_tokens, c_solved, n = _common_tokens(candidate)
    p_tokens, p_solved, _ = _common_tokens(parent)
    if p_solved and c_solved:
        ratio = (c_tokens / c_solved) / max(p_tokens / p_solved, 1e-9)
        note = (
            f"tokens per solved task {c_tokens / c_solved:.0f} vs parent {p_tokens / p_solved:.0f}"
        )
    elif c_solved == 0 and p_solved == 0:
        ratio = c_tokens / max(p_tokens, 1)
        note = f"neither solved any of {n} common tasks; tokens per task ratio"
    elif c_solved == 0:
        ratio = math.inf
        note = "the candidate solved none of the common tasks"
    else:
        # The parent's tokens bought no solve: priced as if they had bought one, so a
        # candidate that spends more to solve what the parent never did is not a token loss
        # (a checked retry over a parent that solves nothing), while spending more than the
        # parent's whole run for a single solve still is.
        ratio = (c_tokens / c_solved) / max(p_tokens, 1)
        note = (
            f"tokens per solved task {c_tokens / c_solved:.0f}; the parent solved none of the "
            f"common tasks with {p_tokens} tokens (priced as one solve)"
        )
    passed = ratio <= cfg.max_token_ratio
    measured, threshold = (round(ratio, 4) if math.isfinite(ratio) else None), cfg.max_token_ratio
    if decision is not None and relies_on_tokens(decision):
        total = c_tokens / max(p_tokens, 1)
        saved = total < 1.0
        note += (
            f"; better only in tokens, so it must spend fewer in total: {c_tokens} vs parent "
            f"{p_tokens} over {n} tasks ({'fewer' if saved else 'not fewer'} tokens in total)"
        )
        if passed and not saved:
            passed, measured, threshold = False, round(total, 4), 1.0
    return GateResult(
        gate=Gate.TOKENS,
        enabled=cfg.enabled,
        passed=passed or not cfg.enabled,
        measured=measured,
        threshold=threshold,
        test="point estimate on the tasks the held-out test used",
        note=note,
    )


def dev_screen_gate(candidate: float, parent: float, max_regression: float) -> GateResult:
    """Dev accuracy may drop at most ``max_regression`` below the parent's. Decided on the
    difference rounded as it is reported: accuracies are multiples of 1/n, and the raw
    float (0.3 - 0.4 = -0.10000000000000003) would refuse a drop of exactly the threshold
    while the verdict printed "-0.1 vs -0.1"."""
    measured = round(candidate - parent, 4)
    return GateResult(
        gate=Gate.DEV_SCREEN,
        passed=measured >= -max_regression,
        measured=measured,
        threshold=-max_regression,
        test="point estimate on the dev split",
        note=f"dev accuracy {candidate:.1%} vs parent {parent:.1%}",
    )


def dead_code_gate(
    dead_fraction: float, added_executable: int, dead: int, policy: GatesPolicy
) -> GateResult:
    cfg = policy.dead_code
    return GateResult(
        gate=Gate.DEAD_CODE,
        enabled=cfg.enabled,
        passed=dead_fraction <= cfg.max_dead_fraction or not cfg.enabled,
        measured=round(dead_fraction, 4),
        threshold=cfg.max_dead_fraction,
        test="line coverage of the added lines over the held-out run",
        note=f"{dead} of {added_executable} added executable lines never ran in the held-out run",
    )


def provenance_gate(candidate: Sequence[TaskResult], policy: GatesPolicy) -> GateResult:
    """Verified solves whose output no model reply supports (never counted, and above the
    policy's share the candidate is rejected outright)."""
    cfg = policy.provenance
    verified = [t for t in candidate if t.passed]
    unsupported = [t for t in verified if t.supported is False]
    share = len(unsupported) / len(verified) if verified else 0.0
    example = f"; e.g. {unsupported[0].provenance}" if unsupported else ""
    return GateResult(
        gate=Gate.PROVENANCE,
        enabled=cfg.enabled,
        passed=share <= cfg.max_unsupported or not cfg.enabled,
        measured=round(share, 4),
        threshold=cfg.max_unsupported,
        test="outputs checked against the model's replies in each task's gateway transcript",
        note=f"{len(unsupported)} of {len(verified)} verified solves not supported{example}",
    )


def binomial_lower_tail(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), exactly."""
    return min(1.0, sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1)))


def generated_gate(
    outcomes: Sequence[PairedOutcome], generated: frozenset[str], policy: GatesPolicy
) -> GateResult:
    """Where the wins (tasks the candidate solves and the parent does not, in the held-out
    test's own paired outcomes, so as it counts solves) fell: a gain that works on any task
    lands on the generated held-out tasks in proportion to the parent's failures there. One
    that comes from knowing the public tasks lands on their copies only. Refused when the
    generated tasks' wins are significantly fewer than that share (exact binomial lower
    tail below ``level``)."""
    cfg = policy.generated
    rows = [(o.task_id in generated, o.candidate.passed, o.parent.passed) for o in outcomes]
    n_gen = sum(g for g, _, _ in rows)
    fails_gen = sum(g and not p for g, _, p in rows)
    fails = sum(not p for _, _, p in rows)
    wins_gen = sum(g and c and not p for g, c, p in rows)
    wins = sum(c and not p for _, c, p in rows)
    test = "exact binomial: wins on generated tasks vs their share of the parent's failures"
    note = (
        f"{wins_gen} of {wins} wins on generated tasks ({n_gen} of {len(rows)} tasks; "
        f"{fails_gen} of the parent's {fails} failures)"
    )
    if not n_gen or not wins or not fails_gen:
        why = (
            "no generated task in the run"
            if not n_gen
            else "no win to place"
            if not wins
            else "the parent fails none of the generated tasks"
        )
        return GateResult(
            gate=Gate.GENERATED,
            enabled=cfg.enabled,
            passed=True,
            skipped=not n_gen,
            test=test,
            note=f"{note}; {why}",
        )
    share = fails_gen / fails
    p = binomial_lower_tail(wins_gen, wins, share)
    return GateResult(
        gate=Gate.GENERATED,
        enabled=cfg.enabled,
        passed=p >= cfg.level or not cfg.enabled,
        measured=_figure(p),
        threshold=cfg.level,
        test=test,
        note=(
            f"{note}: expected {share * wins:.1f} if the gain works on any task, "
            f"P(so few or fewer) = {p:.2g}"
        ),
    )


def decoy_gate(
    wins: int, survivors: int, after: Decision | None, policy: GatesPolicy
) -> GateResult:
    """The wins re-run against a decoy model; those that survive are not counted, and the
    sequential test is decided again without them."""
    cfg = policy.decoy
    if after is None:
        return GateResult(
            gate=Gate.DECOY,
            enabled=cfg.enabled,
            passed=True,
            skipped=cfg.enabled,
            note="not run" if cfg.enabled else "off",
        )
    ni = after.part(NON_INFERIORITY)
    better = after.part(SUPERIORITY)
    held = after.outcome is Outcome.ACCEPT
    return GateResult(
        gate=Gate.DECOY,
        enabled=cfg.enabled,
        passed=held or not cfg.enabled,
        measured=round(survivors / wins, 4) if wins else 0.0,
        threshold=None,
        test="held-out wins re-run with the model answering another task's question",
        note=(
            f"{survivors} of {wins} wins survived the decoy and do not count; without them "
            f"non-inferiority E={_figure(ni.measured):g}, improvement "
            f"E={_figure(better.measured):g} (need {_figure(ni.threshold):g}): "
            + ("still promoted" if held else "not promoted")
        ),
    )


def panel_gate(pairs: dict[str, tuple[EvalReport, EvalReport]], policy: GatesPolicy) -> GateResult:
    """``pairs``: model -> (parent report, candidate report) on the same held-out tasks."""
    cfg = policy.panel
    if not pairs:
        return GateResult(
            gate=Gate.PANEL, enabled=cfg.enabled, passed=True, note="no other panel models"
        )
    worst_model, worst = "", math.inf
    parts = []
    for model, (parent, candidate) in pairs.items():
        ids = set(candidate.by_id()) & set(parent.by_id())
        _, c_solved, n = _common_tokens([t for t in candidate.tasks if t.id in ids])
        _, p_solved, _ = _common_tokens([t for t in parent.tasks if t.id in ids])
        delta = (c_solved - p_solved) / n if n else 0.0
        parts.append(f"{model}: {delta:+.1%} over {n} tasks")
        if delta < worst:
            worst_model, worst = model, delta
    return GateResult(
        gate=Gate.PANEL,
        enabled=cfg.enabled,
        passed=worst >= -cfg.max_regression or not cfg.enabled,
        measured=round(worst, 4),
        threshold=-cfg.max_regression,
        test="point estimate of the accuracy change on each other panel model",
        note=f"worst {worst_model}; " + "; ".join(parts),
    )
