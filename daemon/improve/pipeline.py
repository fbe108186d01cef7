"""Candidate pipeline: the stages from smoke to panel, and the verdict.

Cheapest first, stopping at the first failure; the stages and their order are one list,
:data:`STAGES` (smoke, dev screen, held-out test, point gates, decoy, compute-matched,
security, panel), run by :func:`daemon.improve.stages.run_stages`, which also derives the
verdict and its "not reached" lines. The parent's reports are computed once per set of
conditions (:mod:`daemon.evaluation.conditions`) and reused, so every candidate is
compared with its parent on exactly the same tasks under exactly the same conditions.
The held-out stage (:mod:`daemon.improve.heldout`) is a sequential test at the candidate's
share of the lineage's alpha; a candidate it would promote must then pass the point gates
(token cap, dead code, provenance), the decoy re-run of its wins, the optional
compute-matched gate, the optional security gate (:mod:`daemon.improve.security`) and the
panel. Held-out results never leave this module except as the verdict's per-gate figures,
and the proposer reads of those only "promoted" or not. With ``[gates.review]`` on, a
candidate that passes every gate is held for a person instead of promoted
(:mod:`daemon.improve.review`); an approval then goes through :meth:`Pipeline.promote`, the
automatic promotion's own path.

One policy per candidate: :meth:`Pipeline.run` is handed the snapshot of the policy taken
when the candidate's cycle began (before it was proposed, or when a person submitted it),
and every threshold, limit and budget of its stages and verdict comes from it (the verdict
records which policy that was), so an edit of the policy file mid-candidate applies from
the next candidate on. Nothing here reads the live policy: every evaluation takes its
policy as a required argument.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from daemon.config.policy import Policy
from daemon.errors import LineageError, Unavailable, first_outage
from daemon.evaluation import results
from daemon.evaluation.conditions import conditions_key, run_conditions
from daemon.evaluation.coverage import dead_added, read_sources
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.health import interruption
from daemon.evaluation.pairing import TaskOrder
from daemon.evaluation.report import EvalReport, Split, TaskResult
from daemon.evaluation.runtime import PolicySnapshot, Runtime
from daemon.improve import alpha_ledger, intake, replication
from daemon.improve.gates import (
    acceptance_gates,
    dead_code_gate,
    decoy_gate,
    dev_screen_gate,
    generated_gate,
    panel_gate,
    provenance_gate,
    tokens_gate,
)
from daemon.improve.heldout import (
    HeldoutRun,
    HeldoutSlot,
    RunSide,
    Sides,
    StopWhen,
    claim_slot,
    record_end,
    run_heldout,
)
from daemon.improve.live_probes import probes
from daemon.improve.live_replay import live_gate, replay
from daemon.improve.matched import compute_matched_gate
from daemon.improve.modelfree import decoy_check
from daemon.improve.security import security_gate
from daemon.improve.stages import PipelineStage, StageResult, not_reached, run_prefix, run_stages
from daemon.lineage import CandidateState, Decider, Lineage, Review, Version
from daemon.suites import generated_ids
from daemon.verdict import Gate, GateResult, PolicyUsed, Stage, Verdict

log = logging.getLogger("harnessd.pipeline")

SMOKE_FAILURES = ("crash", "protocol", "timeout", "oom", "output_limit")
NO_CHANGE = "no observable change on dev"
"""The verdict's reason for a candidate stopped by the ``dev_change`` gate."""


def _same(parent: TaskResult, mine: TaskResult, noise: float) -> bool:
    """The same observable behaviour on one task: what it answered, claimed and called."""
    if (
        parent.passed != mine.passed
        or parent.claimed_success != mine.claimed_success
        or parent.confidence != mine.confidence
        or parent.error != mine.error
        or parent.model_calls != mine.model_calls
        or json.dumps(parent.output, sort_keys=True, default=str)
        != json.dumps(mine.output, sort_keys=True, default=str)
    ):
        return False
    return abs(mine.tokens - parent.tokens) <= noise * max(parent.tokens, 1)


def changed_tasks(parent: EvalReport, candidate: EvalReport, noise: float) -> list[str]:
    """The dev tasks on which ``candidate`` behaves observably differently from ``parent``
    (a task only one of them ran counts as different)."""
    theirs = parent.by_id()
    return [
        t.id for t in candidate.tasks if t.id not in theirs or not _same(theirs[t.id], t, noise)
    ]


def policy_used(snapshot: PolicySnapshot) -> PolicyUsed:
    """How a verdict names the policy it was reached under."""
    return PolicyUsed(path=str(snapshot.path), sha256=snapshot.sha256)


class Pipeline:
    def __init__(
        self, rt: Runtime, lineage: Lineage, activity: Callable[[str], None] = lambda s: None
    ) -> None:
        self.rt = rt
        self.lineage = lineage
        self.activity = activity
        self.current: int | None = None  # the candidate under evaluation
        self._began = 0.0  # when its evaluation began (time.monotonic)

    def version_subject(self, version: Version) -> Subject:
        """A lineage version as an evaluation's subject (its tree, name and id)."""
        return Subject(
            self.lineage.path(version), version.name, version_id=version.id, version=version.name
        )

    # ---- baselines -----------------------------------------------------------------------

    async def baseline(
        self,
        version: Version,
        split: Split,
        model: str,
        task_ids: list[str] | None = None,
        *,
        suite_spec: str | None = None,
        policy: Policy,
        fixed: frozenset[str] | None = None,
    ) -> EvalReport:
        """The version's full report on ``task_ids`` (default: the whole ``split``) with
        ``model``, computed at most once per set of conditions (``suite_spec``: another suite
        than the policy's, e.g. the security gate's), under ``policy`` (a candidate's
        snapshot)."""
        ids = task_ids if task_ids is not None else await self.split_ids(split, suite_spec, policy)

        def lookup() -> tuple[str, EvalReport | None]:
            conditions = run_conditions(
                policy=policy,
                image=self.rt.image,
                suite=self.rt.suite(suite_spec, policy=policy),
                task_ids=ids,
                model=model,
                tree_hash=version.tree_hash,
            )
            key = conditions_key(conditions | {"split": split})
            return key, results.cached_baseline(self.rt.store, version.id, key, ids)

        key, cached = await anyio.to_thread.run_sync(lookup)
        if cached is not None:
            return cached
        # Say what runs: during a candidate's evaluation this is its parent's baseline.
        whose = f"candidate c{self.current}: parent " if self.current is not None else "baseline: "
        self.activity(f"{whose}{version.name} on {split} with {model}")
        await self.rt.emit(
            "baseline.started", f"measuring {version.name} on the {split} split with {model}"
        )
        subject = self.version_subject(version)
        began = time.monotonic()
        report = await evaluate(
            self.rt,
            subject,
            split=split,
            task_ids=ids,
            model=model,
            suite_spec=suite_spec,
            keep_transcripts=split == Split.DEV,
            conditions=key,
            policy=policy,
            fixed=fixed,
        )
        await self.rt.emit(
            "baseline.done",
            f"{version.name} {split} {model}: accuracy {report.accuracy:.1%}, "
            f"gap {report.verification_gap:+.1%}, {report.tokens_per_task:.0f} tokens/task",
            version=version.name,
            split=split,
            model=model,
            evaluation_s=round(time.monotonic() - began, 3),
        )
        return report

    async def split_ids(self, split: Split, suite_spec: str | None, policy: Policy) -> list[str]:
        """The task ids of ``split`` under ``policy`` (``suite_spec``: another suite)."""
        splits = await self.rt.load_splits(suite_spec, policy=policy)
        if suite_spec is not None:  # the security gate's injection tasks
            return splits.heldout[: policy.gates.security.tasks]
        return splits.dev if split == Split.DEV else splits.heldout

    # ---- one candidate -------------------------------------------------------------------

    async def stage(self, cid: int, stage: Stage) -> None:
        """Say (in the lineage, the activity line and the event log) that candidate ``cid``
        entered ``stage``."""
        evaluating = CandidateState.EVALUATING
        await anyio.to_thread.run_sync(lambda: self.lineage.set_candidate(cid, evaluating, stage))
        self.activity(f"candidate c{cid}: {stage}")
        await self.rt.emit(
            "candidate.stage", f"candidate c{cid}: {stage}", candidate=cid, stage=stage
        )

    async def run(
        self, candidate_id: int, snapshot: PolicySnapshot, screened: Screened | None = None
    ) -> Verdict:
        """Evaluate a recorded candidate under ``snapshot``, the policy its cycle began with;
        promote it if every gate passes. ``screened``: the candidate already passed the
        stages before the held-out test (:meth:`screen`, under the same snapshot); it
        continues from there with its dev results."""
        self.current, self._began = candidate_id, time.monotonic()
        if screened is not None:
            run, stages, earlier = screened.run, STAGES[_HELDOUT_TEST:], screened.gates
        else:
            cand = await anyio.to_thread.run_sync(self.lineage.candidate, candidate_id)
            parent = await anyio.to_thread.run_sync(self.lineage.get, cand.parent_version_id)
            tree = await anyio.to_thread.run_sync(
                intake.materialise, self.lineage, candidate_id, self.rt.work_dir
            )
            run = CandidateEvaluation(self, candidate_id, parent, tree, cand.patch, snapshot)
            stages, earlier = STAGES, []
        try:
            used = policy_used(snapshot)
            verdict = await run_stages(stages, run, snapshot.policy, used, earlier=earlier)
            review = snapshot.policy.gates.review.enabled
            await self._conclude(candidate_id, run.tree, verdict, run.held, review=review)
            return verdict
        except BaseException as exc:
            # Stopped mid-evaluation (daemon stop, engine gone): say so now rather than
            # leaving it to the next start's reconcile. Nothing is concluded from it.
            with anyio.CancelScope(shield=True):
                await self._interrupted(candidate_id, interruption(exc), first_outage(exc))
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await _remove_tree(run.tree)
            self.current = None
            self.activity("")

    async def screen(self, candidate_id: int, snapshot: PolicySnapshot) -> Verdict | Screened:
        """The stages before the held-out test (smoke, dev screen, dev change) under
        ``snapshot``: the candidate's verdict if it stops there (concluded here), else its
        dev evidence, for the loop to choose which of several takes the held-out slot
        (:meth:`run` with ``screened`` continues it; :meth:`drop` ends it)."""
        self.current, self._began = candidate_id, time.monotonic()
        cand = await anyio.to_thread.run_sync(self.lineage.candidate, candidate_id)
        parent = await anyio.to_thread.run_sync(self.lineage.get, cand.parent_version_id)
        tree = await anyio.to_thread.run_sync(
            intake.materialise, self.lineage, candidate_id, self.rt.work_dir
        )
        run = CandidateEvaluation(self, candidate_id, parent, tree, cand.patch, snapshot)
        keep = False
        try:
            outcome = await run_prefix(
                BEFORE_HELDOUT, STAGES[_HELDOUT_TEST:], run, snapshot.policy, policy_used(snapshot)
            )
            if isinstance(outcome, Verdict):
                await self._conclude(candidate_id, tree, outcome, None)
                return outcome
            keep = True
            return Screened(run, outcome.gates)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._interrupted(candidate_id, interruption(exc), first_outage(exc))
            raise
        finally:
            if not keep:
                with anyio.CancelScope(shield=True):
                    await _remove_tree(tree)
            self.current = None
            self.activity("")

    async def drop(self, screened: Screened, reason: str) -> Verdict:
        """A screened candidate that will take no held-out slot (``reason`` says why): it is
        rejected at dev with its dev gates, no held-out task run and no alpha spent."""
        cid, run = screened.cid, screened.run
        policy = run.snapshot.policy
        rest = not_reached(STAGES[_HELDOUT_TEST:], policy, screened.gates)
        verdict = Verdict.of(
            Stage.DEV, [*screened.gates, *rest], reason=reason, policy=policy_used(run.snapshot)
        )
        try:
            await self._conclude(cid, run.tree, verdict, None)
        finally:
            with anyio.CancelScope(shield=True):
                await _remove_tree(run.tree)
        return verdict

    async def abandon(self, screened: Screened, reason: str) -> None:
        """A screened candidate that will not be evaluated further (an outage cut its cycle
        short, or its parent is no longer live): it is left interrupted at dev, and its tree
        removed. No held-out task ran, so no alpha is involved."""
        cid = screened.cid

        def mark() -> bool:
            # Not through _interrupted: that settles running held-out tests, and this
            # candidate has none (another candidate's, resumed after an outage, must keep its).
            if self.lineage.candidate(cid).state != CandidateState.EVALUATING:
                return False
            self.lineage.set_candidate(cid, CandidateState.INTERRUPTED, Stage.DEV)
            return True

        with anyio.CancelScope(shield=True):
            try:
                if await anyio.to_thread.run_sync(mark):
                    await self.rt.emit(
                        "candidate.interrupted",
                        f"candidate c{cid} interrupted at {Stage.DEV}: {reason}",
                        candidate=cid,
                        stage=Stage.DEV,
                        reason=reason,
                    )
            finally:
                await _remove_tree(screened.run.tree)

    def _timing(self, cid: int) -> dict[str, float]:
        """The verdict event's ``evaluation_s`` (the metrics' evaluation latency): from the
        start of the candidate's evaluation to its verdict; none for a decision made outside
        it (a person's approval)."""
        if self.current != cid:
            return {}
        return {"evaluation_s": round(time.monotonic() - self._began, 3)}

    async def _interrupted(self, cid: int, reason: str, outage: Unavailable | None) -> None:
        def mark() -> str | None:
            # A held-out test cut short keeps its slot and counts as not promoted, unless
            # the promotion (or hold for review) had committed (both precede the ledger row), or
            # an outage cut it: an engine or model gone says nothing about the candidate,
            # so its test stays running and resumes at its slot when the loop evaluates
            # the candidate again (DESIGN.md, "Acceptance": an outage is not a loss).
            if outage is None:
                alpha_ledger.settle_running(
                    self.rt.store, lambda c: self.lineage.candidate(c).state
                )
            cand = self.lineage.candidate(cid)
            if cand.state != CandidateState.EVALUATING:
                return None
            self.lineage.set_candidate(cid, CandidateState.INTERRUPTED, cand.stage)
            return cand.stage

        stage = await anyio.to_thread.run_sync(mark)
        if stage is not None:
            await self.rt.emit(
                "candidate.interrupted",
                f"candidate c{cid} interrupted at {stage}: {reason}",
                candidate=cid,
                stage=stage,
                reason=reason,
            )

    async def promote(
        self,
        cid: int,
        tree: Path,
        verdict: Verdict,
        decision: dict[str, object] | None,
        approval: Review | None = None,
    ) -> Version:
        """The one way a candidate becomes live, automatic or approved in review: the
        lineage checks (parent live, tree = parent + recorded patch) and applies in one
        transaction, the live harness serves the new version from its next request on, and
        the alpha ledger records the promotion (``decision``: the held-out test's, for an
        automatic promotion; an approved test's decision is already recorded)."""
        version = await anyio.to_thread.run_sync(self.lineage.promote, cid, tree, verdict, approval)
        if approval is not None:
            await anyio.to_thread.run_sync(alpha_ledger.decide_review, self.rt.store, cid, True)
        elif decision is not None:
            await record_end(self.rt, cid, True, decision)
        by = Decider.GATES if approval is None else Decider.PERSON
        who = "" if approval is None else f"; approved by {approval.reviewer}"
        await self.rt.emit(
            "version.promoted",
            f"candidate c{cid} accepted: {version.name} is live ({verdict.reason}{who})",
            candidate=cid,
            version=version.name,
            gates=verdict.deciding(),
            decided_by=by.value,
            **self._timing(cid),
        )
        # A check of the test on fresh tasks (never a gate): the loop runs it next cycle.
        await anyio.to_thread.run_sync(
            replication.after_promotion, self.rt.store, cid, version, self.rt.policy.get()
        )
        return version

    async def _hold(self, cid: int, verdict: Verdict, decision: dict[str, object] | None) -> None:
        """[gates.review] is on: the candidate passed every gate and waits for a person."""
        await anyio.to_thread.run_sync(self.lineage.hold_for_review, cid, verdict)
        if decision is not None:
            await anyio.to_thread.run_sync(alpha_ledger.hold, self.rt.store, cid, decision)
        await self.rt.emit(
            "candidate.awaiting_review",
            f"candidate c{cid} passed every gate and awaits review: 'harnessctl review', then "
            f"'harnessctl approve c{cid}' or 'harnessctl reject c{cid} --reason ...'",
            candidate=cid,
            gates=verdict.deciding(),
            **self._timing(cid),
        )

    async def _conclude(
        self,
        cid: int,
        tree: Path,
        verdict: Verdict,
        held: HeldoutRun | None,
        *,
        review: bool = False,
    ) -> None:
        decision = None if held is None else held.decision.to_dict()
        if verdict.decision == "accept":
            try:
                if review:
                    return await self._hold(cid, verdict, decision)
                await self.promote(cid, tree, verdict, decision)
            except LineageError as exc:
                # E.g. a rollback made another version live while this one was evaluated.
                verdict = Verdict.of(
                    Stage.DONE, verdict.gates, reason=f"not promoted: {exc}", policy=verdict.policy
                )
                return await self._conclude(cid, tree, verdict, held)
            return
        await anyio.to_thread.run_sync(
            lambda: self.lineage.set_candidate(cid, CandidateState.REJECTED, verdict.stage, verdict)
        )
        await record_end(self.rt, cid, False, decision)
        await self.rt.emit(
            "candidate.rejected",
            f"candidate c{cid} rejected at {verdict.stage}: {verdict.reason}",
            candidate=cid,
            stage=verdict.stage,
            failed=verdict.failed,
            gates=verdict.deciding(),
            **self._timing(cid),
        )


@dataclass
class CandidateEvaluation:
    """One candidate on its way through :data:`STAGES`: what the stages share. Every
    threshold, limit and budget comes from ``snapshot``."""

    pipeline: Pipeline
    cid: int
    parent: Version
    tree: Path
    patch: str
    snapshot: PolicySnapshot
    subject: Subject = field(init=False)
    held: HeldoutRun | None = None
    # The fixed blocks (EvalReport.fixed_lines) of the candidate's and the parent's dev runs:
    # what every later run of each is judged with.
    fixed: frozenset[str] = frozenset()
    parent_fixed: frozenset[str] = frozenset()
    dev: tuple[EvalReport, EvalReport] | None = None  # (parent, candidate) on dev

    def __post_init__(self) -> None:
        self.subject = Subject(self.tree, f"c{self.cid}", candidate_id=self.cid, version_id=None)

    @property
    def policy(self) -> Policy:
        return self.snapshot.policy

    @property
    def rt(self) -> Runtime:
        return self.pipeline.rt

    @property
    def primary(self) -> str:
        return self.policy.models.primary

    def _held(self) -> HeldoutRun:
        assert self.held is not None, "a stage after the held-out test ran before it"
        return self.held

    async def smoke(self) -> StageResult:
        """One dev task: a harness that crashes, breaks the protocol or overruns goes no
        further."""
        if not self.policy.pipeline.smoke:
            return StageResult()
        await self.pipeline.stage(self.cid, Stage.SMOKE)
        splits = await self.rt.load_splits(policy=self.policy)
        smoke = await evaluate(
            self.rt,
            self.subject,
            split=Split.SMOKE,
            task_ids=splits.dev[:1],
            model=self.primary,
            keep_transcripts=True,
            policy=self.policy,
        )
        failed = [t for t in smoke.tasks if t.error in SMOKE_FAILURES]
        if failed:
            return StageResult(refusal=f"smoke task {failed[0].id}: {failed[0].detail}")
        return StageResult()

    async def dev_screen(self) -> StageResult:
        """The dev split against the parent's: a cheap screen before any held-out task."""
        await self.pipeline.stage(self.cid, Stage.DEV)
        parent_dev = await self.pipeline.baseline(
            self.parent, Split.DEV, self.primary, policy=self.policy
        )
        splits = await self.rt.load_splits(policy=self.policy)
        dev = await evaluate(
            self.rt,
            self.subject,
            split=Split.DEV,
            task_ids=splits.dev,
            model=self.primary,
            keep_transcripts=True,
            policy=self.policy,
        )
        self.fixed = frozenset(dev.fixed_lines)
        self.parent_fixed = frozenset(parent_dev.fixed_lines)
        screen = dev_screen_gate(
            dev.accuracy, parent_dev.accuracy, self.policy.pipeline.dev_max_regression
        )
        self.dev = (parent_dev, dev)
        return StageResult([screen])

    async def dev_change(self) -> StageResult:
        """Whether the candidate did anything differently from its parent on dev: a no-op
        (the same outputs, claims, errors and model calls on every dev task, tokens within
        noise) takes no held-out slot, so it spends none of the lineage's alpha."""
        cfg = self.policy.pipeline
        parent_dev, dev = self.dev or (None, None)
        if parent_dev is None or dev is None:
            return StageResult()
        changed = changed_tasks(parent_dev, dev, cfg.dev_token_noise)
        gate = GateResult(
            gate=Gate.DEV_CHANGE,
            enabled=cfg.require_dev_change,
            passed=bool(changed) or not cfg.require_dev_change,
            measured=float(len(changed)),
            threshold=1.0,
            test="dev tasks on which the candidate behaves differently from its parent",
            note=(
                f"different on {len(changed)} of {len(dev.tasks)} dev tasks"
                + (f" ({', '.join(changed[:5])})" if changed else "")
                + ("" if cfg.require_dev_change else "; [pipeline] require_dev_change = false")
            ),
        )
        if gate.failed:
            return StageResult([gate], refusal=NO_CHANGE)
        return StageResult([gate])

    async def heldout_test(self) -> StageResult:
        """The sequential test on the candidate's held-out block, at its share of alpha."""
        await self.pipeline.stage(self.cid, Stage.HELDOUT)
        slot = await anyio.to_thread.run_sync(claim_slot, self.rt, self.cid, self.policy)
        if isinstance(slot, str):
            await self.rt.emit("heldout.refused", f"candidate c{self.cid}: {slot}", level="warning")
            return StageResult(refusal=slot)
        await self._announce(slot)

        sides = await self._sides(slot)
        self.pipeline.activity(
            f"candidate c{self.cid}: held-out test (epoch {slot.test.epoch} candidate "
            f"{slot.test.position}, alpha {slot.test.alpha:.3g}), {self.parent.name} beside it "
            f"on the same tasks ({len(sides.parent_known)} of {len(slot.block)} known)"
        )
        self.held = await run_heldout(slot, sides, self.policy)
        gates = acceptance_gates(self.held.decision, slot.settings.alpha, self.policy.gates)
        return StageResult(gates)

    async def _sides(self, slot: HeldoutSlot) -> Sides:
        """The parent's cached results on the block, the candidate's from an earlier attempt
        of this test, and how to run either on more of it."""
        rt, policy, model, parent = self.rt, self.policy, self.primary, self.parent

        def keys() -> tuple[str, str, dict[str, TaskResult], list[EvalReport]]:
            conditions = run_conditions(
                policy=policy,
                image=rt.image,
                suite=rt.suite(policy=policy),
                task_ids=slot.block,
                model=model,
                tree_hash=parent.tree_hash,
            ) | {"split": Split.HELDOUT}
            mine = conditions_key(conditions | {"tree": f"candidate {self.cid}"})
            theirs = conditions_key(conditions)
            return (
                theirs,
                mine,
                results.parent_tasks(rt.store, parent.id, theirs),
                results.candidate_runs(rt.store, self.cid, mine),
            )

        theirs, mine, known, earlier = await anyio.to_thread.run_sync(keys)
        parent_subject = self.pipeline.version_subject(parent)

        def side(subject: Subject, key: str, fixed: frozenset[str]) -> RunSide:
            async def run(ids: list[str], stop: StopWhen, order: TaskOrder) -> EvalReport:
                return await evaluate(
                    rt,
                    subject,
                    split=Split.HELDOUT,
                    task_ids=ids,
                    model=model,
                    stop_when=stop,
                    conditions=key,
                    policy=policy,
                    order=order,
                    fixed=fixed,
                )

            return run

        return Sides(
            parent_known=known,
            candidate_earlier=earlier,
            run_parent=side(parent_subject, theirs, self.parent_fixed),
            run_candidate=side(self.subject, mine, self.fixed),
            capacity=rt.executor.capacity(policy.sandbox.concurrency),
        )

    async def point_gates(self) -> StageResult:
        """The gates measured on the same held-out run: token cap, dead code, provenance."""
        held, cfg = self._held(), self.policy.gates
        sources = await anyio.to_thread.run_sync(read_sources, self.tree)
        dead = dead_added(self.patch, sources, held.report.coverage.executed)
        mine, theirs = held.report.by_id(), held.parent
        suite = await self.rt.load_suite(policy=self.policy)
        return StageResult(
            [
                tokens_gate(
                    [theirs[t] for t in held.fed],
                    [mine[t] for t in held.fed],
                    cfg,
                    held.decision,
                ),
                dead_code_gate(dead.fraction, dead.added_executable, dead.dead, cfg),
                provenance_gate([mine[t] for t in held.fed], cfg),
                generated_gate(held.outcomes, generated_ids(suite), cfg),
            ]
        )

    async def decoy(self) -> StageResult:
        """The wins re-run against a decoy model, and the test decided again without those
        that survive."""
        cfg = self.policy.gates
        if not cfg.decoy.enabled:
            return StageResult([decoy_gate(0, 0, None, cfg)])
        await self.pipeline.stage(self.cid, Stage.HELDOUT)
        self.pipeline.activity(f"candidate c{self.cid}: decoy re-run of its held-out wins")
        check = await decoy_check(self.rt, self.subject, self._held(), self.primary, self.policy)
        return StageResult([decoy_gate(check.wins, len(check.survivors), check.after, cfg)])

    async def compute_matched(self) -> StageResult:
        """More tokens than the parent must beat the parent's vote at the same tokens."""
        parent = self.pipeline.version_subject(self.parent)
        gate = await compute_matched_gate(
            self.rt, parent, self._held(), self.primary, self.policy, self.parent_fixed
        )
        return StageResult([gate])

    async def live_replay(self) -> StageResult:
        """Parent and candidate on recorded live requests: nothing the harness wrote itself
        in what it serves (when the policy asks)."""
        cfg = self.policy.gates.live
        if not cfg.enabled:
            return StageResult()
        recorded = await anyio.to_thread.run_sync(self.rt.recorded_requests, cfg.requests)
        seed = self.policy.suite.split_seed or self.rt.split_secret
        made = probes(seed, f"c{self.cid}", cfg.probes)
        tasks = [*recorded, *made]
        if tasks:
            self.pipeline.activity(
                f"candidate c{self.cid}: replaying {len(recorded)} recorded live requests "
                f"and {len(made)} made in their shape"
            )
        parent = self.pipeline.version_subject(self.parent)
        replayed = await replay(
            self.rt,
            parent,
            self.subject,
            tasks,
            policy=self.policy,
            label=f"replay-c{self.cid}",
            fixed=(self.parent_fixed, self.fixed),
        )
        return StageResult([live_gate(replayed, cfg, recorded=len(recorded))])

    async def security(self) -> StageResult:
        """The same held-out injection tasks, parent and candidate (when the policy asks)."""
        cfg = self.policy.gates.security
        if not cfg.enabled:
            return StageResult()
        self.pipeline.activity(f"candidate c{self.cid}: security gate on held-out injection tasks")
        spec = cfg.injection_suite(self.policy.suite.name)
        parent_report = await self.pipeline.baseline(
            self.parent, Split.HELDOUT, self.primary, suite_spec=spec, policy=self.policy
        )
        report = await evaluate(
            self.rt,
            self.subject,
            split=Split.HELDOUT,
            task_ids=await self.pipeline.split_ids(Split.HELDOUT, spec, self.policy),
            model=self.primary,
            suite_spec=spec,
            policy=self.policy,
        )
        return StageResult([security_gate(parent_report, report, cfg)])

    async def panel(self) -> StageResult:
        """The same held-out tasks on every other panel model: no model may regress much."""
        held, policy = self._held(), self.policy
        others = [m for m in policy.models.all() if m != self.primary]
        pairs: dict[str, tuple[EvalReport, EvalReport]] = {}
        if others and policy.gates.panel.enabled:
            await self.pipeline.stage(self.cid, Stage.PANEL)
            for model in others:
                parent_m = await self.pipeline.baseline(
                    self.parent,
                    Split.HELDOUT,
                    model,
                    held.fed,
                    policy=policy,
                    fixed=self.parent_fixed,
                )
                cand_m = await evaluate(
                    self.rt,
                    self.subject,
                    split=Split.HELDOUT,
                    task_ids=held.fed,
                    model=model,
                    policy=policy,
                    fixed=self.fixed,
                )
                pairs[model] = (parent_m, cand_m)
        return StageResult(
            [panel_gate(pairs, policy.gates)], reached=Stage.PANEL if pairs else Stage.HELDOUT
        )

    async def _announce(self, slot: HeldoutSlot) -> None:
        t = slot.test
        block = "reused block" if t.reused_block else "fresh block"
        again = " resumed after an outage (its slot kept)" if slot.resumed else ""
        await self.rt.emit(
            "heldout.resumed" if slot.resumed else "heldout.started",
            f"candidate c{self.cid}: held-out test{again}, epoch {t.epoch} candidate {t.position}, "
            f"alpha {t.alpha:.3g} of the lineage's {slot.settings.alpha:g}, {block} "
            f"{t.block_index} ({len(slot.block)} tasks)",
            candidate=self.cid,
            epoch=t.epoch,
            position=t.position,
            alpha=t.alpha,
        )
        if slot.changed:
            await self.rt.emit(
                "heldout.pinned",
                "the lineage's acceptance settings were pinned at its first held-out test; "
                f"these policy edits do not apply to it: {'; '.join(slot.changed)}",
                level="warning",
            )


def _none(policy: Policy) -> tuple[Gate, ...]:
    return ()


@dataclass(frozen=True)
class Screened:
    """A candidate that passed the stages before the held-out test, waiting to take a slot:
    its evaluation so far (tree, dev reports, fixed blocks) and the gates it passed."""

    run: CandidateEvaluation
    gates: list[GateResult]

    @property
    def cid(self) -> int:
        return self.run.cid

    def evidence(self) -> tuple[float, float, float]:
        """How good its dev results look, larger is better: dev accuracy over the parent's,
        then fewer tokens a task, then a smaller gap between claimed and verified success.
        Dev data only (the proposer sees it anyway), so choosing by it says nothing of a
        held-out test."""
        assert self.run.dev is not None, "screened without a dev run"
        parent, dev = self.run.dev
        return (
            round(dev.accuracy - parent.accuracy, 6),
            -dev.tokens_per_task,
            -max(0.0, dev.verification_gap),
        )

    def summary(self) -> str:
        assert self.run.dev is not None, "screened without a dev run"
        parent, dev = self.run.dev
        return (
            f"c{self.cid}: dev {dev.accuracy:.0%} vs parent {parent.accuracy:.0%}, "
            f"{dev.tokens_per_task:.0f} tokens/task"
        )


def best_screened(screened: list[Screened]) -> Screened:
    """The candidate that takes the held-out slot: the best dev evidence, the earliest
    proposed on a tie."""
    return max(sorted(screened, key=lambda s: s.cid), key=lambda s: s.evidence())


async def _remove_tree(tree: Path) -> None:
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(tree.parent, ignore_errors=True))


STAGES: tuple[PipelineStage[CandidateEvaluation], ...] = (
    PipelineStage("smoke", Stage.SMOKE, _none, CandidateEvaluation.smoke),
    PipelineStage(
        "dev screen", Stage.DEV, lambda p: (Gate.DEV_SCREEN,), CandidateEvaluation.dev_screen
    ),
    PipelineStage(
        "dev change", Stage.DEV, lambda p: (Gate.DEV_CHANGE,), CandidateEvaluation.dev_change
    ),
    PipelineStage(
        "held-out test",
        Stage.HELDOUT,
        lambda p: (Gate.ACCURACY, Gate.IMPROVEMENT, Gate.HONESTY),
        CandidateEvaluation.heldout_test,
        # The point gates are measured on the same run, so they are reported either way.
        continues_after_failure=True,
    ),
    PipelineStage(
        "point gates",
        Stage.HELDOUT,
        lambda p: (Gate.TOKENS, Gate.DEAD_CODE, Gate.PROVENANCE, Gate.GENERATED),
        CandidateEvaluation.point_gates,
    ),
    PipelineStage(
        "decoy",
        Stage.HELDOUT,
        lambda p: (Gate.DECOY,),
        CandidateEvaluation.decoy,
        # A failed decoy re-run still lets compute-matched be measured and reported.
        continues_after_failure=True,
    ),
    PipelineStage(
        "compute-matched",
        Stage.HELDOUT,
        lambda p: (Gate.COMPUTE_MATCHED,),
        CandidateEvaluation.compute_matched,
    ),
    PipelineStage(
        "security",
        Stage.HELDOUT,
        lambda p: (Gate.SECURITY,) if p.gates.security.enabled else (),
        CandidateEvaluation.security,
    ),
    PipelineStage(
        "live replay",
        Stage.HELDOUT,
        lambda p: (Gate.LIVE,) if p.gates.live.enabled else (),
        CandidateEvaluation.live_replay,
    ),
    PipelineStage("panel", Stage.PANEL, lambda p: (Gate.PANEL,), CandidateEvaluation.panel),
)
"""The stages in the order they run; a verdict lists their gates in this order."""

_HELDOUT_TEST = next(i for i, s in enumerate(STAGES) if s.stage is Stage.HELDOUT)
BEFORE_HELDOUT = STAGES[:_HELDOUT_TEST]
"""The stages before the held-out test: what a candidate must pass to take a held-out slot."""

FROM_HELDOUT: frozenset[Stage] = frozenset(
    {*(s.stage for s in STAGES[_HELDOUT_TEST:]), Stage.DONE, Stage.REVIEW, Stage.PROMOTED}
)
"""The stages of a candidate that got to the held-out test: those of :data:`STAGES` from it
on, and what follows a verdict there (done, review, promoted)."""
