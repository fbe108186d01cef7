"""Replication of a promotion on unseen tasks: a check of the held-out test, never a gate.

After a promotion (automatic or approved), the promoted version and its parent are run on a
fresh draw of held-out tasks: the held-out pool remade as counterfactual copies from a seed
of its own (the installation's split secret, or the policy's ``split_seed``, with
``replication:c<id>``), the ids the test ran left out while enough others remain
(:func:`daemon.suites.replication_suite`). The gain on those pairs, with Newcombe's paired
interval (:mod:`daemon.acceptance.paired`), is shown beside the test's by ``status``,
``show`` and the report.

When: the loop runs pending replications at the start of its next cycle, before it asks for
a proposal; parent first, then the promoted version, on the primary model, through the
normal evaluation path (sandbox, metering, budgets, cancellation). An outage leaves the
replication pending (retried on the next cycle); another error marks it failed, with why.

It never changes a verdict, and the proposer never reads it: its runs are recorded under
:attr:`Split.REPLICATION`, which the briefing's reports (smoke and dev only) exclude.

Owns the ``replications`` table.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import anyio

from daemon.acceptance.paired import PairedDifference, paired_difference
from daemon.config.policy import Policy
from daemon.errors import BudgetExceeded, first_outage
from daemon.evaluation import results
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import EvalReport, Split, TaskResult
from daemon.evaluation.runtime import Runtime
from daemon.improve.heldout import counted
from daemon.lineage import Lineage, Version
from daemon.store import Store
from daemon.suites import replication_suite

log = logging.getLogger("harnessd.replication")

State = Literal["pending", "running", "done", "failed"]
# The splits whose tasks count as used by a held-out test (the test itself, and the decoy
# and compute-matched re-runs of its tasks).
TEST_SPLITS = (Split.HELDOUT, Split.DECOY, Split.MATCHED)


@dataclass(frozen=True)
class Figures:
    """A paired gain: ``n`` tasks, each side's solves, the discordant pairs, the gain in
    points and its 95 % interval."""

    n: int
    parent_solved: int
    candidate_solved: int
    wins: int
    losses: int
    gain: float
    low: float
    high: float

    @classmethod
    def of(cls, d: PairedDifference) -> Figures:
        return cls(
            n=d.n,
            parent_solved=d.both + d.losses,
            candidate_solved=d.both + d.wins,
            wins=d.wins,
            losses=d.losses,
            gain=round(100 * d.gain, 2),
            low=round(100 * d.low, 2),
            high=round(100 * d.high, 2),
        )

    def text(self) -> str:
        return f"{self.gain:+.1f} points [{self.low:+.1f}, {self.high:+.1f}] over {self.n} tasks"


@dataclass(frozen=True)
class Replication:
    """One row of the ``replications`` table."""

    candidate_id: int
    version_id: int
    parent_version_id: int
    state: State
    created: float
    task_ids: list[str]
    reused: list[str]  # ids the test had used, remade as new copies (too few others left)
    remade: bool  # fresh copies (False: a suite that cannot be remade; unused ids only)
    model: str | None
    result: Figures | None
    test: Figures | None  # the held-out test's paired gain, as measured at promotion
    started: float | None
    finished: float | None
    error: str

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["n"] = len(self.task_ids)
        return out


# ---- the table -------------------------------------------------------------------------


def _row(r: Any) -> Replication:
    return Replication(
        candidate_id=int(r["candidate_id"]),
        version_id=int(r["version_id"]),
        parent_version_id=int(r["parent_version_id"]),
        state=r["state"],
        created=float(r["created"]),
        task_ids=json.loads(r["task_ids"]),
        reused=json.loads(r["reused"]),
        remade=bool(r["remade"]),
        model=r["model"],
        result=None if r["n"] is None else Figures(*(r[f.name] for f in fields(Figures))),
        test=Figures(**json.loads(r["test"])) if r["test"] else None,
        started=r["started"],
        finished=r["finished"],
        error=r["error"],
    )


def schedule(
    store: Store, candidate_id: int, version_id: int, parent_version_id: int, test: Figures | None
) -> None:
    """A promotion's replication, pending (once per candidate: a repeat is ignored)."""
    store.run(
        lambda c: c.execute(
            "INSERT OR IGNORE INTO replications (candidate_id, version_id, parent_version_id, "
            "state, created, test) VALUES (?, ?, ?, 'pending', ?, ?)",
            (
                candidate_id,
                version_id,
                parent_version_id,
                time.time(),
                None if test is None else json.dumps(asdict(test)),
            ),
        )
    )


def of(store: Store, candidate_id: int) -> Replication | None:
    row = store.query_one("SELECT * FROM replications WHERE candidate_id = ?", (candidate_id,))
    return None if row is None else _row(row)


def of_version(store: Store, version_id: int) -> Replication | None:
    """The replication of the promotion that made ``version_id`` (None: none)."""
    row = store.query_one("SELECT * FROM replications WHERE version_id = ?", (version_id,))
    return None if row is None else _row(row)


def every(store: Store) -> list[Replication]:
    """Every replication, oldest first."""
    return [_row(r) for r in store.query("SELECT * FROM replications ORDER BY candidate_id")]


def latest(store: Store) -> Replication | None:
    row = store.query_one("SELECT * FROM replications ORDER BY candidate_id DESC LIMIT 1")
    return None if row is None else _row(row)


def waiting(store: Store) -> list[Replication]:
    """The replications still to run, oldest first: pending, and running ones a stop cut
    short (they start again from the beginning)."""
    rows = store.query(
        "SELECT * FROM replications WHERE state IN ('pending', 'running') ORDER BY candidate_id"
    )
    return [_row(r) for r in rows]


def mark_running(
    store: Store,
    candidate_id: int,
    task_ids: list[str],
    reused: list[str],
    remade: bool,
    model: str,
) -> None:
    store.run(
        lambda c: c.execute(
            "UPDATE replications SET state = 'running', task_ids = ?, reused = ?, remade = ?, "
            "model = ?, started = ?, finished = NULL, error = '' WHERE candidate_id = ?",
            (
                json.dumps(task_ids),
                json.dumps(reused),
                int(remade),
                model,
                time.time(),
                candidate_id,
            ),
        )
    )


def mark_done(store: Store, candidate_id: int, figures: Figures) -> None:
    store.run(
        lambda c: c.execute(
            "UPDATE replications SET state = 'done', n = ?, parent_solved = ?, "
            "candidate_solved = ?, wins = ?, losses = ?, gain = ?, low = ?, high = ?, "
            "finished = ?, error = '' WHERE candidate_id = ?",
            (
                figures.n,
                figures.parent_solved,
                figures.candidate_solved,
                figures.wins,
                figures.losses,
                figures.gain,
                figures.low,
                figures.high,
                time.time(),
                candidate_id,
            ),
        )
    )


def mark_failed(store: Store, candidate_id: int, error: str) -> None:
    store.run(
        lambda c: c.execute(
            "UPDATE replications SET state = 'failed', finished = ?, error = ? "
            "WHERE candidate_id = ?",
            (time.time(), error, candidate_id),
        )
    )


def mark_pending(store: Store, candidate_id: int, why: str) -> None:
    """Back to pending (an outage, a spent budget): retried on the next cycle."""
    store.run(
        lambda c: c.execute(
            "UPDATE replications SET state = 'pending', error = ? WHERE candidate_id = ?",
            (why, candidate_id),
        )
    )


# ---- the figures -------------------------------------------------------------------------


def paired(
    parent: Iterable[TaskResult], candidate: Iterable[TaskResult], policy: Policy
) -> Figures:
    """The candidate's gain over the parent on the tasks both ran, a solve counting as the
    held-out test counts it (verified and, with provenance on, supported by the model)."""
    theirs = {t.id: counted(t, policy) for t in parent}
    mine = {t.id: counted(t, policy) for t in candidate}
    both = wins = losses = neither = 0
    for task_id in theirs.keys() & mine.keys():
        p, c = theirs[task_id], mine[task_id]
        both += p and c
        wins += c and not p
        losses += p and not c
        neither += not p and not c
    return Figures.of(paired_difference(both, wins, losses, neither))


def _latest_by_id(reports: Iterable[EvalReport]) -> dict[str, TaskResult]:
    found: dict[str, TaskResult] = {}
    for report in reports:  # oldest first: a later run of a task replaces an earlier one
        found.update(report.by_id())
    return found


def heldout_figures(
    store: Store, candidate_id: int, parent_id: int, policy: Policy
) -> Figures | None:
    """The held-out test's paired gain: the candidate's held-out results against the
    parent's on the same tasks (None: the candidate ran no held-out task)."""
    mine = _latest_by_id(
        r.report
        for r in results.runs_of(store, candidate_id=candidate_id)
        if r.split == Split.HELDOUT and r.report is not None
    )
    theirs = _latest_by_id(
        r.report
        for r in results.runs_of(store, version_id=parent_id)
        if r.split == Split.HELDOUT and r.report is not None
    )
    shared = mine.keys() & theirs.keys()
    if not shared:
        return None
    return paired((theirs[t] for t in shared), (mine[t] for t in shared), policy)


def used_ids(store: Store, candidate_id: int) -> set[str]:
    """The held-out task ids the candidate's test (and its re-runs) ran."""
    return {
        t.id
        for r in results.runs_of(store, candidate_id=candidate_id)
        if r.split in TEST_SPLITS and r.report is not None
        for t in r.report.tasks
    }


def after_promotion(store: Store, candidate_id: int, version: Version, policy: Policy) -> bool:
    """Schedule the replication of the promotion of ``candidate_id`` to ``version`` when
    ``policy`` asks for it, with the test's own figures beside it (blocking)."""
    if not policy.replication.enabled or version.parent_id is None:
        return False
    test = heldout_figures(store, candidate_id, version.parent_id, policy)
    schedule(store, candidate_id, version.id, version.parent_id, test)
    return True


# ---- running them ------------------------------------------------------------------------


class Replicator:
    """Runs the pending replications, one after the other, on the evaluation path."""

    def __init__(
        self,
        rt: Runtime,
        lineage: Lineage,
        subject: Callable[[Version], Subject],
        activity: Callable[[str], None] = lambda s: None,
    ) -> None:
        self.rt = rt
        self.lineage = lineage
        self.subject = subject
        self.activity = activity

    async def run_pending(self) -> None:
        """Every pending replication, oldest first, under the policy in force now (read once
        per replication); none while ``[replication] enabled`` is off, a daemon-wide token
        window is spent or a dependency is down (they wait)."""
        while True:
            policy = self.rt.policy.get()
            if not policy.replication.enabled:
                return
            spent = [
                w for w in self.rt.guard.window_state().exhausted if w.scope in ("hour", "day")
            ]
            # Nor while a dependency is down: it would only fail again (and say so) until
            # the health monitor sees it back.
            if spent or self.rt.health.outages:
                return
            todo = await anyio.to_thread.run_sync(waiting, self.rt.store)
            if not todo:
                return
            if not await self.run_one(todo[0], policy):
                return  # left pending (an outage, a budget): the next cycle tries again

    async def run_one(self, row: Replication, policy: Policy) -> bool:
        """Run one replication; False if it was left pending to be tried again."""
        cid = row.candidate_id
        try:
            return await self._run(row, policy)
        except Exception as exc:
            outage = first_outage(exc)
            if outage is not None or isinstance(exc, BudgetExceeded):
                why = str(outage if outage is not None else exc)
                await self._leave(
                    cid, "pending", why, f"waits: {why}; it is tried again on the next cycle"
                )
                if outage is not None:
                    await self.rt.health.report(outage)
                return False
            log.exception("replication of c%d failed", cid)
            why = f"{type(exc).__name__}: {exc}"
            await self._leave(cid, "failed", why, f"failed: {why}")
            return True
        finally:
            self.activity("")

    async def _leave(self, cid: int, state: State, why: str, message: str) -> None:
        """Record that c``cid``'s replication is left ``state`` (pending: tried again next
        cycle; failed), and say so."""
        mark = mark_pending if state == "pending" else mark_failed
        await anyio.to_thread.run_sync(mark, self.rt.store, cid, why)
        await self.rt.emit(
            "replication.pending" if state == "pending" else "replication.failed",
            f"replication of c{cid} {message}",
            level="warning" if state == "pending" else "error",
            candidate=cid,
            error=why,
        )

    async def _run(self, row: Replication, policy: Policy) -> bool:
        cid, store, rt = row.candidate_id, self.rt.store, self.rt
        version = await anyio.to_thread.run_sync(self.lineage.get, row.version_id)
        parent = await anyio.to_thread.run_sync(self.lineage.get, row.parent_version_id)
        used = await anyio.to_thread.run_sync(used_ids, store, cid)
        p = policy.suite
        seed = p.split_seed or rt.split_secret
        size = policy.replication.tasks
        draw = await anyio.to_thread.run_sync(
            lambda: replication_suite(
                p, rt.loaded.cache_dir, seed, f"replication:c{cid}", used, size
            )
        )
        if not draw.task_ids:
            why = (
                "no held-out task is left that the test did not run, and the suite "
                f"'{p.heldout_suite or p.name}' cannot be remade as fresh copies"
            )
            await self._leave(cid, "failed", why, f"failed: {why}")
            return True
        model = policy.models.primary
        await anyio.to_thread.run_sync(
            mark_running, store, cid, draw.task_ids, draw.reused, draw.remade, model
        )
        how = "fresh copies" if draw.remade else "unused held-out tasks"
        reused = f", {len(draw.reused)} of them ids the test used" if draw.reused else ""
        await rt.emit(
            "replication.started",
            f"replicating c{cid}'s promotion: {parent.name} and {version.name} on "
            f"{len(draw.task_ids)} {how}{reused} with {model}",
            candidate=cid,
            version=version.name,
            parent=parent.name,
            n=len(draw.task_ids),
        )
        reports: list[EvalReport] = []
        for side in (parent, version):
            self.activity(f"replication of c{cid}: {side.name} on {len(draw.task_ids)} fresh tasks")
            reports.append(
                await evaluate(
                    rt,
                    self.subject(side),
                    split=Split.REPLICATION,
                    task_ids=draw.task_ids,
                    model=model,
                    policy=policy,
                    suite=draw.suite,
                )
            )
        figures = paired(reports[0].tasks, reports[1].tasks, policy)
        await anyio.to_thread.run_sync(mark_done, store, cid, figures)
        test = "" if row.test is None else f" (held-out test: {row.test.text()})"
        await rt.emit(
            "replication.done",
            f"c{cid} replicated: {version.name} over {parent.name} {figures.text()}{test}",
            candidate=cid,
            version=version.name,
            **asdict(figures),
        )
        return True


def line(r: Replication) -> str:
    """One line for people: the replicated gain beside the test's (status, show, report)."""
    test = f"held-out test {r.test.text()}" if r.test else "held-out test: no paired figures"
    if r.state == "done" and r.result is not None:
        return f"replicated {r.result.text()}; {test}"
    if r.state == "failed":
        return f"replication failed ({r.error}); {test}"
    if r.state == "running":
        return f"replication running on {len(r.task_ids)} tasks; {test}"
    waits = f" ({r.error})" if r.error else ""
    return f"replication pending{waits}; {test}"
