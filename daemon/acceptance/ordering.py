"""Feed parallel results to the sequential test in dispatch order, never completion order.

The e-processes are valid because the observations they see, in the order they see them, are
an exchangeable sample.  The evaluator draws a random order and runs a few tasks at a time;
if results were fed as they *complete*, slow tasks (typically failures and timeouts) would
reach the test late, early observations would be enriched in quick successes, and stopping at
the first crossing would exceed alpha.  Feeding the longest completed prefix of the dispatch
order keeps the sequence exactly the random permutation; the price is head-of-line waiting of
at most the parallelism.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


def ready_in_order(
    dispatch_order: Sequence[str], completed: Mapping[str, T], already_fed: int
) -> tuple[T, ...]:
    """Results that may be fed now, in dispatch order, after the first `already_fed`.

    Returns the completed results of dispatch positions `already_fed`, `already_fed + 1`, ...
    up to (not including) the first position whose task has not completed yet.
    """
    if not 0 <= already_fed <= len(dispatch_order):
        raise ValueError("already_fed must lie in [0, len(dispatch_order)]")
    ready: list[T] = []
    for task_id in dispatch_order[already_fed:]:
        if task_id not in completed:
            break
        ready.append(completed[task_id])
    return tuple(ready)
