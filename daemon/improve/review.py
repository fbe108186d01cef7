"""The review step (``[gates.review]``): a person approves or rejects what passed the gates.

With the step on, the pipeline holds a candidate that passed every gate (``awaiting_review``
in the lineage, its held-out test ``awaiting_review`` in the alpha ledger) instead of
promoting it. :class:`ReviewDesk` is what ``harnessctl review``, ``approve`` and ``reject``
reach:

* an approval goes through :meth:`daemon.improve.pipeline.Pipeline.promote`, the same
  check-then-apply path as an automatic promotion (the candidate's tree re-made from its
  recorded patch, checked against its parent, committed with the person's approval in one
  transaction); a candidate whose parent is no longer live is refused
  (:class:`~daemon.errors.StaleParent`, naming both versions and what to do), never
  re-based: its held-out evidence is about its parent, not about the version live now;
* a rejection records who rejected it and why; its held-out test counts as not promoted
  (its alpha is spent, DESIGN.md "The review step").

What the proposer learns follows the information rule: nothing while a candidate awaits
review (the loop proposes nothing meanwhile, and :mod:`daemon.improve.briefing` leaves
awaiting candidates out), then only "promoted" or "not promoted".
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from daemon.errors import LineageError, NotAwaitingReview
from daemon.evaluation.runtime import Runtime
from daemon.improve import alpha_ledger, intake
from daemon.improve.alpha_ledger import HeldoutTest
from daemon.improve.pipeline import Pipeline
from daemon.lineage import Candidate, CandidateState, Decider, Lineage, Review, Version
from daemon.verdict import Stage

# A person's name and reason go into the lineage and git messages: short, one paragraph.
MAX_REVIEWER = 200
MAX_REASON = 2000


@dataclass(frozen=True)
class Awaiting:
    """A candidate awaiting review, with what a reviewer needs to decide."""

    candidate: Candidate
    parent: str  # its parent version's name
    live: str  # the live version's name (approvable only if it is ``parent``)
    test: HeldoutTest | None  # its held-out test in the alpha ledger

    @property
    def approvable(self) -> bool:
        return self.parent == self.live


def _text(value: str, what: str, limit: int, cid: int) -> str:
    text = value.strip()
    if len(text) > limit:
        raise LineageError(f"c{cid}: the {what} is {len(text)} characters; at most {limit}")
    return text


class ReviewDesk:
    def __init__(self, rt: Runtime, lineage: Lineage, pipeline: Pipeline) -> None:
        self.rt = rt
        self.lineage = lineage
        self.pipeline = pipeline
        # One decision at a time: two clients deciding the same candidate must not share its
        # materialised tree (one would remove it under the other's promotion).
        self._deciding = anyio.Lock()

    def awaiting(self) -> list[Awaiting]:
        """The candidates awaiting review, oldest first (blocking)."""
        live = self.lineage.current()
        names = {v.id: v.name for v in self.lineage.versions()}
        return [
            Awaiting(
                candidate=c,
                parent=names.get(c.parent_version_id, f"version {c.parent_version_id}"),
                live=live.name,
                test=alpha_ledger.test_of(self.rt.store, c.id),
            )
            for c in reversed(self.lineage.candidates(state=CandidateState.AWAITING_REVIEW))
        ]

    def _awaiting(self, cid: int) -> Candidate:
        cand = self.lineage.candidate(cid)
        if cand.state != CandidateState.AWAITING_REVIEW:
            raise NotAwaitingReview(
                f"candidate c{cid} does not await review (it is {cand.state}"
                f"{', decided by ' + cand.decided_by.value if cand.decided_by else ''}); "
                "'harnessctl review' lists those that do"
            )
        return cand

    async def approve(self, cid: int, reviewer: str, reason: str = "") -> Version:
        """Promote a candidate awaiting review onto its parent, if that is still live."""
        who = _text(reviewer, "reviewer's name", MAX_REVIEWER, cid)
        why = _text(reason, "reason", MAX_REASON, cid)

        def check() -> Candidate:
            cand = self._awaiting(cid)
            stale = self.lineage.stale_parent(cand)
            if stale is not None:
                raise stale
            return cand

        async with self._deciding:
            return await self._approve(check, who, why)

    async def _approve(self, check: Callable[[], Candidate], who: str, why: str) -> Version:
        cand = await anyio.to_thread.run_sync(check)
        cid = cand.id
        assert cand.verdict is not None and cand.review is not None  # held with both
        approval = Review(held=cand.review.held, decided=time.time(), reviewer=who, reason=why)
        # Shielded: a client that leaves mid-approval must not leave half a promotion (the
        # lineage's commit and the ledger's row follow each other; start-up settles a gap).
        with anyio.CancelScope(shield=True):
            tree = await anyio.to_thread.run_sync(
                intake.materialise, self.lineage, cid, self.rt.work_dir
            )
            try:
                version = await self.pipeline.promote(cid, tree, cand.verdict, None, approval)
            finally:
                await anyio.to_thread.run_sync(
                    lambda: shutil.rmtree(tree.parent, ignore_errors=True)
                )
        return version

    async def reject(self, cid: int, reviewer: str, reason: str) -> Candidate:
        """Record a person's rejection of a candidate awaiting review."""
        who = _text(reviewer, "reviewer's name", MAX_REVIEWER, cid)
        why = _text(reason, "reason", MAX_REASON, cid)
        async with self._deciding:
            with anyio.CancelScope(shield=True):
                cand = await anyio.to_thread.run_sync(self.lineage.reject_reviewed, cid, who, why)
                await anyio.to_thread.run_sync(
                    alpha_ledger.decide_review, self.rt.store, cid, False
                )
        await self.rt.emit(
            "candidate.rejected",
            f"candidate c{cid} rejected in review by {who}: {why}",
            candidate=cid,
            stage=Stage.REVIEW,
            decided_by=Decider.PERSON.value,
            reviewer=who,
        )
        return cand
