"""Which tree the next proposal builds on: the live version, or one of its candidates.

A candidate that did not get promoted can still be a stepping stone: the next proposal may
start from its tree (its whole change from the live version plus the new edit is then what
the held-out test compares with the live version). The choice is made from dev evidence
only, which the proposer may see anyway; nothing of a held-out test reaches it
(:mod:`daemon.improve.briefing` builds the nodes from smoke- and dev-split reports).

``thompson``: each node's dev accuracy gets a Beta(1 + solved, 1 + failed) posterior; one
draw per node, the highest draw is the base (ties: the live version, then the older
candidate). Only candidates that solved a larger share of their dev tasks than the live
version are in the draw: one that did worse, or no better (a change dev never noticed), is
no stepping stone, and with one lottery ticket each, many such candidates (a small
proposer makes them by the dozen) would together outdraw the live version most of the time
and every proposal would inherit one of them. So a tree of poor candidates returns to the
live version, while a candidate that solved more dev tasks than it is usually built on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

SearchMode = Literal["live", "thompson"]


@dataclass(frozen=True)
class Node:
    """A tree the next proposal could start from, with its dev results.

    ``candidate_id`` None is the live version itself.
    """

    candidate_id: int | None
    solved: int
    n: int

    @property
    def label(self) -> str:
        return "the live version" if self.candidate_id is None else f"c{self.candidate_id}"


def choose_base(nodes: list[Node], mode: SearchMode, rng: random.Random) -> Node:
    """The node to build on. ``nodes`` must hold the live version (``candidate_id`` None)."""
    live = next((n for n in nodes if n.candidate_id is None), None)
    if live is None:
        raise ValueError("the search nodes must include the live version")
    if mode == "live" or len(nodes) == 1:
        return live

    def order(node: Node) -> tuple[int, int]:
        return (0, 0) if node.candidate_id is None else (1, node.candidate_id)

    def share(node: Node) -> float:
        return node.solved / node.n if node.n else 0.0

    eligible = [n for n in nodes if n.candidate_id is None or share(n) > share(live)]
    best, best_draw = live, -1.0
    for node in sorted(eligible, key=order):
        failed = max(0, node.n - node.solved)
        draw = rng.betavariate(1 + node.solved, 1 + failed)
        if draw > best_draw:
            best, best_draw = node, draw
    return best
