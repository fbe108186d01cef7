"""Lineage-wide error budget: who gets how much alpha, and on which held-out block.

Guarantee: P(the lineage ever promotes a candidate that is not truly better) <= alpha_lineage,
for any proposer, provided the proposer learns nothing about held-out outcomes except the
promotion bit of each candidate (no e-values, no stopping times, no timings, no "why").

Structure (DESIGN.md, "Acceptance", gives the proofs):

* An **epoch** runs from one promotion to the next and tests candidates against one parent on
  one held-out block.  Epoch ``e`` gets a budget ``A_e``; its ``i``-th candidate is tested at
  ``alpha_{e,i} = A_e * gamma_i`` with ``sum_i gamma_i <= 1``.  Within an epoch every answer
  before the (single) promotion is "not promoted", so the candidates are those of the world in
  which every answer is "reject": they do not depend on the block, each test is valid for its
  candidate, and a union bound gives P(false promotion in epoch e) <= A_e.
* Budgets are indexed by epoch, not by a global candidate counter: with a global counter the
  alpha of indices "left over" in one epoch is spent again in the next, and a two-candidate
  counterexample exceeds the nominal level (DESIGN.md, "Acceptance").
* A **fresh** epoch draws a block disjoint from all earlier ones: ``A_e = alpha * beta_e``,
  plus -- the online fallback of Tian & Ramdas (2021) -- the level at which the previous fresh
  epoch's promotion was made, if that epoch was also fresh.
* When the pool has no fresh block left, the lineage either refuses further tests or (if
  allowed) **reuses** the last block.  What the proposer knows about that block is exactly the
  within-epoch positions ``k_j`` of the promotions made on it, so a union bound over those
  positions is valid at the price ``A_e = alpha * beta_e * prod_j gamma_{k_j}`` (no fallback).

``sum_e beta_e <= 1`` and ``sum_i gamma_i <= 1`` give the lineage bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, Protocol


class Schedule(Protocol):
    """Non-negative weights gamma_1, gamma_2, ... with sum <= 1."""

    def weight(self, index: int) -> float:
        """Weight of the `index`-th item (1-based)."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for storage."""
        ...


def _hurwitz_zeta(s: float, a: float) -> float:
    """Sum over k >= 0 of (k + a)^-s for s > 1, a > 0, by Euler-Maclaurin (error < 1e-12)."""
    if s <= 1.0 or a <= 0.0:
        raise ValueError("need s > 1 and a > 0")
    m = 50
    head = math.fsum(float((k + a) ** -s) for k in range(m))
    x = m + a
    tail = x ** (1.0 - s) / (s - 1.0) + 0.5 * x**-s
    # Bernoulli corrections B2/2!, B4/4!, B6/6! times the derivatives of x^-s.
    tail += s / 12.0 * x ** (-s - 1.0)
    tail -= s * (s + 1.0) * (s + 2.0) / 720.0 * x ** (-s - 3.0)
    tail += s * (s + 1.0) * (s + 2.0) * (s + 3.0) * (s + 4.0) / 30240.0 * x ** (-s - 5.0)
    return float(head + tail)


@dataclass(frozen=True)
class PowerLawSchedule:
    """gamma_i = (i + shift)^-exponent / zeta(exponent, 1 + shift), summing exactly to 1.

    Heavy-tailed on purpose: halving alpha costs one extra discordant win, so the loss of power
    from candidate 1 to candidate i is about exponent * log2((i + shift) / (1 + shift)) wins;
    an exponent near 1 keeps late candidates testable, the shift flattens the head.
    """

    exponent: float = 1.5
    shift: float = 3.0

    def __post_init__(self) -> None:
        """A power law only sums if the exponent exceeds 1."""
        if self.exponent <= 1.0 or self.shift < 0.0:
            raise ValueError("need exponent > 1 and shift >= 0")

    def weight(self, index: int) -> float:
        """Weight of the `index`-th item (1-based)."""
        if index < 1:
            raise ValueError("index is 1-based")
        return float((index + self.shift) ** -self.exponent / self.normaliser)

    @cached_property
    def normaliser(self) -> float:
        """zeta(exponent, 1 + shift): the sum of the unnormalised weights."""
        return _hurwitz_zeta(self.exponent, 1.0 + self.shift)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for storage."""
        return {"kind": "power_law", "exponent": self.exponent, "shift": self.shift}


@dataclass(frozen=True)
class TelescopingSchedule:
    """gamma_i = q / ((i + q - 1)(i + q)): closed form, sums exactly to 1, tail ~ q / i^2."""

    q: float = 1.0

    def __post_init__(self) -> None:
        """The family needs q > 0."""
        if self.q <= 0.0:
            raise ValueError("need q > 0")

    def weight(self, index: int) -> float:
        """Weight of the `index`-th item (1-based)."""
        if index < 1:
            raise ValueError("index is 1-based")
        return self.q / ((index + self.q - 1.0) * (index + self.q))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for storage."""
        return {"kind": "telescoping", "q": self.q}


def schedule_from_dict(data: dict[str, Any]) -> Schedule:
    """Inverse of `to_dict` for the schedules above."""
    kind = data["kind"]
    if kind == "power_law":
        return PowerLawSchedule(float(data["exponent"]), float(data["shift"]))
    if kind == "telescoping":
        return TelescopingSchedule(float(data["q"]))
    raise ValueError(f"unknown schedule kind {kind!r}")


@dataclass(frozen=True)
class HeldOutBlock:
    """The tasks of one held-out block and whether the proposer may already know about it."""

    index: int
    task_ids: tuple[str, ...]
    reused: bool


def held_out_block(
    pool: Sequence[str],
    block_size: int,
    promotions: int,
    reuse_last_block: bool = False,
) -> HeldOutBlock | None:
    """Block for the epoch that follows `promotions` promotions, or None if none may be used.

    `pool` must already be ordered by a secret seeded hash, so consecutive slices are random
    disjoint samples.  Epoch e = promotions + 1 takes slice e - 1 while slices last; a partial
    last slice is never used, because a smaller block would carry less power than the policy
    promises.  Afterwards the last full slice is returned flagged `reused` (only valid with the
    reuse penalty of `LineageBudget`) or, by default, None: further promotions are refused.
    """
    if block_size < 1 or promotions < 0:
        raise ValueError("need block_size >= 1 and promotions >= 0")
    if len(set(pool)) != len(pool):
        raise ValueError("pool task ids must be unique")
    blocks = len(pool) // block_size
    if blocks == 0:
        return None
    index, reused = promotions, False
    if index >= blocks:
        if not reuse_last_block:
            return None
        index, reused = blocks - 1, True
    start = index * block_size
    return HeldOutBlock(index, tuple(pool[start : start + block_size]), reused)


@dataclass(frozen=True)
class TestedCandidate:
    """One candidate that reached the held-out stage."""

    epoch: int
    position: int
    alpha: float
    promoted: bool


@dataclass(frozen=True)
class NextTest:
    """What the next held-out test must use."""

    epoch: int
    position: int
    alpha: float
    block_index: int
    fresh_block: bool
    reused_block: bool
    new_epoch: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for storage."""
        return asdict(self)


@dataclass(frozen=True)
class LineageBudget:
    """Alpha for each held-out test of a lineage, from the history of tests and promotions.

    `max_fresh_blocks` is how many disjoint blocks the pool holds (pool size // block size).
    With `reuse_last_block` False the lineage refuses tests once they are used up.
    """

    alpha_lineage: float = 0.05
    max_fresh_blocks: int = 1
    reuse_last_block: bool = True
    fallback: bool = True
    epoch_schedule: Schedule = field(default_factory=lambda: TelescopingSchedule(2.0))
    candidate_schedule: Schedule = field(default_factory=lambda: PowerLawSchedule(1.5, 3.0))
    history: tuple[TestedCandidate, ...] = ()

    def __post_init__(self) -> None:
        """Validate the policy and that the history is a consistent sequence."""
        if not 0.0 < self.alpha_lineage < 1.0:
            raise ValueError("alpha_lineage must lie in (0, 1)")
        if self.max_fresh_blocks < 1:
            raise ValueError("need at least one fresh block")
        epoch, position = 1, 0
        for item in self.history:
            if (item.epoch, item.position) != (epoch, position + 1):
                raise ValueError("history must list candidates in order, epoch by epoch")
            epoch, position = (epoch + 1, 0) if item.promoted else (epoch, position + 1)

    @property
    def promotions(self) -> int:
        """Promotions so far."""
        return sum(item.promoted for item in self.history)

    def _block_of_epoch(self, epoch: int) -> int | None:
        if epoch <= self.max_fresh_blocks:
            return epoch - 1
        return self.max_fresh_blocks - 1 if self.reuse_last_block else None

    def _promotion_positions(self) -> dict[int, int]:
        return {item.epoch: item.position for item in self.history if item.promoted}

    def epoch_budget(self, epoch: int) -> float:
        """Total alpha of `epoch`, given the promotions that ended the earlier epochs."""
        if epoch < 1 or epoch > self.promotions + 1:
            raise ValueError("epoch not reached yet")
        block = self._block_of_epoch(epoch)
        if block is None:
            return 0.0
        base = self.alpha_lineage * self.epoch_schedule.weight(epoch)
        positions = self._promotion_positions()
        if epoch > self.max_fresh_blocks:
            # Reused block: pay for what the proposer learnt about it (promotion positions).
            penalty = 1.0
            for earlier in range(1, epoch):
                if self._block_of_epoch(earlier) == block:
                    penalty *= self.candidate_schedule.weight(positions[earlier])
            return base * penalty
        if self.fallback and epoch > 1:
            # Online fallback: a true promotion passes its level on to the next fresh epoch.
            previous = epoch - 1
            base += self.epoch_budget(previous) * self.candidate_schedule.weight(
                positions[previous]
            )
        return base

    def next_test(self) -> NextTest | None:
        """Alpha and block for the next candidate, or None when no test may be run."""
        epoch = self.promotions + 1
        position = 1
        if self.history and not self.history[-1].promoted:
            position = self.history[-1].position + 1
        block = self._block_of_epoch(epoch)
        if block is None:
            return None
        alpha = self.epoch_budget(epoch) * self.candidate_schedule.weight(position)
        return NextTest(
            epoch=epoch,
            position=position,
            alpha=alpha,
            block_index=block,
            fresh_block=epoch <= self.max_fresh_blocks,
            reused_block=epoch > self.max_fresh_blocks,
            new_epoch=position == 1,
        )

    def record(self, promoted: bool) -> LineageBudget:
        """Return the budget after the next test's outcome."""
        test = self.next_test()
        if test is None:
            raise ValueError("no test may be run: the held-out pool is exhausted")
        item = TestedCandidate(test.epoch, test.position, test.alpha, promoted)
        return LineageBudget(
            alpha_lineage=self.alpha_lineage,
            max_fresh_blocks=self.max_fresh_blocks,
            reuse_last_block=self.reuse_last_block,
            fallback=self.fallback,
            epoch_schedule=self.epoch_schedule,
            candidate_schedule=self.candidate_schedule,
            history=(*self.history, item),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for storage (e.g. a JSON column in SQLite)."""
        return {
            "alpha_lineage": self.alpha_lineage,
            "max_fresh_blocks": self.max_fresh_blocks,
            "reuse_last_block": self.reuse_last_block,
            "fallback": self.fallback,
            "epoch_schedule": self.epoch_schedule.to_dict(),
            "candidate_schedule": self.candidate_schedule.to_dict(),
            "history": [asdict(item) for item in self.history],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LineageBudget:
        """Inverse of `to_dict`."""
        return cls(
            alpha_lineage=float(data["alpha_lineage"]),
            max_fresh_blocks=int(data["max_fresh_blocks"]),
            reuse_last_block=bool(data["reuse_last_block"]),
            fallback=bool(data["fallback"]),
            epoch_schedule=schedule_from_dict(data["epoch_schedule"]),
            candidate_schedule=schedule_from_dict(data["candidate_schedule"]),
            history=tuple(
                TestedCandidate(
                    int(h["epoch"]), int(h["position"]), float(h["alpha"]), bool(h["promoted"])
                )
                for h in data["history"]
            ),
        )
