"""Candidate pipeline, stages 2-6: smoke, dev, held-out (sequential), panel, verdict.

Cheapest first, stopping at the first failure. The parent's reports on the same task lists
are computed once per (version, split, model) and reused, so every candidate is compared
with its parent on exactly the same tasks. Held-out reports never leave this module except
as the verdict's per-gate figures.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio

from daemon.errors import LineageError
from daemon.evaluation import results
from daemon.evaluation.coverage import dead_added, read_sources
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.health import interruption
from daemon.evaluation.report import EvalReport, TaskResult
from daemon.evaluation.runtime import Runtime
from daemon.improve import candidates
from daemon.improve.gates import decide, heldout_gates, panel_gate, sequential_state
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

    async def baseline(self, version: Version, split: str, model: str) -> EvalReport:
        """The version's full report on ``split`` with ``model``, computed at most once."""
        splits = self.rt.splits()
        ids = splits.dev if split == "dev" else splits.heldout
        cached = await anyio.to_thread.run_sync(
            results.cached_baseline,
            self.rt.store,
            version.id,
            self.rt.suite().name,
            split,
            model,
            ids,
        )
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
            self.rt, subject, split=split, task_ids=ids, model=model,
            keep_transcripts=split == "dev",
        )  # fmt: skip
        await self.rt.emit(
            "baseline.done",
            f"{version.name} {split} {model}: accuracy {report.accuracy:.1%}, "
            f"gap {report.verification_gap:+.1%}, {report.tokens_per_task:.0f} tokens/task",
            version=version.name, split=split, model=model,
        )  # fmt: skip
        return report

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
            candidates.materialise, self.lineage, candidate_id, self.rt.work_dir
        )
        try:
            verdict = await self._evaluate(candidate_id, parent, tree, cand.patch)
            await self._conclude(candidate_id, tree, verdict)
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
            cand = self.lineage.candidate(cid)
            if cand.state != "evaluating":
                return None
            self.lineage.set_candidate(cid, "interrupted", cand.stage)
            return cand.stage

        stage = await anyio.to_thread.run_sync(mark)
        if stage is not None:
            await self.rt.emit(
                "candidate.interrupted", f"candidate c{cid} interrupted at {stage}: {reason}",
                candidate=cid, stage=stage, reason=reason,
            )  # fmt: skip

    async def _evaluate(self, cid: int, parent: Version, tree: Path, patch: str) -> Verdict:
        policy = self.rt.policy.get()
        primary = policy.models.primary
        splits = self.rt.splits()
        subject = Subject(tree, f"c{cid}", candidate_id=cid, version_id=None)

        if policy.pipeline.smoke:
            await self._stage(cid, "smoke")
            smoke = await evaluate(
                self.rt, subject, split="smoke", task_ids=splits.dev[:1], model=primary,
                keep_transcripts=True,
            )  # fmt: skip
            failed = [t for t in smoke.tasks if t.error in SMOKE_FAILURES]
            if failed:
                return decide("smoke", [], reason=f"smoke task {failed[0].id}: {failed[0].detail}")

        await self._stage(cid, "dev")
        parent_dev = await self.baseline(parent, "dev", primary)
        dev = await evaluate(
            self.rt, subject, split="dev", task_ids=splits.dev, model=primary,
            keep_transcripts=True,
        )  # fmt: skip
        slack = policy.pipeline.dev_max_regression
        screen = GateResult(
            gate="dev_screen",
            passed=dev.accuracy >= parent_dev.accuracy - slack,
            measured=round(dev.accuracy - parent_dev.accuracy, 4),
            threshold=-slack,
            note=f"dev accuracy {dev.accuracy:.1%} vs parent {parent_dev.accuracy:.1%}",
        )
        if not screen.passed:
            return decide("dev", [screen])

        await self._stage(cid, "heldout")
        parent_held = await self.baseline(parent, "heldout", primary)
        alpha = policy.gates.accuracy.alpha
        sequential = policy.gates.accuracy.enabled

        def decided(results: list[TaskResult]) -> bool:
            if not sequential:
                return False
            partial = _partial(parent_held, results)
            return sequential_state(parent_held, partial, alpha).decision() != "undecided"

        held = await evaluate(
            self.rt, subject, split="heldout", task_ids=splits.heldout, model=primary,
            stop_when=decided,
        )  # fmt: skip
        sources = await anyio.to_thread.run_sync(read_sources, tree)
        dead = dead_added(patch, sources, held.coverage.executed)
        gates = heldout_gates(
            parent_held, held, (dead.fraction, dead.added_executable, dead.dead), policy.gates
        )
        gates.insert(0, screen)
        if any(g.enabled and not g.passed for g in gates):
            gates.append(GateResult(gate="panel", passed=True, skipped=True, note="not reached"))
            return decide("heldout", gates)

        others = [m for m in policy.models.all() if m != primary]
        pairs: dict[str, tuple[EvalReport, EvalReport]] = {}
        if others and policy.gates.panel.enabled:
            await self._stage(cid, "panel")
            for model in others:
                parent_m = await self.baseline(parent, "heldout", model)
                cand_m = await evaluate(
                    self.rt, subject, split="heldout", task_ids=splits.heldout, model=model
                )
                pairs[model] = (parent_m, cand_m)
        gates.append(panel_gate(pairs, policy.gates))
        return decide("panel" if pairs else "heldout", gates)

    async def _conclude(self, cid: int, tree: Path, verdict: Verdict) -> None:
        if verdict.decision == "accept":
            try:
                version = await anyio.to_thread.run_sync(self.lineage.promote, cid, tree, verdict)
            except LineageError as exc:
                # E.g. a rollback made another version live while this one was evaluated.
                verdict = decide("done", verdict.gates, reason=f"not promoted: {exc}")
                return await self._conclude(cid, tree, verdict)
            await self.rt.emit(
                "version.promoted",
                f"candidate c{cid} accepted: {version.name} is live ({verdict.reason})",
                candidate=cid, version=version.name, gates=verdict.deciding(),
            )  # fmt: skip
            return
        await anyio.to_thread.run_sync(
            lambda: self.lineage.set_candidate(cid, "rejected", verdict.stage, verdict)
        )
        await self.rt.emit(
            "candidate.rejected",
            f"candidate c{cid} rejected at {verdict.stage}: {verdict.reason}",
            candidate=cid, stage=verdict.stage, failed=verdict.failed, gates=verdict.deciding(),
        )  # fmt: skip


def _partial(parent: EvalReport, results: list[TaskResult]) -> EvalReport:
    """A stand-in report holding just the finished tasks, for the sequential test."""
    return parent.model_copy(update={"tasks": list(results), "n": len(results)})
