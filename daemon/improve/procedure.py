"""The acceptance procedure a policy asks for: the test's knobs, the lineage budget, the blocks.

Glue between the policy (``[acceptance]``, ``[gates.honesty]``, ``[suite]``) and the
statistical core (:mod:`daemon.acceptance.rule`, :mod:`daemon.acceptance.spending`), used by
the held-out stage, by ``policy check`` and by the benchmark, so all three state and run the
same procedure.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from daemon.acceptance.knobs import RuleKnobs
from daemon.acceptance.spending import HeldOutBlock, LineageBudget, held_out_block
from daemon.config.policy import Policy
from daemon.improve.alpha_ledger import PinnedSettings


def rule_knobs(policy: Policy) -> RuleKnobs:
    """The sequential test's knobs. With the honesty gate off, honesty is neither a veto nor
    a way to be better (its weight goes to the others): fewer over-claims alone could come
    from claiming nothing, which only the gate tells apart. (A tolerance and bound of 1 make
    the veto always pass; the futility tests of more claims than the parent then cannot
    collect evidence and are not run.)"""
    a, gate = policy.acceptance, policy.gates.honesty
    test = RuleKnobs(
        margin=a.margin,
        weight_accuracy=a.weight_accuracy,
        weight_tokens=a.weight_tokens,
        weight_honesty=a.weight_honesty,
        honesty_tolerance=gate.tolerance,
        honesty_bound=gate.bound,
        futility=a.futility,
        futility_level=a.futility_level,
        futility_accuracy_gain=a.futility_accuracy_gain,
        futility_conditional_gain=a.futility_conditional_gain,
        # The over-claim gain futility protects follows the accuracy one: a harness that
        # claims success on every task over-claims exactly where it fails, so its paired
        # over-claim difference is its accuracy difference, both futility tests cross
        # together, and a smaller honesty gain alone would hold the slot as long as before
        # whatever `futility_accuracy_gain` says (the held-out tests of the two-hour run).
        futility_honesty_gain=a.futility_accuracy_gain,
    )
    if gate.enabled:
        return test
    rest = a.weight_accuracy + a.weight_tokens
    if rest <= 0.0:
        return replace(test, honesty_tolerance=1.0, honesty_bound=1.0)
    return replace(
        test,
        weight_accuracy=a.weight_accuracy / rest,
        weight_tokens=1.0 - a.weight_accuracy / rest,
        weight_honesty=0.0,
        honesty_tolerance=1.0,
        honesty_bound=1.0,
    )


def pool_hash(pool: list[str]) -> str:
    return hashlib.sha256(json.dumps(pool).encode("utf-8")).hexdigest()


def block_hash(task_ids: tuple[str, ...] | list[str]) -> str:
    return pool_hash(list(task_ids))


def wanted_settings(policy: Policy, pool: list[str]) -> PinnedSettings:
    """The lineage-wide settings the policy asks for on this held-out pool."""
    a = policy.acceptance
    block = a.block_size or len(pool)
    block = min(block, len(pool)) if pool else block
    fresh = max(1, len(pool) // block) if block else 1
    budget = LineageBudget(
        alpha_lineage=a.alpha, max_fresh_blocks=fresh, reuse_last_block=a.reuse_block
    )
    settings = budget.to_dict()
    settings.pop("history")
    return PinnedSettings(
        alpha=a.alpha,
        pool=pool_hash(pool),
        pool_size=len(pool),
        block_size=block,
        reuse_block=a.reuse_block,
        budget=settings,
    )


def block_for(settings: PinnedSettings, pool: list[str], promotions: int) -> HeldOutBlock | None:
    """The block of the epoch after ``promotions`` promotions (None: none may be used)."""
    return held_out_block(pool, settings.block_size, promotions, settings.reuse_block)


def empty_budget(settings: PinnedSettings) -> LineageBudget:
    return LineageBudget.from_dict({**settings.budget, "history": []})
