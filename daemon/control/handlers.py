"""The daemon's side of every control verb: what ``harnessctl`` can ask of a running daemon.

Each handler is registered against the verb table (:mod:`daemon.control.verbs`) with
``@HANDLERS.on("<verb>")``; importing this module fails if a verb of the table has none. A
handler gets its request's arguments already checked against the verb's declaration (the
server refuses the rest with ``bad_args``), does its work off the event loop where it
touches disk or git, and returns plain JSON-able data. A refusal of what was asked is a
``ControlError`` with a code from the closed set; every other ``HarnessdError`` a handler
raises gets its code from :mod:`daemon.control.error_codes` (in the server); anything else
is a bug and becomes ``internal``.

The verbs are given exactly the parts of the daemon they use (:class:`VerbDeps`), never the
daemon itself, so this module depends on components and nothing depends back on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from daemon.config.policy import parse_policy
from daemon.config.reload import PolicyHolder
from daemon.control.protocol import ControlError, ErrorCode
from daemon.control.registry import Handlers
from daemon.control.verbs import VERBS, unknown
from daemon.errors import ConfigError
from daemon.evaluation import results
from daemon.evaluation.report import EvalReport
from daemon.events import EventBus
from daemon.gateway.budget import WindowState
from daemon.improve import replication
from daemon.improve.intake import Submitted, check_text
from daemon.improve.loop import LoopControl
from daemon.improve.power_report import power_table
from daemon.improve.review import Awaiting, ReviewDesk
from daemon.lineage import Candidate, CandidateState, Lineage, Version
from daemon.live import private_suites
from daemon.live.harness import LiveHarness
from daemon.patches import AppliedPatch
from daemon.store import Store
from daemon.suites import heldout_evidence

TEXT_LIMIT = 20_000


@dataclass
class VerbDeps:
    """What the verbs may touch, handed over by the service once everything is running."""

    bus: EventBus
    store: Store
    lineage: Lineage
    policy: PolicyHolder
    control: LoopControl
    live: LiveHarness
    # The improvement loop's intake for a person's patch (``harnessctl propose``).
    submit: Callable[[str, str], Awaitable[Submitted]]
    # The review step's decisions (``harnessctl review`` / ``approve`` / ``reject``).
    reviews: ReviewDesk
    # Evaluations under way, outages, model calls in flight (for ``status``), and the
    # daemon-wide token windows.
    progress: Callable[[], list[dict[str, Any]]]
    outages: Callable[[], list[dict[str, Any]]]
    calls: Callable[[], dict[str, dict[str, int]]]
    windows: Callable[[], WindowState]
    work_dir: Path
    suites_dir: Path  # the labelled suites (daemon.live.private_suites)
    basics: Callable[[], dict[str, Any]]
    stop: anyio.Event


def _version_json(v: Version) -> dict[str, Any]:
    return {
        "name": v.name,
        "id": v.id,
        "parent_id": v.parent_id,
        "candidate_id": v.candidate_id,
        "created": v.created,
        "git_commit": v.git_commit,
        "message": v.message,
    }


def _base(candidate_id: int | None) -> str | None:
    """A candidate's tree parent as shown: the candidate it was built on (None: its version)."""
    return None if candidate_id is None else f"c{candidate_id}"


def _candidate_id(args: dict[str, Any]) -> int:
    """``ref``: a candidate as ``c12`` (or ``12``)."""
    ref = str(args["ref"]).strip().lower()
    digits = ref[1:] if ref.startswith("c") else ref
    if not digits.isdigit():
        raise ControlError(
            ErrorCode.BAD_ARGS,
            f"'{ref}' is not a candidate: give it as c12 ('harnessctl review' lists them)",
        )
    return int(digits)


def _decision_json(c: Candidate) -> dict[str, Any]:
    """Who decided a candidate and why (the lineage's and show's fields)."""
    review = c.review
    return {
        "decided_by": c.decided_by.value if c.decided_by else None,
        "decision_reason": c.decision_reason,
        "review": None
        if review is None
        else {
            "held": review.held,
            "decided": review.decided,
            "reviewer": review.reviewer,
            "reason": review.reason,
        },
    }


def _awaiting_json(a: Awaiting) -> dict[str, Any]:
    c, t = a.candidate, a.test
    return {
        "id": c.id,
        "parent": a.parent,
        "live": a.live,
        "approvable": a.approvable,
        "source": c.source,
        "proposer_model": c.proposer_model,
        "rationale": c.rationale,
        "held": c.review.held if c.review else None,
        "patch": c.patch,
        "verdict": c.verdict.model_dump() if c.verdict else None,
        "test": None
        if t is None
        else {"epoch": t.epoch, "position": t.position, "alpha": t.alpha, "state": t.state},
    }


def _replication_json(r: replication.Replication | None) -> dict[str, Any] | None:
    """A promotion's replication beside its test (None: none recorded)."""
    return None if r is None else r.to_json() | {"line": replication.line(r)}


def _score(r: EvalReport) -> dict[str, Any]:
    return {
        "model": r.model,
        "split": r.split,
        "n": r.n,
        "accuracy": r.accuracy,
        "accuracy_ci95": r.accuracy_ci95,
        "verification_gap": r.verification_gap,
        "tokens_per_solved": None if r.tokens_per_solved is None else round(r.tokens_per_solved),
    }


HANDLERS = Handlers(VERBS)


class ControlApi:
    def __init__(self, deps: VerbDeps) -> None:
        self.d = deps

    def subscribe(self) -> AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[Any]]:
        return self.d.bus.subscribe()

    async def call(self, verb: str, args: dict[str, Any]) -> Any:
        """Answer a request whose arguments the server checked against the verb's table."""
        if verb not in HANDLERS:
            raise unknown(verb)
        return await HANDLERS[verb](self, args)

    # ---- status and events ---------------------------------------------------------------

    def _scores(self, version: Version) -> list[dict[str, Any]]:
        reports = results.latest_version_reports(self.d.store, version.id)
        return sorted((_score(r) for r in reports), key=lambda s: (s["model"], s["split"]))

    def _status(self) -> dict[str, Any]:
        version = self.d.lineage.current()
        since = self.d.lineage.history()[-1].ts
        windows = self.d.windows().windows
        return {
            "paused": self.d.control.paused,
            "activity": self.d.control.activity,
            "progress": self.d.progress(),
            "outages": self.d.outages(),
            "model_calls": self.d.calls(),
            "cycles": self.d.control.cycles,
            "queued": list(self.d.control.queue),
            # What is evaluated now and what waits, in order (people's patches first).
            "evaluating": self.d.control.current,
            "queue": [
                {"candidate": c, "position": i, "source": self._source(c)}
                for i, c in enumerate(self.d.control.waiting(), start=1)
            ],
            # Screened on dev, not chosen yet: each waits for a later cycle's choice.
            "dev_reserve": list(self.d.control.reserve),
            "awaiting_review": [
                c.id
                for c in reversed(self.d.lineage.candidates(state=CandidateState.AWAITING_REVIEW))
            ],
            # The latest promotion's replication on fresh tasks (a check, never a gate).
            "replication": _replication_json(replication.latest(self.d.store)),
            "live": {
                "version": version.name,
                "since": since,
                "scores": self._scores(version),
                "in_flight": self.d.live.in_flight,
                "served": self.d.live.served,
            },
            "budgets": [
                {
                    "scope": w.scope,
                    "spent": w.spent,
                    "limit": w.limit,
                    "left": max(0, w.limit - w.spent),
                    "reopens_at": w.reopens_at,
                }
                for w in windows
            ],
        }

    @HANDLERS.on("status")
    async def status(self, args: dict[str, Any]) -> Any:
        status = await anyio.to_thread.run_sync(self._status)
        status.update(self.d.basics())
        return status

    @HANDLERS.on("events")
    async def events(self, args: dict[str, Any]) -> Any:
        limit = args["limit"]
        return await anyio.to_thread.run_sync(lambda: self.d.bus.recent(min(limit, 1000)))

    # ---- the live harness ----------------------------------------------------------------

    @HANDLERS.on("ask")
    async def ask(self, args: dict[str, Any]) -> Any:
        text = args["text"]
        if not text.strip() or len(text) > TEXT_LIMIT:
            raise ControlError(ErrorCode.BAD_ARGS, f"'text' must be 1 to {TEXT_LIMIT} characters")
        return await self.d.live.ask(text)

    @HANDLERS.on("run")
    async def run(self, args: dict[str, Any]) -> Any:
        return await self.d.live.run(args["task"])

    @HANDLERS.on("label")
    async def label(self, args: dict[str, Any]) -> Any:
        result = await anyio.to_thread.run_sync(
            lambda: private_suites.label(
                self.d.store,
                self.d.suites_dir,
                request_id=args["request"],
                suite=args["suite"],
                expected=args["expected"],
                check=args["check"],
                task_id=args["id"],
            )
        )
        await self.d.bus.emit(
            "suite.labelled",
            f"request {args['request']} is task {result['task']} of suite {result['suite']}",
            **result,
        )
        return result

    @HANDLERS.on("suite_export")
    async def suite_export(self, args: dict[str, Any]) -> Any:
        name = args["suite"]
        return await anyio.to_thread.run_sync(private_suites.export, self.d.suites_dir, name)

    # ---- lineage -------------------------------------------------------------------------

    def _lineage(self, limit: int) -> dict[str, Any]:
        tree = self.d.lineage.tree()
        versions = [
            _version_json(e.version) | {"depth": e.depth, "candidates": e.candidates} for e in tree
        ]
        cands = [
            {
                "id": c.id,
                "parent": self._name(c.parent_version_id),
                "base": _base(c.base_candidate_id),
                "state": c.state,
                "stage": c.stage,
                "source": c.source,
                "rationale": c.rationale,
                "decision": c.verdict.decision if c.verdict else None,
                "reason": c.verdict.reason if c.verdict else "",
                # 0: under evaluation; 1: next; None: not waiting.
                "queue_position": self.d.control.position(c.id),
                # Still "evaluating" at dev while it waits in the dev reserve.
                "in_dev_reserve": c.id in self.d.control.reserve,
            }
            | _decision_json(c)
            for c in self.d.lineage.candidates(limit=limit)
        ]
        return {
            "current": self.d.lineage.current().name,
            "versions": versions,
            "candidates": cands,
            "history": [
                {"ts": h.ts, "version": h.version_name, "reason": h.summary}
                for h in self.d.lineage.history()
            ],
        }

    def _source(self, cid: int) -> str:
        return str(self.d.lineage.candidate(cid).source)

    def _name(self, version_id: int) -> str:
        return self.d.lineage.get(version_id).name

    @HANDLERS.on("lineage")
    async def lineage(self, args: dict[str, Any]) -> Any:
        limit = args["candidates"]
        return await anyio.to_thread.run_sync(self._lineage, min(limit, 500))

    def _reports(self, **subject: int) -> list[dict[str, Any]]:
        return [
            {"run_id": r.run_id, "split": r.split, "model": r.model, "state": r.state}
            | ({"summary": r.report.summary()} if r.report else {})
            for r in results.runs_of(self.d.store, **subject)
        ]

    def _show(self, ref: str) -> dict[str, Any]:
        if ref.startswith("c") and ref[1:].isdigit():
            c = self.d.lineage.candidate(int(ref[1:]))
            return {
                "kind": "candidate",
                "name": f"c{c.id}",
                "state": c.state,
                "stage": c.stage,
                "parent": self._name(c.parent_version_id),
                "base": _base(c.base_candidate_id),
                "source": c.source,
                "proposer_model": c.proposer_model,
                "rationale": c.rationale,
                "patch": c.patch,
                "raw": c.raw if not c.patch else None,
                "verdict": c.verdict.model_dump() if c.verdict else None,
                "reports": self._reports(candidate_id=c.id),
                "replication": _replication_json(replication.of(self.d.store, c.id)),
            } | _decision_json(c)
        v = self.d.lineage.get(ref)
        cand = self.d.lineage.candidate(v.candidate_id) if v.candidate_id else None
        return (
            _version_json(v)
            | {
                "kind": "version",
                "parent": self._name(v.parent_id) if v.parent_id else None,
                "rationale": cand.rationale if cand else None,
                "patch": cand.patch if cand else None,
                "verdict": cand.verdict.model_dump() if cand and cand.verdict else None,
                "reports": self._reports(version_id=v.id),
                "replication": _replication_json(replication.of_version(self.d.store, v.id)),
            }
            | (_decision_json(cand) if cand else {})
        )

    @HANDLERS.on("show")
    async def show(self, args: dict[str, Any]) -> Any:
        return await anyio.to_thread.run_sync(self._show, args["ref"])

    @HANDLERS.on("diff")
    async def diff(self, args: dict[str, Any]) -> Any:
        a, b = args["a"], args["b"]
        diff = await anyio.to_thread.run_sync(self.d.lineage.diff, a, b)
        return {"a": a, "b": b, "diff": diff}

    @HANDLERS.on("rollback")
    async def rollback(self, args: dict[str, Any]) -> Any:
        ref = args["ref"]
        reason = args["reason"]
        version = await anyio.to_thread.run_sync(self.d.lineage.rollback, ref, reason)
        await self.d.bus.emit(
            "version.rolled_back",
            f"rolled back: {version.name} is live ({reason})",
            version=version.name,
        )
        return {"live": version.name}

    # ---- review ([gates.review]) -----------------------------------------------------------

    def _review(self) -> dict[str, Any]:
        return {
            "enabled": self.d.policy.get().gates.review.enabled,
            "live": self.d.lineage.current().name,
            "awaiting": [_awaiting_json(a) for a in self.d.reviews.awaiting()],
        }

    @HANDLERS.on("review")
    async def review(self, args: dict[str, Any]) -> Any:
        return await anyio.to_thread.run_sync(self._review)

    @HANDLERS.on("approve")
    async def approve(self, args: dict[str, Any]) -> Any:
        cid = _candidate_id(args)
        reviewer = args["reviewer"]
        reason = args["reason"]
        version = await self.d.reviews.approve(cid, reviewer, reason)
        self.d.control.poke()  # the loop waited for this decision
        return {"candidate": cid, "live": version.name, "reviewer": reviewer.strip()}

    @HANDLERS.on("reject")
    async def reject(self, args: dict[str, Any]) -> Any:
        cid = _candidate_id(args)
        reviewer = args["reviewer"]
        reason = args["reason"]
        cand = await self.d.reviews.reject(cid, reviewer, reason)
        self.d.control.poke()
        review = cand.review
        return {
            "candidate": cid,
            "state": cand.state,
            "reviewer": review.reviewer if review else reviewer,
            "reason": review.reason if review else reason,
        }

    @HANDLERS.on("report")
    async def report(self, args: dict[str, Any]) -> Any:
        # The page is written by the daemon (same uid, peer checked) rather than sent back,
        # since a long lineage's report outgrows one control frame.
        out = Path(args["out"])
        if not out.is_absolute() or not out.parent.is_dir():
            raise ControlError(
                ErrorCode.BAD_ARGS, f"report --out {out}: give a file in an existing directory"
            )
        candidate = args["candidate"]
        from daemon.report.build import write_report  # loads matplotlib: only when asked

        summary = await anyio.to_thread.run_sync(write_report, self.d.store, out, candidate)
        return asdict(summary)

    # ---- the loop ------------------------------------------------------------------------

    @HANDLERS.on("pause")
    async def pause(self, args: dict[str, Any]) -> Any:
        if not self.d.control.paused:
            self.d.control.paused = True
            await self.d.bus.emit("loop.paused", "improvement loop paused by harnessctl")
        return {"paused": True}

    @HANDLERS.on("resume")
    async def resume(self, args: dict[str, Any]) -> Any:
        if self.d.control.paused:
            self.d.control.paused = False
            self.d.control.poke()
            await self.d.bus.emit("loop.resumed", "improvement loop resumed by harnessctl")
        return {"paused": False}

    @HANDLERS.on("propose")
    async def propose(self, args: dict[str, Any]) -> Any:
        text = args["text"]
        rationale = args["rationale"]
        if args["dry_run"]:
            live = await anyio.to_thread.run_sync(self.d.lineage.current)
            result = await anyio.to_thread.run_sync(
                check_text,
                text,
                self.d.lineage.path(live),
                self.d.policy.get().patch,
                self.d.work_dir,
            )
            if isinstance(result, AppliedPatch):
                return {
                    "dry_run": True,
                    "valid": True,
                    "against": live.name,
                    "diff": result.git_diff,
                }
            raise ControlError(ErrorCode.INVALID_PATCH, f"against {live.name}: {result.reason}")
        sub = await self.d.submit(text, rationale)
        if not sub.accepted_for_evaluation:
            raise ControlError(
                ErrorCode.INVALID_PATCH, f"candidate c{sub.candidate_id} rejected: {sub.reason}"
            )
        return {
            "candidate": sub.candidate_id,
            "queued": True,
            # 1: evaluated next (after the candidate under evaluation now, if any).
            "position": self.d.control.position(sub.candidate_id),
            "evaluating": self.d.control.current,
            "paused": self.d.control.paused,
            "diff": sub.git_diff,
        }

    # ---- policy and lifecycle ------------------------------------------------------------

    @HANDLERS.on("policy_show")
    async def policy_show(self, args: dict[str, Any]) -> Any:
        return {"path": str(self.d.policy.path), "policy": self.d.policy.get().model_dump()}

    @HANDLERS.on("policy_check")
    async def policy_check(self, args: dict[str, Any]) -> Any:
        name = args["name"]
        text = args["text"]
        try:
            policy = parse_policy(text, name)
        except ConfigError as exc:
            raise ControlError(ErrorCode.INVALID_POLICY, str(exc)) from None
        power = await anyio.to_thread.run_sync(power_table, policy)
        evidence = heldout_evidence(policy.suite)
        return {
            "name": name,
            "valid": True,
            "policy": policy.model_dump(),
            "heldout_evidence": evidence,
        } | power

    @HANDLERS.on("stop")
    async def stop(self, args: dict[str, Any]) -> Any:
        self.d.stop.set()
        return {"stopping": True, "pid": self.d.basics()["pid"]}


# Every verb of the table that replies has its handler, or the daemon does not start.
HANDLERS.complete()
