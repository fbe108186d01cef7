"""The improvement loop: propose, record, evaluate, decide; again, within the budgets.

Each cycle takes an external patch if one is queued (``harnessctl propose``), otherwise asks
the proposer model for one. Both go through the same stages. The loop waits while paused,
while the policy disables it, while a daemon-wide token window (hour, day, proposer) is
spent, and while a dependency is down (:mod:`daemon.evaluation.health`), and says so in
the event log each time it starts or stops waiting.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskStatus

from daemon.errors import BudgetExceeded, ProviderError, SandboxError, Unavailable, first_outage
from daemon.evaluation.coverage import read_sources
from daemon.evaluation.health import describe
from daemon.evaluation.runtime import Runtime
from daemon.gateway import ledger
from daemon.gateway.ledger import Charge
from daemon.improve import candidates
from daemon.improve.pipeline import Pipeline
from daemon.improve.proposer import FailedTask, build_prompt, proposal_request, structured_to_text
from daemon.lineage import Lineage, Version
from daemon.verdict import Verdict

log = logging.getLogger("harnessd.loop")

# How many times a candidate interrupted by outages is evaluated again before it is left
# interrupted (an outage is not the candidate's fault, but a flapping engine must not
# keep one candidate forever).
MAX_REEVALUATIONS = 5


@dataclass
class LoopControl:
    """Shared with the control API: pause flag, external queue, what the loop is doing."""

    paused: bool = False
    activity: str = ""
    cycles: int = 0
    # External candidates that passed the static stage, waiting for the pipeline.
    queue: list[int] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)

    def poke(self) -> None:
        self.wake.set()
        self.wake = anyio.Event()

    def set_activity(self, text: str) -> None:
        self.activity = text


class ImprovementLoop:
    def __init__(self, rt: Runtime, lineage: Lineage, control: LoopControl) -> None:
        self.rt = rt
        self.lineage = lineage
        self.control = control
        self.pipeline = Pipeline(rt, lineage, control.set_activity)

    async def _sleep_or_poke(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self.control.wake.wait()

    def _why_waiting(self, external: bool) -> str | None:
        policy = self.rt.policy.get()
        if self.control.paused:
            return "paused (harnessctl resume)"
        if not external:
            if not policy.loop.enabled:
                return "disabled by the policy ([loop] enabled = false)"
            if policy.loop.max_cycles and self.control.cycles >= policy.loop.max_cycles:
                return f"done: {policy.loop.max_cycles} cycles ([loop] max_cycles)"
        state = self.rt.guard.window_state()
        scopes = ("hour", "day") if external else ("hour", "day", "proposer")
        spent = [w for w in state.exhausted if w.scope in scopes]
        if spent:
            reopen = max(w.reopens_at or time.time() for w in spent)
            names = ", ".join(f"{w.scope} {w.spent}/{w.limit}" for w in spent)
            return (
                f"token budget spent ({names}); resumes at "
                f"{time.strftime('%H:%M:%S', time.localtime(reopen))}"
            )
        return None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        waiting_for: str | None = None
        while True:
            external = bool(self.control.queue)
            why = await anyio.to_thread.run_sync(self._why_waiting, external)
            if why is not None:
                if why != waiting_for:
                    await self.rt.emit(
                        "budget.paused" if why.startswith("token budget") else "loop.waiting",
                        f"improvement loop waiting: {why}",
                    )
                    waiting_for = why
                self.control.set_activity(f"waiting: {why}")
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
        proposal is asked for again, and an interrupted candidate is evaluated again from
        a clean start, up to ``MAX_REEVALUATIONS`` times; after that it stays interrupted.
        """
        cid = self.control.queue.pop(0) if self.control.queue else None
        try:
            if cid is None:
                cid = await self._proposal()
            if cid is None:
                return None
            return await self._evaluate(cid)
        except SandboxError as exc:
            await self.rt.emit("loop.error", f"sandbox unavailable: {exc}", level="error")
            await anyio.sleep(10)
        except ProviderError as exc:
            await self.rt.emit("loop.error", f"model provider failed: {exc}", level="error")
        finally:
            self.control.set_activity("")
        return None

    async def _proposal(self) -> int | None:
        """A proposed candidate's id (None if the proposal went nowhere). Each attempt
        counts as a cycle, except one an outage cut short: that one is asked again."""
        while True:
            try:
                cid = await self._propose()
            except BaseException as exc:
                outage = first_outage(exc)
                if outage is None:
                    self.control.cycles += 1
                    raise
            else:
                self.control.cycles += 1
                return cid
            await self._wait_out(outage, "asking for a patch again")

    async def _evaluate(self, cid: int) -> Verdict | None:
        for attempt in range(1, MAX_REEVALUATIONS + 2):
            if attempt > 1:
                await self.rt.emit(
                    "candidate.resumed",
                    f"candidate c{cid}: evaluating again from a clean start (attempt {attempt})",
                    candidate=cid, attempt=attempt,
                )  # fmt: skip
            try:
                return await self.pipeline.run(cid)
            except BaseException as exc:
                outage = first_outage(exc)
                if outage is None:
                    raise
            await self._wait_out(outage, f"candidate c{cid} is evaluated again")
        await self.rt.emit(
            "candidate.abandoned",
            f"candidate c{cid} stays interrupted: outages interrupted its evaluation "
            f"{MAX_REEVALUATIONS + 1} times",
            level="warning", candidate=cid,
        )  # fmt: skip
        return None

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
        text: str,
        *,
        source: str,
        model: str | None,
        rationale: str = "",
        run_id: str = "",
    ) -> candidates.Submitted:
        policy = self.rt.policy.get()

        def record() -> candidates.Submitted:
            return candidates.record(
                self.lineage, parent, text, source=source, proposer_model=model,
                policy=policy.patch, work_dir=self.rt.work_dir, rationale=rationale,
            )  # fmt: skip

        sub = await anyio.to_thread.run_sync(record)
        if run_id:
            await anyio.to_thread.run_sync(
                ledger.attribute_run, self.rt.store, run_id, sub.candidate_id
            )
        if not sub.accepted_for_evaluation:
            await self.rt.emit(
                "candidate.rejected",
                f"candidate c{sub.candidate_id} ({source}) rejected at static: {sub.reason}",
                candidate=sub.candidate_id, stage="static",
            )  # fmt: skip
            return sub
        await self.rt.emit(
            "candidate.proposed",
            f"candidate c{sub.candidate_id} ({source}) passed the static stage",
            candidate=sub.candidate_id,
        )  # fmt: skip
        return sub

    async def submit_external(self, text: str, rationale: str) -> candidates.Submitted:
        """Record a person's (or another agent's) patch against the live version; if it
        passes the static stage it joins the queue, ahead of the next proposal."""
        parent = await anyio.to_thread.run_sync(self.lineage.current)
        sub = await self._record(parent, text, source="external", model=None, rationale=rationale)
        if sub.accepted_for_evaluation:
            self.control.queue.append(sub.candidate_id)
            self.control.poke()
        return sub

    async def _propose(self) -> int | None:
        policy = self.rt.policy.get()
        parent = await anyio.to_thread.run_sync(self.lineage.current)
        dev = await self.pipeline.baseline(parent, "dev", policy.models.primary)
        suite = self.rt.suite()
        failures = [
            FailedTask(t, suite.task(t.id).prompt, suite.expected(t.id))
            for t in dev.tasks
            if not t.passed
        ][: policy.proposer.failures_shown]
        verdicts = await anyio.to_thread.run_sync(
            self._recent_verdicts, policy.proposer.verdicts_shown
        )
        sources = await anyio.to_thread.run_sync(read_sources, self.lineage.path(parent))
        model_ref = policy.proposer.model
        model = self.rt.model(model_ref)
        request = proposal_request(
            build_prompt(sources, dev, failures, verdicts),
            max_tokens=policy.proposer.max_tokens,
            temperature=policy.proposer.temperature,
            structured_files=list(sources) if model.capabilities.structured_edits else None,
        )
        run_id = f"prop-{uuid.uuid4().hex[:12]}"
        self.control.set_activity(f"asking {model_ref} for a patch to {parent.name}")
        charge = Charge(model=model_ref, purpose="propose", run_id=run_id, version_id=parent.id)
        try:
            reply = await model.chat(request, charge)
        except BudgetExceeded as exc:
            await self.rt.emit("budget.paused", f"proposer refused: {exc}", level="warning")
            return None
        text = reply.content or ""
        if request.response_schema is not None:
            text = structured_to_text(text)
        sub = await self._record(parent, text, source="proposer", model=model_ref, run_id=run_id)
        return sub.candidate_id if sub.accepted_for_evaluation else None

    def _recent_verdicts(self, limit: int) -> list[str]:
        lines = []
        for cand in self.lineage.candidates(limit=limit):
            if cand.verdict is None:
                continue
            line = cand.verdict.line()
            lines.append(f"c{cand.id} ({cand.rationale[:80]!r}): {line}")
        return lines
