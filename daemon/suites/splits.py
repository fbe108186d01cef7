"""Deterministic dev / held-out splits of a suite's task ids.

Ids are ordered by ``sha256(seed + id)``. The dev split takes ids from the front of that
order and the held-out split from the back, so growing or shrinking one split in the policy
never moves a task straight from one split to the other: a task the proposer has seen in
dev cannot silently become a held-out task, and held-out tasks do not leak into dev.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from daemon.errors import ConfigError


@dataclass(frozen=True)
class Splits:
    dev: list[str]
    heldout: list[str]


def _rank(seed: str, task_id: str) -> str:
    return hashlib.sha256((seed + task_id).encode("utf-8")).hexdigest()


def split(
    ids: Iterable[str], *, seed: str, dev_size: int, heldout_size: int, suite: str = "the suite"
) -> Splits:
    """Disjoint dev and held-out splits of exactly the requested sizes.

    Raises ConfigError when the suite has fewer tasks than the two sizes together.
    """
    unique = sorted(set(ids))
    if dev_size < 0 or heldout_size < 0:
        raise ConfigError(
            f"split sizes must not be negative (dev_size={dev_size}, heldout_size={heldout_size})"
        )
    if dev_size + heldout_size > len(unique):
        raise ConfigError(
            f"{suite} has {len(unique)} tasks, fewer than the policy's [suite] dev_size "
            f"({dev_size}) + heldout_size ({heldout_size}) = {dev_size + heldout_size}; "
            "lower those sizes in the policy file or choose more categories"
        )
    ordered = sorted(unique, key=lambda task_id: (_rank(seed, task_id), task_id))
    dev = ordered[:dev_size]
    heldout = ordered[len(ordered) - heldout_size :] if heldout_size else []
    heldout.reverse()  # nearest the back first, so a larger split only appends
    return Splits(dev=dev, heldout=heldout)
