"""Candidate pipeline, stages 2-6: smoke, dev, held-out (sequential), panel, verdict.

Cheapest first, stopping at the first failure. The parent's reports are computed once per
set of conditions (:mod:`daemon.evaluation.conditions`) and reused, so every candidate is
compared with its parent on exactly the same tasks under exactly the same conditions.
The held-out stage (:mod:`daemon.improve.heldout`) is a sequential test at the candidate's
share of the lineage's alpha; a candidate it would promote must then pass the point gates
(token cap, dead code, provenance), the decoy re-run of its wins, the optional
compute-matched gate, the optional security gate (:mod:`daemon.improve.security`) and the
panel. Held-out results never leave this module except as the
verdict's per-gate figures, and the proposer reads of those only "promoted" or not.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio

from daemon.errors import LineageError
from daemon.evaluation import results
from daemon.evaluation.conditions import conditions_key, run_conditions
from daemon.evaluation.coverage import dead_added, read_sources
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.health import interruption
from daemon.evaluation.report import EvalReport
from daemon.evaluation.runtime import Runtime
from daemon.improve import alpha_ledger, intake
from daemon.improve.gates import (
    acceptance_gates,
    dead_code_gate,
    decide,
    decoy_gate,
    panel_gate,
    provenance_gate,
    tokens_gate,
)
from daemon.improve.heldout import HeldoutRun, Slot, claim_slot, record_end, run_heldout
from daemon.improve.matched import compute_matched_gate
from daemon.improve.modelfree import decoy_check
from daemon.improve.security import security_gate
from daemon.lineage import Lineage, Version
from daemon.verdict import GateResult, Verdict

log = logging.getLogger("harnessd.pipeline")

SMOKE_FAILURES = ("crash", "protocol", "timeout", "oom", "output_limit")


class Pipeline:
    def __init__(
        self, rt: Runtime, lineage: Lineage, activity: Callable[[str], None] = lambda s: None
    ) -> None:
        self.rt = rt
        self.lineage = lineage
        self.activity = activity

    # ---- baselines -----------------------------------------------------------------------

    async def baseline(
        self,
        version: Version,
        split: str,
        model: str,
        task_ids: list[str] | None = None,
        *,
        suite_spec: str | None = None,
    ) -> EvalReport:
        """The version's full report on ``task_ids`` (default: the whole ``split``) with
        ``model``, computed at most once per set of conditions (``suite_spec``: another suite
        than the policy's, e.g. the security gate's)."""
        ids = task_ids if task_ids is not None else self._ids(split, suite_spec)

        def lookup() -> tuple[str, EvalReport | None]:
            conditions = run_conditions(
                policy=self.rt.policy.get(),
                image=self.rt.image,
                suite=self.rt.suite(suite_spec),
                task_ids=ids,
                model=model,
                tree_hash=version.tree_hash,
            )
            key = conditions_key(conditions | {"split": split})
            return key, results.cached_baseline(self.rt.store, version.id, key, ids)

        key, cached = await anyio.to_thread.run_sync(lookup)
        if cached is not None:
            return cached
        self.activity(f"baseline: {version.name} on {split} with {model}")
        await self.rt.emit(
            "baseline.started", f"measuring {version.name} on the {split} split with {model}"
        )
        subject = Subject(
            self.lineage.path(version), version.name, version_id=version.id, version=version.name
        )
        report = await evaluate(
            self.rt,
            subject,
            split=split,
            task_ids=ids,
            model=model,
            suite_spec=suite_spec,
            keep_transcripts=split == "dev",
            conditions=key,
        )
        await self.rt.emit(
            "baseline.done",
            f"{version.name} {split} {model}: accuracy {report.accuracy:.1%}, "
            f"gap {report.verification_gap:+.1%}, {report.tokens_per_task:.0f} tokens/task",
            version=version.name,
            split=split,
            model=model,
        )
        return report

    def _ids(self, split: str, suite_spec: str | None) -> list[str]:
        splits = self.rt.splits(suite_spec)
        if suite_spec is not None:  # the security gate's injection tasks
            return splits.heldout[: self.rt.policy.get().gates.security.tasks]
        return splits.dev if split == "dev" else splits.heldout

    async def _security(self, parent: Version, subject: Subject) -> GateResult:
        """The ``security`` gate: the same held-out injection tasks, parent and candidate."""
        policy = self.rt.policy.get()
        cfg = policy.gates.security
        spec = cfg.injection_suite(policy.suite.name)
        primary = policy.models.primary
        parent_report = await self.baseline(parent, "heldout", primary, suite_spec=spec)
        report = await evaluate(
            self.rt,
            subject,
            split="heldout",
            task_ids=self._ids("heldout", spec),
            model=primary,
            suite_spec=spec,
        )
        return security_gate(parent_report, report, cfg)

    # ---- the stages ----------------------------------------------------------------------

    async def _stage(self, cid: int, stage: str) -> None:
        await anyio.to_thread.run_sync(lambda: self.lineage.set_candidate(cid, "evaluating", stage))
        self.activity(f"candidate c{cid}: {stage}")
        await self.rt.emit(
            "candidate.stage", f"candidate c{cid}: {stage}", candidate=cid, stage=stage
        )

    async def run(self, candidate_id: int) -> Verdict:
        """Evaluate a recorded candidate; promote it if every gate passes."""
        cand = await anyio.to_thread.run_sync(self.lineage.candidate, candidate_id)
        parent = await anyio.to_thread.run_sync(self.lineage.get, cand.parent_version_id)
        tree = await anyio.to_thread.run_sync(
            intake.materialise, self.lineage, candidate_id, self.rt.work_dir
        )
        try:
            verdict, held = await self._evaluate(candidate_id, parent, tree, cand.patch)
            await self._conclude(candidate_id, tree, verdict, held)
            return verdict
        except BaseException as exc:
            # Stopped mid-evaluation (daemon stop, engine gone): say so now rather than
            # leaving it to the next start's reconcile. Nothing is concluded from it.
            with anyio.CancelScope(shield=True):
                await self._interrupted(candidate_id, interruption(exc))
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(
                    lambda: shutil.rmtree(tree.parent, ignore_errors=True)
                )
            self.activity("")

    async def _interrupted(self, cid: int, reason: str) -> None:
        def mark() -> str | None:
            # A held-out test cut short keeps its slot and counts as not promoted, unless
            # the promotion itself had committed (it does so before the ledger row).
            alpha_ledger.settle_running(
                self.rt.store, lambda c: self.lineage.candidate(c).state == "accepted"
            )
            cand = self.lineage.candidate(cid)
            if cand.state != "evaluating":
                return None
            self.lineage.set_candidate(cid, "interrupted", cand.stage)
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

    async def _evaluate(
        self, cid: int, parent: Version, tree: Path, patch: str
    ) -> tuple[Verdict, HeldoutRun | None]:
        policy = self.rt.policy.get()
        primary = policy.models.primary
        splits = self.rt.splits()
        subject = Subject(tree, f"c{cid}", candidate_id=cid, version_id=None)

        if policy.pipeline.smoke:
            await self._stage(cid, "smoke")
            smoke = await evaluate(
                self.rt,
                subject,
                split="smoke",
                task_ids=splits.dev[:1],
                model=primary,
                keep_transcripts=True,
            )
            failed = [t for t in smoke.tasks if t.error in SMOKE_FAILURES]
            if failed:
                why = f"smoke task {failed[0].id}: {failed[0].detail}"
                return decide("smoke", self._not_reached([]), reason=why), None

        await self._stage(cid, "dev")
        parent_dev = await self.baseline(parent, "dev", primary)
        dev = await evaluate(
            self.rt,
            subject,
            split="dev",
            task_ids=splits.dev,
            model=primary,
            keep_transcripts=True,
        )
        slack = policy.pipeline.dev_max_regression
        screen = GateResult(
            gate="dev_screen",
            passed=dev.accuracy >= parent_dev.accuracy - slack,
            measured=round(dev.accuracy - parent_dev.accuracy, 4),
            threshold=-slack,
            test="point estimate on the dev split",
            note=f"dev accuracy {dev.accuracy:.1%} vs parent {parent_dev.accuracy:.1%}",
        )
        if not screen.passed:
            return decide("dev", self._not_reached([screen])), None

        await self._stage(cid, "heldout")
        slot = await anyio.to_thread.run_sync(claim_slot, self.rt, cid)
        if isinstance(slot, str):
            await self.rt.emit("heldout.refused", f"candidate c{cid}: {slot}", level="warning")
            return decide("heldout", self._not_reached([screen]), reason=slot), None
        await self._announce(cid, slot)

        async def base(ids: list[str], model: str) -> EvalReport:
            return await self.baseline(parent, "heldout", model, ids)

        held = await run_heldout(self.rt, subject, slot, base, primary)
        gates = [screen, *await self._point_gates(held, tree, patch)]
        if any(g.enabled and not g.passed for g in gates):
            return decide("heldout", self._not_reached(gates)), held
        if policy.gates.decoy.enabled:
            await self._stage(cid, "heldout")
            self.activity(f"candidate c{cid}: decoy re-run of its held-out wins")
            check = await decoy_check(self.rt, subject, held, primary)
            gates.append(decoy_gate(check.wins, len(check.survivors), check.after, policy.gates))
        else:
            gates.append(decoy_gate(0, 0, None, policy.gates))
        parent_subject = Subject(
            self.lineage.path(parent), parent.name, version_id=parent.id, version=parent.name
        )
        gates.append(await compute_matched_gate(self.rt, parent_subject, held, primary))
        if policy.gates.security.enabled and not any(g.enabled and not g.passed for g in gates):
            self.activity(f"candidate c{cid}: security gate on held-out injection tasks")
            gates.append(await self._security(parent, subject))
        if any(g.enabled and not g.passed for g in gates):
            return decide("heldout", self._not_reached(gates)), held

        others = [m for m in policy.models.all() if m != primary]
        pairs: dict[str, tuple[EvalReport, EvalReport]] = {}
        if others and policy.gates.panel.enabled:
            await self._stage(cid, "panel")
            for model in others:
                parent_m = await self.baseline(parent, "heldout", model, slot.block)
                cand_m = await evaluate(
                    self.rt, subject, split="heldout", task_ids=held.fed, model=model
                )
                pairs[model] = (parent_m, cand_m)
        gates.append(panel_gate(pairs, policy.gates))
        return decide("panel" if pairs else "heldout", gates), held

    def _not_reached(self, gates: list[GateResult]) -> list[GateResult]:
        """``gates`` and a "not reached" line for each later gate, so every verdict lists
        the same gates (the security gate only where the policy enables it)."""
        names = {g.gate for g in gates}
        later = ["decoy", "compute_matched"]
        if self.rt.policy.get().gates.security.enabled:
            later.append("security")
        return gates + [
            GateResult(gate=n, passed=True, skipped=True, note="not reached")
            for n in [*later, "panel"]
            if n not in names
        ]

    async def _point_gates(self, held: HeldoutRun, tree: Path, patch: str) -> list[GateResult]:
        """The test's own three gates, then those measured on the same held-out run."""
        policy = self.rt.policy.get()
        sources = await anyio.to_thread.run_sync(read_sources, tree)
        dead = dead_added(patch, sources, held.report.coverage.executed)
        mine, theirs = held.report.by_id(), held.parent.by_id()
        return [
            *acceptance_gates(held.decision, held.slot.settings.alpha, policy.gates),
            tokens_gate(
                [theirs[t] for t in held.fed],
                [mine[t] for t in held.fed],
                policy.gates,
                held.decision,
            ),
            dead_code_gate(dead.fraction, dead.added_executable, dead.dead, policy.gates),
            provenance_gate([mine[t] for t in held.fed], policy.gates),
        ]

    async def _announce(self, cid: int, slot: Slot) -> None:
        t = slot.test
        block = "reused block" if t.reused_block else "fresh block"
        await self.rt.emit(
            "heldout.started",
            f"candidate c{cid}: held-out test, epoch {t.epoch} candidate {t.position}, alpha "
            f"{t.alpha:.3g} of the lineage's {slot.settings.alpha:g}, {block} {t.block_index} "
            f"({len(slot.block)} tasks)",
            candidate=cid,
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

    async def _conclude(
        self, cid: int, tree: Path, verdict: Verdict, held: HeldoutRun | None
    ) -> None:
        decision = None if held is None else held.decision.to_dict()
        if verdict.decision == "accept":
            try:
                version = await anyio.to_thread.run_sync(self.lineage.promote, cid, tree, verdict)
            except LineageError as exc:
                # E.g. a rollback made another version live while this one was evaluated.
                verdict = decide("done", verdict.gates, reason=f"not promoted: {exc}")
                return await self._conclude(cid, tree, verdict, held)
            if decision is not None:
                await record_end(self.rt, cid, True, decision)
            await self.rt.emit(
                "version.promoted",
                f"candidate c{cid} accepted: {version.name} is live ({verdict.reason})",
                candidate=cid,
                version=version.name,
                gates=verdict.deciding(),
            )
            return
        await anyio.to_thread.run_sync(
            lambda: self.lineage.set_candidate(cid, "rejected", verdict.stage, verdict)
        )
        if decision is not None:
            await record_end(self.rt, cid, False, decision)
        await self.rt.emit(
            "candidate.rejected",
            f"candidate c{cid} rejected at {verdict.stage}: {verdict.reason}",
            candidate=cid,
            stage=verdict.stage,
            failed=verdict.failed,
            gates=verdict.deciding(),
        )
