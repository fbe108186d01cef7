"""Power you can state: the smallest paired gain a policy detects with power 0.8.

Exact (dynamic programming over the real decision rule, futility and curtailment included;
:mod:`daemon.acceptance.power`), for the policy's pool and block sizes and its lineage budget:
the first candidate of the first epoch, a few later positions, and the first candidate after
a promotion (whose block is fresh or, on a one-block pool, reused at a price). "No losses":
the candidate newly solves a share of the tasks and newly fails none. With losses mixed in
the bar is much higher (discordant noise: +8.3 points at 2 % losses for the default
policy's first candidate); that DP is minutes of arithmetic, so it is in DESIGN.md rather
than here.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from daemon.acceptance.knobs import RuleKnobs
from daemon.acceptance.power import DiscordanceModel, detectable_gain, sequential_power
from daemon.acceptance.spending import LineageBudget
from daemon.config.policy import Policy
from daemon.improve.alpha_ledger import PinnedSettings
from daemon.improve.procedure import empty_budget, rule_knobs, wanted_settings

TARGET = 0.8
POSITIONS = (1, 3, 10, 30)


@dataclass(frozen=True)
class PowerRow:
    label: str
    epoch: int
    position: int
    alpha: float
    block: int
    gain_no_losses: float  # smallest gain with power >= TARGET (inf: none)
    power_at_5: float  # power at +5 points, no losses
    expected_tasks_at_5: float  # mean held-out tasks the test uses at +5 points


def _row(policy: Policy, label: str, budget: LineageBudget, position: int, block: int) -> PowerRow:
    test = rule_knobs(policy)
    epoch = budget.promotions + 1
    alpha = budget.epoch_budget(epoch) * budget.candidate_schedule.weight(position)
    if alpha <= 0.0 or block <= 0:
        return PowerRow(label, epoch, position, alpha, block, math.inf, 0.0, 0.0)
    at_5 = sequential_power(test, alpha, block, DiscordanceModel(0.05, 0.0))
    return PowerRow(
        label=label,
        epoch=epoch,
        position=position,
        alpha=alpha,
        block=block,
        gain_no_losses=detectable_gain(test, alpha, block, 0.0, TARGET),
        power_at_5=at_5.power,
        expected_tasks_at_5=at_5.expected_tasks,
    )


# (test knobs, pinned settings) -> rows: the arithmetic takes seconds of CPU (a minute on a
# loaded machine), and a daemon is asked the same question for the same policy repeatedly.
_computed: dict[tuple[RuleKnobs, str], list[PowerRow]] = {}
_KEEP = 16
_lock = threading.Lock()  # worker threads share the table


def power_rows(
    policy: Policy, pool_size: int, settings: PinnedSettings | None = None
) -> list[PowerRow]:
    """The table for ``policy`` on a pool of ``pool_size`` held-out tasks. Blocking (seconds
    of arithmetic the first time for given settings): call it from a worker thread in async
    code."""
    chosen = settings or wanted_settings(policy, [str(i) for i in range(pool_size)])
    key = (rule_knobs(policy), chosen.to_json())
    with _lock:
        known = _computed.get(key)
    if known is not None:
        return list(known)
    rows = _compute(policy, chosen)
    with _lock:
        if len(_computed) >= _KEEP:
            _computed.pop(next(iter(_computed)))
        _computed[key] = rows
    return list(rows)


def _compute(policy: Policy, chosen: PinnedSettings) -> list[PowerRow]:
    budget = empty_budget(chosen)
    block = chosen.block_size
    rows = [_row(policy, f"epoch 1, candidate {i}", budget, i, block) for i in POSITIONS]
    after = budget.record(True)  # the first candidate was promoted
    fresh = after.next_test()
    kind = "fresh block" if fresh is not None and fresh.fresh_block else "reused block"
    rows.append(_row(policy, f"epoch 2 ({kind}), candidate 1", after, 1, block))
    return rows


def current_row(policy: Policy, settings: PinnedSettings, budget: LineageBudget) -> PowerRow:
    """The row of the lineage's next held-out candidate."""
    nxt = budget.next_test()
    position = nxt.position if nxt is not None else 1
    return _row(policy, "next candidate", budget, position, settings.block_size)


def next_candidate_line(row: PowerRow, lineage_alpha: float) -> str:
    """The event the daemon logs at start: the next candidate's alpha and what it detects."""
    detects = (
        f"no gain of any size is detected with power {TARGET:g} (too few tasks for this alpha)"
        if math.isinf(row.gain_no_losses)
        else f"it detects +{100 * row.gain_no_losses:.1f} points with power {TARGET:g} (no losses)"
    )
    return (
        f"acceptance: the next held-out candidate (epoch {row.epoch}, candidate "
        f"{row.position}) is tested at alpha {row.alpha:.3g} of the lineage's "
        f"{lineage_alpha:g} on {row.block} tasks: {detects}, +5 points with power "
        f"{row.power_at_5:.2f}"
    )


def _points(gain: float) -> str:
    return "none" if math.isinf(gain) else f"+{100 * gain:.1f}"


def power_lines(rows: list[PowerRow]) -> list[str]:
    """The table as text, one line per row (shared by both ``policy check`` commands)."""
    lines = [
        f"smallest paired gain detected with power {TARGET:g} (points of accuracy; exact):",
        f"  {'candidate':<36} {'alpha':>9} {'block':>6} {'gain':>6} {'power at +5':>12}"
        f" {'tasks at +5':>12}",
    ]
    for r in rows:
        lines.append(
            f"  {r.label:<36} {r.alpha:>9.2e} {r.block:>6} {_points(r.gain_no_losses):>6}"
            f" {r.power_at_5:>12.2f} {r.expected_tasks_at_5:>12.0f}"
        )
    lines.append("  (gain: no losses, i.e. newly solved tasks and none newly failed)")
    return lines


def row_json(r: PowerRow) -> dict[str, object]:
    return {
        "candidate": r.label,
        "epoch": r.epoch,
        "position": r.position,
        "alpha": r.alpha,
        "block": r.block,
        "gain_no_losses": None if math.isinf(r.gain_no_losses) else r.gain_no_losses,
        "power_at_5_points": r.power_at_5,
        "expected_tasks_at_5_points": r.expected_tasks_at_5,
    }


def review_line(policy: Policy) -> str:
    """``policy check``'s line on the review step: what happens to a passing candidate."""
    if policy.gates.review.enabled:
        return (
            "review: on ([gates.review]): a candidate that passes every gate awaits review; "
            "'harnessctl approve cN' promotes it, 'harnessctl reject cN --reason TEXT' does "
            "not, and the loop waits meanwhile"
        )
    return "review: off ([gates.review]): a candidate that passes every gate is promoted at once"


def power_table(policy: Policy) -> dict[str, object]:
    """``policy check``'s power table for the control API: rows as data and as text, and
    the review step's line."""
    rows = power_rows(policy, policy.suite.heldout_size)
    return {
        "power": [row_json(r) for r in rows],
        "power_text": power_lines(rows),
        "review": policy.gates.review.enabled,
        "review_text": review_line(policy),
    }
