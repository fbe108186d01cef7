"""Run one harness version on a list of tasks with one model, in sandboxes -> EvalReport.

Each task runs in its own fresh container behind its own gateway socket; up to the
policy's ``[sandbox] concurrency`` at once. The verifier judges each output on the host (or,
for code, in a separate fresh container). Token counts come from the ledger, i.e. from the
providers' usage. ``stop_when`` lets the candidate pipeline stop as soon as a sequential
test has decided (it sees the results completed so far, by task id, so it can feed them in
dispatch order); the tasks still in flight are cancelled and their containers removed.

A dependency that goes away mid-evaluation (the Docker engine, the model) ends the whole
evaluation with :class:`~daemon.errors.Unavailable`, never with results: a task whose
model calls failed because the provider was down, or that crashed as the engine went, says
nothing about the harness. The evaluation is recorded as interrupted.

Every model exchange of a task is kept in memory for the task's provenance check (did the
output come from the model?). With ``decoys``, each listed task runs against a decoy instead:
the same model answering another task's question (:mod:`daemon.evaluation.decoy`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from daemon.config.policy import Policy
from daemon.errors import HarnessdError, first_outage, leaves
from daemon.evaluation import results as results_table
from daemon.evaluation.coverage import coverage_summary, merge_coverage, read_sources
from daemon.evaluation.decoy import replacements
from daemon.evaluation.executor import Executor
from daemon.evaluation.health import engine_watch, require_engine
from daemon.evaluation.pairing import Lane, TaskOrder
from daemon.evaluation.provenance import (
    EnvironmentText,
    Exchange,
    first_lines,
    fixed_lines,
    provenance,
)
from daemon.evaluation.report import (
    CoverageReport,
    EvalReport,
    Split,
    TaskResult,
    build_report,
    truncate_output,
)
from daemon.evaluation.runtime import Runtime
from daemon.evaluation.solve_handler import SolveHandler
from daemon.evaluation.taskrun import TaskRun
from daemon.gateway import ledger
from daemon.gateway.ledger import Charge
from daemon.providers.base import Purpose
from daemon.suites.base import CheckResult, Suite, ToolSuite
from daemon.tasks import Task

log = logging.getLogger("harnessd.evaluator")

DETAIL_LIMIT = 600
UNTRUSTED_COVERAGE = ("tamper", "protocol")


@dataclass(frozen=True)
class Subject:
    """What is being evaluated: an accepted version or a candidate tree."""

    harness_dir: Path
    label: str
    version_id: int | None = None
    version: str | None = None
    candidate_id: int | None = None


@dataclass
class Origins:
    """What a run's fixed block is found in (each task's first request, the harness's part),
    and the solves to judge again once it is known: the unsupported ones of a run that finds
    its own (:func:`evaluate` without ``fixed``), every one of a run handed one
    (``all_solves``: a line of the dev run's block that this run's tasks did not all get is
    no longer the harness's design)."""

    first: list[frozenset[str]] = field(default_factory=list)
    pending: dict[str, tuple[Task, Any, list[Exchange], list[EnvironmentText]]] = field(
        default_factory=dict
    )
    all_solves: bool = False


def blind(task: Task, run_id: str) -> Task:
    """The task as the container sees it, under an opaque id.

    Suite ids can give answers away (BFCL's ``irrelevance_12`` means "make no call"), and a
    stable id would let a harness memorise answers across runs; the host keeps the mapping.
    """
    token = hashlib.sha256(f"{run_id}:{task.id}".encode()).hexdigest()[:16]
    return task.model_copy(update={"id": f"task-{token}"})


def _detail(run: TaskRun) -> str:
    if run.error is None:
        return ""
    parts = [f"ended with {run.error}"]
    if run.submission is not None and run.submission.error:
        parts.append(run.submission.error)
    if run.outcome.exit_code not in (None, 0):
        parts.append(f"exit code {run.outcome.exit_code}")
    tail = run.outcome.output.strip()[-300:]
    if tail:
        parts.append(f"output tail: {tail}")
    return "; ".join(parts)[:DETAIL_LIMIT]


async def wait_for_window(rt: Runtime) -> None:
    """Hold the next task while the daemon-wide hour/day budget is spent; say so once."""
    announced = False
    while True:
        state = await anyio.to_thread.run_sync(rt.guard.window_state)
        spent = [w for w in state.exhausted if w.scope in ("hour", "day")]
        if not spent:
            if announced:
                await rt.emit("budget.resumed", "token budget window reopened; resuming")
            return
        reopen = max((w.reopens_at or time.time() + 60) for w in spent)
        if not announced:
            scopes = ", ".join(f"{w.scope} ({w.spent}/{w.limit})" for w in spent)
            when = time.strftime("%H:%M:%S", time.localtime(reopen))
            await rt.emit(
                "budget.paused",
                f"token budget spent: {scopes}; waiting until {when}",
                level="warning",
                reopens_at=reopen,
            )
            announced = True
        await anyio.sleep(min(60.0, max(1.0, reopen - time.time())))


async def run_one(
    rt: Runtime,
    subject: Subject,
    suite: Suite | None,
    task: Task,
    model: str,
    run_id: str,
    *,
    policy: Policy,
    purpose: Purpose = "solve",
    keep_transcript: bool = False,
    executor: Executor | None = None,
    decoy: Task | None = None,
    exchanges: list[Exchange] | None = None,
    fixed: frozenset[str] = frozenset(),
    origins: Origins | None = None,
) -> tuple[TaskResult, TaskRun]:
    """Solve and verify one task; harness failures come back as results, not exceptions.

    With ``suite`` None (a free-text question) there is nothing to verify: ``passed`` is
    False and the caller should not report it. ``executor``: where the unit runs (default:
    this machine); the verdict is computed here either way. With ``decoy``, the model answers
    the decoy task's question instead (the harness is not told). ``policy``: the one
    the run is held to (its sandbox limits, for the task's container and a code check
    alike).
    ``exchanges``: filled with the run's model exchanges as they happen (the live endpoint
    answers with the model's last reply when a harness chose no call). ``fixed``: the
    harness's fixed block for the provenance check; ``origins`` collects what finding one
    over a run needs.
    """
    limits = rt.limits(policy)
    charge = Charge(
        model=model,
        purpose=purpose,
        run_id=run_id,
        task_id=task.id,
        candidate_id=subject.candidate_id,
        version_id=subject.version_id,
    )
    tool_suite = suite if isinstance(suite, ToolSuite) else None
    # The task's tool environment lives here, beside the handler that serves the run's
    # gateway, whichever executor runs the container: a remote unit reaches this daemon's
    # gateway and nothing else, so its tool calls and turn ends come here too, and the
    # environment's ground truth never leaves the daemon.
    async with (
        engine_watch(rt.engine),
        tool_suite.episode(task.id) if tool_suite is not None else nullcontext() as episode,
    ):
        handler = SolveHandler(
            await rt.model(model),
            charge,
            replacements(task, decoy) if decoy is not None else None,
            episode,
        )
        if exchanges is not None:
            handler.exchanges = exchanges
        run = await (executor or rt.local).run(
            image=rt.image,
            harness_dir=subject.harness_dir,
            task=blind(task, run_id),
            handler=handler,
            limits=limits,
            labels=rt.labels(subject=subject.label),
        )
        if handler.outage is not None:
            raise handler.outage
        check: CheckResult | None = None
        if episode is not None:
            # Judged on what happened in the environment, even after a bad end (an
            # injection may have succeeded before the crash); a bad end never passes.
            output = run.submission.output if run.submission is not None else None
            check = await episode.check(output, completed=run.error is None)
        passed, detail = False, _detail(run)
        if check is None and suite is not None and run.error is None and run.submission is not None:
            check = await suite.check(task.id, run.submission.output, rt.code_checker(limits))
        if check is not None:
            passed = check.passed
            if run.error is None:
                detail = check.detail[:DETAIL_LIMIT]
        if run.error is not None or (suite is not None and not passed):
            # A container killed as the engine went down looks like a crash or a wrong
            # answer; it is neither if the engine is gone now.
            await require_engine(rt.engine)
    spent = await anyio.to_thread.run_sync(ledger.spent_by_task, rt.store, run_id, task.id)
    submission = run.submission
    output = submission.output if submission else None
    # Pure but not cheap (a long multi-step task is many requests to read): a worker thread.
    origin = await anyio.to_thread.run_sync(
        provenance, task, output, handler.exchanges, handler.environment, fixed
    )
    if origins is not None:
        if handler.exchanges:  # a task that never asked the model tells nothing apart
            origins.first.append(first_lines(task, handler.exchanges))
        if passed and (origins.all_solves or origin.supported is False):
            origins.pending[task.id] = (
                task,
                output,
                list(handler.exchanges),
                list(handler.environment),
            )
    result = TaskResult(
        id=task.id,
        passed=passed,
        claimed_success=bool(submission and submission.claimed_success),
        confidence=submission.confidence if submission else None,
        output=truncate_output(submission.output) if submission else None,
        tokens=spent.total,
        prompt_tokens=spent.prompt_tokens,
        completion_tokens=spent.completion_tokens,
        model_calls=spent.calls,
        wall_s=round(run.wall_s, 3),
        error=run.error,
        detail=detail,
        supported=origin.supported if submission is not None else None,
        provenance=origin.detail,
        attack_succeeded=check.attack_succeeded if check is not None else None,
        transcript=run.gateway.transcript if keep_transcript else [],
        requeues=run.requeues,
    )
    return result, run


async def evaluate(
    rt: Runtime,
    subject: Subject,
    *,
    split: Split,
    task_ids: list[str],
    model: str,
    suite_spec: str | None = None,
    stop_when: Callable[[Mapping[str, TaskResult]], bool] | None = None,
    keep_transcripts: bool = False,
    on_result: Callable[[TaskResult, int, int], None] | None = None,
    decoys: Mapping[str, str] | None = None,
    conditions: str | None = None,
    policy: Policy,
    order: TaskOrder | None = None,
    fixed: frozenset[str] | None = None,
    suite: Suite | None = None,
) -> EvalReport:
    """Evaluate ``subject`` on ``task_ids``; stored in SQLite and returned.

    ``decoys``: task id -> the id of the task whose question the model answers instead.
    ``conditions``: the key of everything that changes the result (for baseline reuse).
    ``policy``: the policy the whole evaluation runs under (its suite, sandbox limits,
    concurrency, and per-task and per-evaluation token budgets), whatever the live policy
    becomes meanwhile: a candidate's snapshot, or the policy a caller outside a candidate
    read once. ``order``: a front
    shared with other evaluations (:mod:`daemon.evaluation.pairing`), which then decides when
    each task starts instead of this evaluation's own concurrency limit. An evaluation that
    ends early (stopped, an outage, a stop of the daemon) keeps what completed: its row says
    ``stopped`` or ``interrupted`` and holds the partial report. ``fixed``: the harness's
    fixed block (the lines every task's first request carried, from its dev run:
    ``EvalReport.fixed_lines``); None: found over this run's own tasks, and its solves judged
    again with it at the end (a run that ``stop_when`` reads as it goes needs one given, or
    its solves are judged without one). ``suite``: the tasks themselves, made by the caller
    (a replication's fresh copies); by default ``suite_spec``'s or the policy's.
    """
    if suite is None:
        suite = await rt.load_suite(suite_spec, policy=policy)
    run_id = f"ev-{uuid.uuid4().hex[:12]}"
    total = len(task_ids)
    started = time.time()
    await anyio.to_thread.run_sync(
        functools.partial(
            results_table.record_start,
            rt.store,
            run_id,
            version_id=subject.version_id,
            candidate_id=subject.candidate_id,
            suite=suite.name,
            split=split,
            model=model,
            conditions=conditions,
        )
    )
    results: dict[str, TaskResult] = {}
    coverages: list[dict[str, list[int]]] = []
    limiter = anyio.CapacityLimiter(rt.executor.capacity(policy.sandbox.concurrency))
    label = f"{subject.label} {split} {model}"

    lane: Lane | None = None
    # A block handed down from the dev run is held to this run too: a line is the harness's
    # design only if every task judged here got it (lines sent to every dev task and then
    # one task's own line to each judged task would otherwise launder per-task hints). The
    # block narrows as tasks finish, for the tasks that start later, and every solve is
    # judged again with the run's final block at the end.
    origins = (
        Origins(all_solves=fixed is not None) if fixed is not None or stop_when is None else None
    )
    known = fixed or frozenset()

    async def one(task_id: str, scope: anyio.CancelScope) -> None:
        nonlocal known
        async with limiter if lane is None else lane.admit(task_id):
            if scope.cancel_called:
                return
            await wait_for_window(rt)
            decoy = suite.task(decoys[task_id]) if decoys and task_id in decoys else None
            result, run = await run_one(
                rt,
                subject,
                suite,
                suite.task(task_id),
                model,
                run_id,
                keep_transcript=keep_transcripts,
                executor=rt.executor,
                decoy=decoy,
                policy=policy,
                fixed=known,
                origins=origins,
            )
        results[task_id] = result
        if fixed is not None and origins is not None and origins.first:
            known = fixed.intersection(*origins.first)
        # A run that tampered or broke the protocol may have forged what it reports: its
        # coverage does not count (what it added then shows as never run).
        if run.submission is not None and run.error not in UNTRUSTED_COVERAGE:
            coverages.append(run.submission.coverage)
        rt.progress[run_id] = {"label": label, "done": len(results), "total": total}
        if on_result is not None:
            on_result(result, len(results), total)
        await rt.emit(
            "eval.progress",
            f"{label}: {len(results)}/{total}",
            persist=False,
            run_id=run_id,
            label=label,
            done=len(results),
            total=total,
        )
        if stop_when is not None and stop_when(results):
            scope.cancel()

    rt.progress[run_id] = {"label": label, "done": 0, "total": total}
    try:
        with rt.run_budget(run_id, policy.budget):
            async with anyio.create_task_group() as tg:
                if order is not None:
                    lane = order.join(tg.cancel_scope, task_ids)
                for task_id in task_ids:
                    tg.start_soon(one, task_id, tg.cancel_scope)
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            # What completed before the interruption is kept: a held-out test that an
            # outage cut short resumes from it (every result here met no outage: a task
            # that did raised it instead of returning).
            partial = build_report(
                run_id=run_id,
                suite=suite.name,
                split=split,
                model=model,
                tasks=[results[t] for t in task_ids if t in results],
                coverage=CoverageReport(
                    executed={k: sorted(v) for k, v in sorted(merge_coverage(coverages).items())}
                ),
                version=subject.version,
                candidate_id=subject.candidate_id,
                planned=total,
                started=started,
                finished=time.time(),
            )
            await anyio.to_thread.run_sync(
                results_table.record_end, rt.store, run_id, "interrupted", partial
            )
        single = _one_error(exc, label)
        if single is not exc:
            raise single from None
        raise
    finally:
        rt.progress.pop(run_id, None)
    if origins is not None:
        if fixed is None:
            known = fixed_lines(origins.first)
        # (With a block handed down, ``known`` has narrowed with every finished task.)
        for task_id, (task, output, exchanges, heard) in origins.pending.items():
            origin = await anyio.to_thread.run_sync(
                provenance, task, output, exchanges, heard, known
            )
            if origin.supported != results[task_id].supported:
                results[task_id] = results[task_id].model_copy(
                    update={"supported": origin.supported, "provenance": origin.detail}
                )
    ordered = [results[t] for t in task_ids if t in results]
    executed = merge_coverage(coverages)
    sources = await anyio.to_thread.run_sync(read_sources, subject.harness_dir)
    summary = await anyio.to_thread.run_sync(coverage_summary, sources, executed)
    coverage = CoverageReport(
        executed_fraction=summary.executed_fraction,
        never_executed=summary.never_executed,
        executed={k: sorted(v) for k, v in sorted(executed.items())},
    )
    report = build_report(
        run_id=run_id,
        suite=suite.name,
        split=split,
        model=model,
        tasks=ordered,
        coverage=coverage,
        version=subject.version,
        candidate_id=subject.candidate_id,
        planned=total,
        started=started,
        finished=time.time(),
        fixed_lines=sorted(known),
    )
    state = "stopped" if report.stopped_early else "done"
    await anyio.to_thread.run_sync(results_table.record_end, rt.store, run_id, state, report)
    return report


def _one_error(exc: BaseException, label: str) -> BaseException:
    """What the evaluation's task group raised, as one error where one explains it.

    Several tasks fail at once when a dependency goes (each meets the outage), and the
    group would hide that from every caller: the outage is raised alone. Otherwise the
    first deliberate harnessd error. The errors not raised are logged, never dropped.
    """
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    found = list(leaves(exc))
    chosen: BaseException | None = first_outage(exc)
    if chosen is None:
        chosen = next((e for e in found if isinstance(e, HarnessdError)), None)
    if chosen is None:
        return exc
    for other in found:
        if other is not chosen and not isinstance(other, type(chosen)):
            log.warning("%s: also failed: %r", label, other, exc_info=other)
    return chosen
