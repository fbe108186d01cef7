"""The improvement loop: propose, record, evaluate, decide; again, within the budgets.

Each cycle takes an external patch if one is queued (``harnessctl propose``), otherwise asks
the proposer model for one. Both go through the same stages. One policy per candidate: a
cycle reads the policy in force once, when it begins (a :class:`PolicySnapshot`), and the
candidate it proposes is asked for, recorded (the static stage's limits) and evaluated under
that snapshot alone; a person's patch keeps the snapshot of its submission, and a candidate
that waits (behind a person's patch) keeps its own while it waits. The loop waits while paused,
while the policy disables it, while a daemon-wide token window (hour, day, proposer) is
spent, and while a dependency is down (:mod:`daemon.evaluation.health`), and says so in
the event log each time it starts or stops waiting.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import TaskStatus

from daemon.config.policy import Policy
from daemon.errors import BudgetExceeded, ProviderError, SandboxError, Unavailable, first_outage
from daemon.evaluation import results
from daemon.evaluation.coverage import read_sources
from daemon.evaluation.health import describe
from daemon.evaluation.report import EvalReport, Split
from daemon.evaluation.runtime import PolicySnapshot, Runtime
from daemon.gateway import ledger
from daemon.gateway.ledger import Charge
from daemon.gateway.metering import MeteredModel
from daemon.improve import alpha_ledger, briefing, intake
from daemon.improve.pipeline import Pipeline, Screened, best_screened
from daemon.improve.power_report import current_row, next_candidate_line
from daemon.improve.procedure import wanted_settings
from daemon.improve.proposer import archive, components, edit_protocol, moves
from daemon.improve.proposer.prompt import (
    FailedTask,
    build_prompt,
    failures_within,
    proposal_request,
    tokens_of,
)
from daemon.improve.proposer.search import choose_base
from daemon.improve.replication import Replicator
from daemon.improve.tried import TriedPrograms
from daemon.lineage import CandidateSource, CandidateState, Lineage, Version
from daemon.patches import ParseFailure, PatchRejected, Proposal, parse_proposal
from daemon.patches.identity import fingerprint
from daemon.patches.merge import MergeConflict
from daemon.patches.operations import Operation
from daemon.patches.targets import (
    Targets,
    find_targets,
    reached_targets,
    without_constants,
)
from daemon.providers.base import Capabilities, ChatRequest, Message
from daemon.suites.base import Suite
from daemon.verdict import Stage, Verdict

log = logging.getLogger("harnessd.loop")

# How many times a candidate interrupted by outages is evaluated again before it is left
# interrupted (an outage is not the candidate's fault, but a flapping engine must not
# keep one candidate forever).
MAX_REEVALUATIONS = 5
# Replies of the operations protocol drawn for one proposal until one passes the static
# stage's checks: a 135M model's one line of code fails to compile in some samples, and each
# such proposal was a cycle's sample spent on nothing (13 % of proposals in a two-hour run).
REPLY_ATTEMPTS = 3


class CountsPrompts(Protocol):
    """What fitting a prompt needs of a model (a :class:`MeteredModel`)."""

    @property
    def ref(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...

    async def prompt_tokens(self, request: ChatRequest) -> int: ...


# The archive's place in a prompt that had to leave it out to fit the model's context.
ARCHIVE_LEFT_OUT = "(left out: the proposer model's context is full)"


@dataclass
class LoopControl:
    """Shared with the control API: pause flag, external queue, what the loop is doing."""

    paused: bool = False
    activity: str = ""
    cycles: int = 0
    # External candidates that passed the static stage, waiting for the pipeline.
    queue: list[int] = field(default_factory=list)
    # The loop's own candidates that a person's patch overtook, waiting behind the queue.
    own: list[int] = field(default_factory=list)
    # The policy each waiting candidate was recorded under: it is evaluated under the same.
    recorded_under: dict[int, PolicySnapshot] = field(default_factory=dict)
    # The candidate under evaluation now (None: none).
    current: int | None = None
    # The runner-ups of dev-side selection waiting in the dev reserve, best first.
    reserve: list[int] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)

    def waiting(self) -> list[int]:
        """The candidates waiting for the pipeline, in the order they will be evaluated:
        people's patches first (``harnessctl propose``), then the loop's own."""
        return [*self.queue, *self.own]

    def position(self, cid: int) -> int | None:
        """``cid``'s place: 0 under evaluation, 1 next, ...; None if it is not waiting."""
        if cid == self.current:
            return 0
        order = self.waiting()
        return order.index(cid) + 1 if cid in order else None

    def enqueue(self, cid: int, snapshot: PolicySnapshot, *, own: bool = False) -> None:
        """``cid`` waits for the pipeline (a person's patch, or with ``own`` the loop's), to
        be evaluated under ``snapshot``, the policy it was recorded under."""
        (self.own if own else self.queue).append(cid)
        self.recorded_under[cid] = snapshot

    def next_waiting(self) -> tuple[int, PolicySnapshot] | None:
        """The next candidate to evaluate, with its policy: people's patches first."""
        line = self.queue or self.own
        if not line:
            return None
        cid = line.pop(0)
        return cid, self.recorded_under.pop(cid)

    def poke(self) -> None:
        self.wake.set()
        self.wake = anyio.Event()

    def set_activity(self, text: str) -> None:
        self.activity = text


@dataclass(frozen=True)
class Waiting:
    """Why the loop waits: ``why`` for people; ``budget_spent`` when a token window is spent
    (its event is ``budget.paused``, every other wait's ``loop.waiting``)."""

    why: str
    budget_spent: bool = False
    # The loop takes no cycle until the policy changes ([loop] max_cycles reached, or the
    # loop disabled): the reserve's runner-ups can never take a slot.
    final: bool = False


@dataclass(frozen=True)
class Ask:
    """One prompt to the proposer, sampled once or more, under one cycle's policy."""

    snapshot: PolicySnapshot
    parent: Version  # the live version: what the candidate is tested against
    model: MeteredModel
    messages: list[Message]
    sources: dict[str, str]  # the base's
    targets: Targets | None  # the edit-operation protocol's; None: free text
    # The earlier candidate of ``parent`` the proposal builds on (None: ``parent`` itself).
    base: intake.Base | None = None
    # The operations protocol's move asked for, with what it may use (an edit by default).
    offer: moves.Offer = field(default_factory=moves.Offer)
    # The choices whose reply repeated a program tried before, left out of the grammar of
    # every later draw of this prompt (its samples share the set; ``replace`` keeps it).
    closed: set[edit_protocol.Slot] = field(default_factory=set, compare=False)

    @property
    def base_name(self) -> str:
        return self.parent.name if self.base is None else f"c{self.base.candidate_id}"


@dataclass(frozen=True)
class Flaw:
    """Why the static stage would stop a reply; ``repeats``: its program was tried before."""

    reason: str
    repeats: bool = False


class ImprovementLoop:
    def __init__(self, rt: Runtime, lineage: Lineage, control: LoopControl) -> None:
        self.rt = rt
        self.lineage = lineage
        self.control = control
        self.pipeline = Pipeline(rt, lineage, control.set_activity)
        self.replications = Replicator(
            rt, lineage, self.pipeline.version_subject, control.set_activity
        )
        self.tried = TriedPrograms(lineage)
        # The loop's own candidates chosen by dev-side selection and not yet evaluated
        # further: each continues from its dev results (and holds its tree) until it runs.
        self.screened: dict[int, Screened] = {}
        # Dev-side selection's runner-ups, best first: screened on dev against the live
        # version under the policy of their cycle, not chosen yet. A later cycle of the same
        # parent and policy chooses among them and its own new proposals, so a cycle needs
        # one new dev screening rather than ``dev_pool`` (dev screening was a third of the
        # loop's time in the two-hour run). At most ``dev_pool - 1``: a cycle's pool is the
        # reserve and only as many new proposals as fill ``dev_pool``. Set through the
        # property, which shows it to the control API.
        self._reserve: list[Screened] = []
        # Draws for the choice of base (a search heuristic, not a statistical test: its
        # randomness needs no secrecy).
        self.rng = random.Random(secrets.randbits(64))

    @property
    def reserve(self) -> list[Screened]:
        return self._reserve

    @reserve.setter
    def reserve(self, entries: list[Screened]) -> None:
        self._reserve = entries
        self.control.reserve = [s.cid for s in entries]

    async def _sleep_or_poke(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self.control.wake.wait()

    def _why_waiting(self, external: bool) -> Waiting | None:
        """Why the loop may not start a cycle now (None: it may). ``external``: a person's
        patch waits, which neither the loop's own limits nor the proposer's budget hold."""
        policy = self.rt.policy.get()
        if self.control.paused:
            return Waiting("paused (harnessctl resume)")
        awaiting = self.lineage.candidates(state=CandidateState.AWAITING_REVIEW)
        if awaiting:
            # Its outcome decides the next held-out test's epoch, and the proposer may learn
            # of it only once decided (DESIGN.md, "The review step").
            names = ", ".join(f"c{c.id}" for c in reversed(awaiting))
            return Waiting(
                f"{names} awaiting review ('harnessctl review', then 'harnessctl approve cN' "
                "or 'harnessctl reject cN --reason TEXT')"
            )
        if not external:
            if not policy.loop.enabled:
                return Waiting("disabled by the policy ([loop] enabled = false)", final=True)
            if policy.loop.max_cycles and self.control.cycles >= policy.loop.max_cycles:
                return Waiting(
                    f"done: {policy.loop.max_cycles} cycles ([loop] max_cycles)", final=True
                )
        state = self.rt.guard.window_state()
        scopes = ("hour", "day") if external else ("hour", "day", "proposer")
        spent = [w for w in state.exhausted if w.scope in scopes]
        if spent:
            reopen = max(w.reopens_at or time.time() for w in spent)
            names = ", ".join(f"{w.scope} {w.spent}/{w.limit}" for w in spent)
            return Waiting(
                f"token budget spent ({names}); resumes at "
                f"{time.strftime('%H:%M:%S', time.localtime(reopen))}",
                budget_spent=True,
            )
        return None

    async def start_up(self) -> None:
        """Settle held-out tests a stop cut short, and state the power the next one has."""

        def settle() -> list[tuple[int, alpha_ledger.TestState]]:
            def state(cid: int) -> CandidateState:
                return self.lineage.candidate(cid).state

            running = alpha_ledger.settle_running(self.rt.store, state)
            # A review decided just before a stop, whose ledger row did not follow.
            alpha_ledger.settle_reviewed(self.rt.store, state)
            return [(c, s) for c, s in running if s != "awaiting_review"]

        for cid, state in await anyio.to_thread.run_sync(settle):
            await self.rt.emit(
                "heldout.settled",
                f"the held-out test of candidate c{cid} was cut short by a stop; it keeps its "
                f"slot and counts as {'promoted' if state == 'promoted' else 'not promoted'}",
                level="warning",
                candidate=cid,
            )
        await self.rt.emit("acceptance.power", await anyio.to_thread.run_sync(self.power_line))

    def power_line(self) -> str:
        """One line: the next held-out candidate's alpha and the gain it can detect."""
        policy = self.rt.policy.get()
        pool = self.rt.splits(policy=policy).heldout
        settings = alpha_ledger.pinned(self.rt.store) or wanted_settings(policy, pool)
        budget = alpha_ledger.budget(settings, alpha_ledger.tests(self.rt.store))
        return next_candidate_line(current_row(policy, settings, budget), settings.alpha)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await self.start_up()
        try:
            await self._loop()
        finally:
            # Runner-ups hold a tree and stay "evaluating" while they wait; at a stop they
            # are left interrupted at dev, as a cycle cut short leaves its screened ones.
            with anyio.CancelScope(shield=True):
                kept, self.reserve = self.reserve, []
                for entry in kept:
                    await self.pipeline.abandon(
                        entry, "the loop stopped while it waited in the dev reserve"
                    )
                # Chosen ones waiting behind a person's patch: the queue lives in memory.
                chosen, self.screened = list(self.screened.values()), {}
                for entry in chosen:
                    await self.pipeline.abandon(
                        entry, "the loop stopped while it waited for its held-out test"
                    )

    async def _loop(self) -> None:
        waiting_for: Waiting | None = None
        while True:
            if not self.control.paused:
                # A promotion's replication first, before the next proposal (issue 36).
                await self.replications.run_pending()
            external = bool(self.control.queue)
            waiting = await anyio.to_thread.run_sync(self._why_waiting, external)
            if waiting is not None:
                if waiting != waiting_for:
                    await self.rt.emit(
                        "budget.paused" if waiting.budget_spent else "loop.waiting",
                        f"improvement loop waiting: {waiting.why}",
                    )
                    waiting_for = waiting
                self.control.set_activity(f"waiting: {waiting.why}")
                # While the loop waits, a reserve whose parent or policy changed goes now,
                # and all of it when no cycle can come without a new policy.
                if waiting.final:
                    await self._drop_reserve(
                        f"not chosen: the loop stopped taking cycles ({waiting.why}) while it "
                        "waited in the dev reserve"
                    )
                else:
                    await self._reserve_for(self.rt.snapshot())
                await self._sleep_or_poke(30.0)
                continue
            if waiting_for is not None:
                await self.rt.emit("loop.running", "improvement loop running again")
                waiting_for = None
            await self.cycle()
            await self._sleep_or_poke(self.rt.policy.get().loop.cycle_pause_s)

    async def cycle(self) -> Verdict | None:
        """One candidate, start to verdict. Returns its verdict (None if none was made).

        An outage (engine or model gone) is waited out, not counted as a failure: the
        proposal is asked for again, and an interrupted candidate is evaluated again (a
        held-out test it had begun resumes at its slot), up to ``MAX_REEVALUATIONS`` times;
        after that it stays interrupted. People's patches (``harnessctl propose``) go
        before the loop's own candidates.
        """
        # This cycle's policy: a candidate proposed now is asked for, recorded and evaluated
        # under it alone, whatever a reload says meanwhile.
        snapshot = self.rt.snapshot()
        from_own = not self.control.queue and bool(self.control.own)
        waiting = self.control.next_waiting()
        if waiting is not None and from_own and await self._superseded(waiting[0]):
            return None
        try:
            if waiting is None:
                cid = await self._proposal(snapshot)
                if cid is None:
                    return None
                waiting = (cid, snapshot)
                if self.control.queue:
                    # A person's patch arrived while the proposer was asked: it goes first,
                    # and takes the earlier (larger) share of alpha if it reaches held-out.
                    self.control.enqueue(cid, snapshot, own=True)
                    waiting = self.control.next_waiting()
                    assert waiting is not None
                    await self.rt.emit(
                        "loop.queue",
                        f"candidate c{waiting[0]} (harnessctl propose) is evaluated before the "
                        f"loop's own c{cid}",
                        candidate=waiting[0],
                        behind=cid,
                    )
            cid, policy = waiting
            self.control.current = cid
            verdict = await self._evaluate(cid, policy)
            await self._reserve_for(snapshot)  # a promotion ends the reserve's parent
            return verdict
        except SandboxError as exc:
            await self.rt.emit("loop.error", f"sandbox unavailable: {exc}", level="error")
            await anyio.sleep(10)
        except ProviderError as exc:
            await self.rt.emit("loop.error", f"model provider failed: {exc}", level="error")
        finally:
            self.control.current = None
            self.control.set_activity("")
        return None

    async def _superseded(self, cid: int) -> bool:
        """Whether ``cid``, one of the loop's own candidates that waited behind a person's
        patch, is to be tested against a version that is no longer live (that patch was
        promoted meanwhile): it could not be promoted, so it takes no slot and no alpha;
        the proposer is asked again for the new live version."""

        def check() -> str | None:
            cand = self.lineage.candidate(cid)
            live = self.lineage.current()
            if cand.source != CandidateSource.PROPOSER or cand.parent_version_id == live.id:
                return None
            reason = (
                f"not evaluated: its parent {self.lineage.get(cand.parent_version_id).name} is "
                f"no longer live ({live.name} was promoted while it waited)"
            )
            verdict = Verdict.of(Stage.STATIC, [], reason=reason)
            self.lineage.set_candidate(cid, CandidateState.REJECTED, Stage.STATIC, verdict)
            return reason

        reason = await anyio.to_thread.run_sync(check)
        if reason is None:
            return False
        waited = self.screened.pop(cid, None)
        if waited is not None:
            await self.pipeline.abandon(waited, reason)
        await self.rt.emit(
            "candidate.rejected",
            f"candidate c{cid} rejected at static: {reason}",
            candidate=cid,
            stage=Stage.STATIC,
        )
        return True

    async def _proposal(self, snapshot: PolicySnapshot) -> int | None:
        """A candidate proposed under ``snapshot``: its id (None if the proposal went
        nowhere). Each attempt counts as a cycle, except one an outage cut short: that one
        is asked again."""
        while True:
            try:
                cid = await self._propose(snapshot)
            except BaseException as exc:
                outage = first_outage(exc)
                if outage is None:
                    self.control.cycles += 1
                    raise
            else:
                self.control.cycles += 1
                return cid
            await self._wait_out(outage, "asking for a patch again")

    async def _evaluate(self, cid: int, snapshot: PolicySnapshot) -> Verdict | None:
        for attempt in range(1, MAX_REEVALUATIONS + 2):
            if attempt > 1:
                await self.rt.emit(
                    "candidate.resumed",
                    f"candidate c{cid}: evaluating again after an outage (attempt {attempt}); "
                    "a held-out test it had begun resumes at its slot from its recorded results",
                    candidate=cid,
                    attempt=attempt,
                )
            try:
                # Screened on dev in its own cycle: it continues at the held-out test. After
                # an outage it runs again from the start (its tree went with the attempt).
                screened = self.screened.pop(cid, None)
                return await self.pipeline.run(cid, snapshot, screened)
            except BaseException as exc:
                outage = first_outage(exc)
                if outage is None:
                    raise
            await self._wait_out(outage, f"candidate c{cid} is evaluated again")
        await anyio.to_thread.run_sync(self._settle, cid)
        await self.rt.emit(
            "candidate.abandoned",
            f"candidate c{cid} stays interrupted: outages interrupted its evaluation "
            f"{MAX_REEVALUATIONS + 1} times",
            level="warning",
            candidate=cid,
        )
        return None

    def _settle(self, cid: int) -> None:
        """A candidate left interrupted: its held-out test, if one is still running, keeps
        its slot and counts as not promoted (as at a stop)."""
        alpha_ledger.settle_running(self.rt.store, lambda c: self.lineage.candidate(c).state)

    async def _wait_out(self, outage: Unavailable, then: str) -> None:
        """Wait until the dependency is back (the health monitor probes it, says so, and
        reaps what a lost engine left before letting anyone resume)."""
        state = await self.rt.health.report(outage)
        since = time.strftime("%H:%M:%S", time.localtime(state.since))
        self.control.set_activity(
            f"waiting: {describe(state.dependency)} unavailable since {since}; then {then}"
        )
        await self.rt.health.wait_back(state.dependency)

    async def _record(
        self,
        parent: Version,
        parsed: Proposal | ParseFailure | PatchRejected,
        raw: str,
        *,
        snapshot: PolicySnapshot,
        source: CandidateSource,
        model: str | None,
        rationale: str = "",
        run_id: str = "",
        base: intake.Base | None = None,
    ) -> intake.Submitted:
        """Record a proposal as a candidate; the static stage holds it to ``snapshot``'s
        patch limits."""

        def record() -> intake.Submitted:
            self.tried.refresh()
            return intake.record_parsed(
                self.lineage,
                parent,
                parsed,
                raw,
                source=source,
                proposer_model=model,
                policy=snapshot.policy.patch,
                work_dir=self.rt.work_dir,
                rationale=rationale,
                screen=lambda tree: self.tried.screen(parent, tree),
                base=base,
            )

        sub = await anyio.to_thread.run_sync(record)
        if run_id:
            await anyio.to_thread.run_sync(
                ledger.attribute_run, self.rt.store, run_id, sub.candidate_id
            )
        if not sub.accepted_for_evaluation:
            await self.rt.emit(
                "candidate.rejected",
                f"candidate c{sub.candidate_id} ({source}) rejected at static: {sub.reason}",
                candidate=sub.candidate_id,
                stage=Stage.STATIC,
            )
            return sub
        built = "" if base is None else f", built on c{base.candidate_id}"
        await self.rt.emit(
            "candidate.proposed",
            f"candidate c{sub.candidate_id} ({source}{built}) passed the static stage",
            candidate=sub.candidate_id,
            base=None if base is None else base.candidate_id,
        )
        return sub

    async def submit_external(self, text: str, rationale: str) -> intake.Submitted:
        """Record a person's (or another agent's) patch against the live version; if it
        passes the static stage it joins the queue, ahead of the next proposal, and is
        evaluated under the policy in force now."""
        snapshot = self.rt.snapshot()
        parent = await anyio.to_thread.run_sync(self.lineage.current)
        sub = await self._record(
            parent,
            parse_proposal(text),
            text,
            snapshot=snapshot,
            source=CandidateSource.EXTERNAL,
            model=None,
            rationale=rationale,
        )
        if sub.accepted_for_evaluation:
            self.control.enqueue(sub.candidate_id, snapshot)
            self.control.poke()
        return sub

    async def _propose(self, snapshot: PolicySnapshot) -> int | None:
        """Sample up to ``[proposer] samples`` proposals from one prompt until ``dev_pool``
        of them pass the static stage (it applies, compiles and is no program tried before);
        each is recorded. With more than one, dev-side selection: each runs the stages
        before the held-out test, and the one with the best dev evidence is the cycle's
        candidate (:meth:`_select`). All under ``snapshot``."""
        scratch = self.rt.work_dir / f"bases-{uuid.uuid4().hex[:8]}"
        policy = snapshot.policy.proposer
        # The reserve stands in for proposals: a cycle samples until enough new ones pass
        # static to fill the pool, and always at least one.
        wanted = max(1, policy.dev_pool - len(await self._reserve_for(snapshot)))
        passed: list[int] = []
        try:
            if policy.merge:
                merged = await self._merge(scratch, snapshot)
                if merged is not None and merged.accepted_for_evaluation:
                    passed.append(merged.candidate_id)
            ask = await self.prepare_proposal(scratch, snapshot)
            for sample in range(1, policy.samples + 1):
                if len(passed) >= wanted:
                    break
                self.control.set_activity(
                    f"asking {ask.model.ref} for a patch to {ask.base_name} "
                    f"(sample {sample} of {policy.samples}, {len(passed)} of "
                    f"{wanted} passed static)"
                )
                sub = await self.sample(ask)
                if sub is None:
                    break  # the budget refused, or nothing new is left: go on with what passed
                if sub.accepted_for_evaluation:
                    passed.append(sub.candidate_id)
        except BaseException as exc:
            # An outage while sampling: the proposals that passed are evaluated as they are
            # (they are recorded; asking again would leave them behind untested).
            if first_outage(exc) is None or not passed:
                raise
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))
        if len(passed) <= 1 and not self.reserve:
            return passed[0] if passed else None
        return await self._select(passed, snapshot)

    async def _reserve_for(self, snapshot: PolicySnapshot) -> list[Screened]:
        """The reserve's runner-ups that may still take a slot: screened against the live
        version under ``snapshot``'s policy. The others are dropped at dev (their dev
        evidence compared them with a version that is no longer live, or was measured
        under another policy), with no held-out task run and no alpha spent."""
        if not self.reserve:
            return []
        live = await anyio.to_thread.run_sync(self.lineage.current)
        keep: list[Screened] = []
        for entry in self.reserve:
            parent = entry.run.parent
            if parent.id != live.id:
                # A promotion from its parent, or any other change of the live version (a
                # rollback, or a promotion from the version rolled back to).
                came = (
                    f"c{live.candidate_id} was promoted"
                    if live.parent_id == parent.id and live.candidate_id is not None
                    else f"{live.name} became live"
                )
                why = (
                    f"not chosen: {came} while it waited in the dev reserve (its parent "
                    f"{parent.name} is no longer live)"
                )
            elif entry.run.snapshot.sha256 != snapshot.sha256:
                why = (
                    "not chosen: the policy changed while it waited in the dev reserve (its dev "
                    "evidence was measured under the earlier one)"
                )
            else:
                keep.append(entry)
                continue
            await self.pipeline.drop(entry, why)
        self.reserve = keep
        return keep

    async def _drop_reserve(self, why: str) -> None:
        """End every runner-up in the reserve at dev with ``why``."""
        kept, self.reserve = self.reserve, []
        for entry in kept:
            await self.pipeline.drop(entry, why)

    async def _merge(self, scratch: Path, snapshot: PolicySnapshot) -> intake.Submitted | None:
        """GEPA's merge: two candidates of the live version whose dev wins complement each
        other, both changes in one tree (a line-level three-way merge), recorded as a
        candidate built on the one with more wins (None: no such pair merges cleanly, or
        the live version has no dev report yet). No model call; the static stage holds the
        whole change to the patch limits."""
        policy = snapshot.policy
        parent = await anyio.to_thread.run_sync(self.lineage.current)
        dev = await self.pipeline.baseline(parent, Split.DEV, policy.models.primary, policy=policy)
        pairs = await anyio.to_thread.run_sync(
            lambda: briefing.merge_pairs(self.lineage, self.rt.store, parent, dev)
        )
        for pair in pairs:
            built = await anyio.to_thread.run_sync(
                intake.merge_candidates, self.lineage, parent, pair.first, pair.second, scratch
            )
            if isinstance(built, MergeConflict):
                log.info("merge of c%d and c%d skipped: %s", pair.first, pair.second, built)
                continue
            tree, diff = built
            self.control.set_activity(f"merging c{pair.second}'s change onto c{pair.first}")
            return await self._record(
                parent,
                parse_proposal(diff),
                json.dumps({briefing.MERGE_KEY: [pair.first, pair.second]}),
                snapshot=snapshot,
                source=CandidateSource.PROPOSER,
                model=None,
                rationale=(
                    f"merge: c{pair.first} and c{pair.second} each solve dev tasks the other "
                    f"does not ({len(pair.wins)} dev tasks {parent.name} fails, between them)"
                ),
                base=intake.Base(pair.first, tree),
            )
        return None

    async def _select(self, cids: list[int], snapshot: PolicySnapshot) -> int | None:
        """Dev-side selection: screen each of ``cids`` on the stages before the held-out
        test; the best by dev evidence among them and the reserve's runner-ups (screened in
        earlier cycles against the same parent, under the same policy) takes the held-out
        slot; the others wait in the reserve. Only one held-out test per cycle, so the
        lineage's alpha is spent as without selection (DESIGN.md, "Dev-side selection")."""
        screened: list[Screened] = []
        try:
            for cid in cids:
                self.control.current = cid
                outcome = await self.pipeline.screen(cid, snapshot)
                if isinstance(outcome, Screened):
                    screened.append(outcome)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                why = "its cycle was cut short before a candidate was chosen"
                outage = first_outage(exc)
                for kept in screened:
                    await self.pipeline.abandon(kept, f"{why} ({outage or 'stopped'})")
            raise
        finally:
            self.control.current = None
        # Checked again: the live version may have changed while the proposals were asked
        # for and screened (a rollback), and a pool ranks gains over one parent only.
        with anyio.CancelScope(shield=True):
            earlier = await self._reserve_for(snapshot)
        pool = [*earlier, *screened]
        if not pool:
            return None
        best = best_screened(pool)
        # Bookkeeping before any await, so a stop finds each in the reserve or waiting for
        # its test, where the loop's end abandons it. Every runner-up waits, best first (the
        # earlier proposed on a tie, as best_screened): the pool holds at most ``dev_pool``
        # (:meth:`_propose` asked for only as many new proposals as fill it).
        self.screened[best.cid] = best
        self.reserve = sorted(
            (s for s in pool if s is not best), key=lambda s: (s.evidence(), -s.cid), reverse=True
        )
        from_reserve = f", {len(earlier)} of them from the reserve" if earlier else ""
        await self.rt.emit(
            "candidate.chosen",
            f"candidate c{best.cid} takes the held-out slot: the best dev evidence of "
            f"{len(pool)} screened{from_reserve} ({best.summary()})"
            + (
                f"; c{', c'.join(str(s.cid) for s in self.reserve)} wait in the dev reserve"
                if self.reserve
                else ""
            ),
            candidate=best.cid,
            screened=[s.cid for s in screened],
            from_reserve=[s.cid for s in earlier],
            reserve=[s.cid for s in self.reserve],
        )
        return best.cid

    async def prepare_proposal(self, scratch: Path, snapshot: PolicySnapshot) -> Ask:
        """The prompt for the chosen base (the live version or one of its candidates, by
        ``[proposer] search``): its dev report, source, targets, and the archive, all under
        ``snapshot``. A base candidate's tree is materialised under ``scratch`` (the caller
        removes it)."""
        policy = snapshot.policy
        parent = await anyio.to_thread.run_sync(self.lineage.current)
        dev = await self.pipeline.baseline(parent, Split.DEV, policy.models.primary, policy=policy)
        nodes, devs = await anyio.to_thread.run_sync(
            lambda: briefing.search_nodes(self.lineage, self.rt.store, parent, dev)
        )
        node = choose_base(nodes, policy.proposer.search, self.rng)
        base, tree = None, self.lineage.path(parent)
        if node.candidate_id is not None:
            cid = node.candidate_id
            tree = await anyio.to_thread.run_sync(
                intake.materialise_base, self.lineage, cid, scratch
            )
            base, dev = intake.Base(cid, tree), devs[cid]
            log.info(
                "proposing on c%d (dev %d/%d; live %s %d/%d)",
                cid,
                node.solved,
                node.n,
                parent.name,
                nodes[0].solved,
                nodes[0].n,
            )
        suite = await self.rt.load_suite(policy=policy)
        failures = [
            FailedTask(t, suite.task(t.id).prompt, suite.expected(t.id))
            for t in dev.tasks
            if not t.passed
        ][: policy.proposer.failures_shown]
        sources = await anyio.to_thread.run_sync(read_sources, tree)
        model = await self.rt.model(policy.proposer.model)
        protocol = policy.proposer.protocol
        if protocol == "auto":
            protocol = "operations" if model.capabilities.structured_edits else "text"
        targets = find_targets(sources) if protocol == "operations" else None
        if targets is not None:  # a small model: the compact prompt
            if policy.pipeline.require_dev_change:
                # An edit of code that never ran on dev changes nothing there, so the dev
                # change stage would stop it (and the dead-code gate reject what it adds):
                # offer only the targets the base's dev run reached.
                targets = reached_targets(targets, sources, dev.coverage.executed)
            # The moves' prompt text is one the dev run reached, taken before the edit move's
            # filter of constants whose values left dev unchanged (a new text is not a value
            # tried before).
            reached = targets
            if policy.pipeline.require_dev_change:
                # Nor a constant that another value of already left dev unchanged.
                base_id = None if base is None else base.candidate_id
                inert = await anyio.to_thread.run_sync(
                    briefing.inert_constants, self.lineage, parent, base_id
                )
                targets = without_constants(targets, inert)
            archive_text = await anyio.to_thread.run_sync(
                self._archive, parent, policy, policy.proposer.archive_tokens, False
            )
            offer, history = await self._offer(policy, parent, dev, reached, suite, sources)
            shown = targets

            def compact(failed: list[FailedTask], archived: str) -> list[Message]:
                return build_prompt(
                    sources, dev, failed, archived, shown, offer=offer, history=history
                )

            reserve = min(policy.proposer.max_tokens, edit_protocol.REPLY_TOKENS)
            messages = await fitted_prompt(model, reserve, compact, failures, archive_text)
            return Ask(snapshot, parent, model, messages, sources, targets, base, offer)
        # A capable model: whole transcripts first, then the archive with whole diffs in
        # what is left of [proposer] context_tokens (at least archive_tokens).
        budget = policy.proposer.context_tokens
        failed = failures_within(failures, budget)
        archive_budget = max(policy.proposer.archive_tokens, budget - tokens_of(failed))
        archive_text = await anyio.to_thread.run_sync(
            self._archive, parent, policy, archive_budget, True
        )

        def whole(chosen: list[FailedTask], archived: str) -> list[Message]:
            text = failed if len(chosen) == len(failures) else failures_within(chosen, budget)
            return build_prompt(sources, dev, chosen, archived, failures_text=text)

        reserve = policy.proposer.max_tokens
        messages = await fitted_prompt(model, reserve, whole, failures, archive_text)
        return Ask(snapshot, parent, model, messages, sources, targets, base)

    async def _offer(
        self,
        policy: Policy,
        parent: Version,
        dev: EvalReport,
        targets: Targets,
        suite: Suite,
        sources: dict[str, str],
    ) -> tuple[moves.Offer, list[moves.Trial]]:
        """The move this cycle asks for, drawn by Thompson sampling over the moves' dev
        records among those the policy lists and the base allows, with its evidence: the
        base's solved dev tasks (demonstrate), earlier instructions' dev results
        (instruction), the components whose symptom its failed dev tasks show and whose
        program was not tried on ``parent`` (component). None of the policy's moves
        possible: an edit, which always is."""
        prompt = moves.prompt_constant(targets)
        demos = (
            await anyio.to_thread.run_sync(briefing.demonstrations, dev, suite)
            if prompt is not None
            else []
        )
        offered = (
            await anyio.to_thread.run_sync(self._components, parent, dev, suite, sources)
            if "component" in policy.proposer.moves
            else []
        )
        allowed = moves.possible(policy.proposer.moves, prompt, demos, offered)
        if not allowed:
            log.warning(
                "none of [proposer] moves %s can be made on this base (no prompt text "
                "constant, or no solved dev task): asking for an edit",
                policy.proposer.moves,
            )
            allowed = ["edit"]
        records = await anyio.to_thread.run_sync(
            lambda: briefing.move_records(self.lineage, self.rt.store, model=dev.model)
        )
        move = moves.choose_move(allowed, records, self.rng)
        history: list[moves.Trial] = []
        if move == "instruction":
            history = await anyio.to_thread.run_sync(
                lambda: briefing.instruction_history(
                    self.lineage,
                    self.rt.store,
                    parent,
                    dev,
                    heldout_ids=self._reached_heldout(),
                )
            )
        log.info("asking for a %s move (records %s)", move, records)
        return moves.Offer(move, prompt, tuple(demos), tuple(offered)), history

    def _components(
        self, parent: Version, dev: EvalReport, suite: Suite, sources: dict[str, str]
    ) -> list[components.Evidence]:
        """The components the base may take: evidence in its failed dev tasks, not in it
        already, and a program not tried on ``parent`` (blocking)."""
        file = edit_protocol.component_file(sources)
        if file is None:
            return []
        found = components.evidence(briefing.component_failures(dev, suite), sources[file])
        return self._untried(parent, sources, found)

    def _untried(
        self, parent: Version, sources: dict[str, str], found: Sequence[components.Evidence]
    ) -> list[components.Evidence]:
        """Those of ``found`` whose program (``sources`` with the component) was not tried
        on ``parent``, this cycle's earlier samples included (blocking)."""
        self.tried.refresh()
        return [
            e
            for e in found
            if self.tried.refusal(
                parent, fingerprint(_encoded(edit_protocol.with_component(sources, e.key)))
            )
            is None
        ]

    async def sample(self, ask: Ask) -> intake.Submitted | None:
        """One proposal for ``ask``, with a fresh seed, recorded as a candidate (None: the
        proposer's budget refused it, or the move has no choice left that is not a
        program tried before: a component move's every component, or every choice closed
        in ``ask.closed`` by earlier replies; each would only be a duplicate)."""
        policy = ask.snapshot.policy.proposer
        closed = ask.closed  # grown by this sample's repeated replies, for the next draws
        if ask.offer.move == "component":
            fresh = await anyio.to_thread.run_sync(
                self._untried, ask.parent, ask.sources, ask.offer.components
            )
            if not fresh:
                log.info("every component offered this cycle is proposed already")
                return None
            ask = replace(ask, offer=replace(ask.offer, components=tuple(fresh)))
        schema = None
        if ask.targets is not None:
            schema = await anyio.to_thread.run_sync(
                self._schema, ask.parent, ask.sources, ask.targets, ask.offer, closed
            )
            if schema is None:
                await self.rt.emit(
                    "proposal.exhausted",
                    f"no {ask.offer.move} choice is left to draw: "
                    + (
                        f"{len(closed)} closed by replies that repeated a program tried before"
                        if closed
                        else "every one was tried before"
                    ),
                    move=ask.offer.move,
                    closed=sorted(list(slot) for slot in closed),
                )
                return None
        run_id = f"prop-{uuid.uuid4().hex[:12]}"
        charge = Charge(
            model=ask.model.ref, purpose="propose", run_id=run_id, version_id=ask.parent.id
        )
        # The operations protocol's replies are checked as the static stage would before one
        # becomes a proposal: a line of a small model's code that does not compile (or a
        # forged worked-examples text) is discarded and drawn again, up to REPLY_ATTEMPTS
        # times; the last is recorded whatever it is, with its reason. A reply that repeats
        # a program tried before also closes its choice (the line or constant it edits, the
        # first example it shows) for the rest of the cycle: a grammar cannot leave out one
        # line of code, and a 135M model drawn again on the same choice writes the same line
        # (all 12 draws of four samples in one cycle repeated c17 of an 80-minute run).
        # Every reply's tokens are charged to the same run, so the candidate's proposal cost
        # includes the discarded ones. Free-text replies of larger models are recorded as
        # they come.
        attempts = REPLY_ATTEMPTS if ask.targets is not None else 1
        text = ""
        parsed: Proposal | ParseFailure | PatchRejected = ParseFailure("no reply", "")
        for attempt in range(1, attempts + 1):
            request = proposal_request(
                ask.messages,
                max_tokens=policy.max_tokens,
                temperature=policy.temperature,
                schema=schema,
                seed=secrets.randbelow(2**31),
            )
            try:
                reply = await ask.model.chat(request, charge)
            except BudgetExceeded as exc:
                await self.rt.emit("budget.paused", f"proposer refused: {exc}", level="warning")
                if attempt == 1:
                    return None
                break  # the discarded reply before is recorded: its tokens were spent
            text = reply.content or ""
            if ask.targets is None:
                parsed = parse_proposal(text)
                break
            parsed = edit_protocol.to_proposal(text, ask.sources, ask.targets, ask.offer)
            flaw = await anyio.to_thread.run_sync(self._flaw, ask, parsed)
            if flaw is None:
                break
            slot = edit_protocol.slot_of(text, ask.targets) if flaw.repeats else None
            if slot is not None:
                closed.add(slot)
                schema = await anyio.to_thread.run_sync(
                    self._schema, ask.parent, ask.sources, ask.targets, ask.offer, closed
                )
            if attempt == attempts or schema is None:
                break  # recorded as it is, with its reason: nothing else is left to draw
            closing = "" if slot is None else f"; {slot[0]} {slot[1]} left out of the next draws"
            await self.rt.emit(
                "proposal.discarded",
                f"proposer reply {attempt} of at most {attempts} discarded: {flaw.reason}{closing}",
                run_id=run_id,
                attempt=attempt,
                reason=flaw.reason,
                closed=None if slot is None else list(slot),
            )
        return await self._record(
            ask.parent,
            parsed,
            text,
            snapshot=ask.snapshot,
            source=CandidateSource.PROPOSER,
            model=ask.model.ref,
            run_id=run_id,
            base=ask.base,
        )

    def _flaw(self, ask: Ask, parsed: Proposal | ParseFailure | PatchRejected) -> Flaw | None:
        """Why the static stage would stop ``parsed`` as written (not compiling, over the
        patch limits, no JSON, an operation that cannot be carried out, a program tried
        before), or None. The reply schema already leaves out constant values whose program
        was tried, but other edits still repeat one (all 5 static stops of 43 proposals in a
        quiet two-hour run were such duplicates): drawn again like the rest, with the
        repeated choice closed (``repeats``), and the last attempt's record names the
        earlier candidate."""
        if isinstance(parsed, ParseFailure):
            return Flaw(f"unparseable: {parsed.reason}")
        if isinstance(parsed, PatchRejected):
            return Flaw(parsed.reason)
        start = self.lineage.path(ask.parent) if ask.base is None else ask.base.tree
        scratch = self.rt.work_dir / f"precheck-{secrets.token_hex(6)}"
        try:
            checked = intake.check_proposal(
                parsed, start, ask.snapshot.policy.patch, scratch / "tree"
            )
            if checked is not None:
                return Flaw(checked.reason)
            self.tried.refresh()
            repeat = self.tried.screen(ask.parent, scratch / "tree")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return None if repeat is None else Flaw(repeat.reason, repeats=True)

    def _schema(
        self,
        parent: Version,
        sources: dict[str, str],
        targets: Targets,
        offer: moves.Offer,
        closed: set[edit_protocol.Slot],
    ) -> dict[str, Any] | None:
        """The reply schema for ``offer``'s move, without constant values whose program was
        tried already and without the ``closed`` choices (None: none is left)."""
        self.tried.refresh()

        def offered(op: Operation) -> bool:
            try:
                after = edit_protocol.preview(sources, targets, op)
            except PatchRejected:
                return False
            return self.tried.refusal(parent, fingerprint(_encoded(after))) is None

        return edit_protocol.reply_schema(targets, offer, offered, closed)

    def _reached_heldout(self) -> set[int]:
        """The candidates that got to the held-out stage (began a held-out test in the alpha
        ledger, or ran on the split): of each, the proposer learns only whether it was
        promoted (``briefing.outcome``)."""
        held = {t.candidate_id for t in alpha_ledger.tests(self.rt.store)}
        return held | results.candidates_run_on(self.rt.store, Split.HELDOUT)

    def _archive(self, live: Version, policy: Policy, budget_tokens: int, full: bool) -> str:
        entries = briefing.archive_entries(
            self.lineage,
            self.rt.store,
            live,
            heldout_ids=self._reached_heldout(),
            model=policy.models.primary,
        )
        return archive.section(
            entries,
            max_entries=policy.proposer.verdicts_shown,
            budget_tokens=budget_tokens,
            full=full,
        )


async def fitted_prompt(
    model: CountsPrompts,
    reserve: int,
    build: Callable[[list[FailedTask], str], list[Message]],
    failures: list[FailedTask],
    archive_text: str,
) -> list[Message]:
    """The prompt ``build`` makes, fitted to the proposer model's context window with
    ``reserve`` tokens left for the reply: failed tasks are left out from the last one
    first, then the archive. A model whose window is unknown gets the whole prompt."""
    limit = model.capabilities.context_tokens
    if limit is None:
        return build(failures, archive_text)
    shown = list(failures)
    while True:
        messages = build(shown, archive_text)
        request = proposal_request(messages, max_tokens=reserve, temperature=0.0)
        size = await model.prompt_tokens(request)
        if size + reserve <= limit:
            return messages
        if shown:
            shown.pop()
        elif archive_text != ARCHIVE_LEFT_OUT:
            archive_text = ARCHIVE_LEFT_OUT
        else:
            log.warning(
                "the proposer's prompt has %d tokens with no failed task and no archive; "
                "%s holds %d with %d for the reply: raise [local] n_ctx",
                size,
                model.ref,
                limit,
                reserve,
            )
            return messages


def _encoded(sources: dict[str, str]) -> dict[str, bytes]:
    return {path: text.encode("utf-8") for path, text in sources.items()}
