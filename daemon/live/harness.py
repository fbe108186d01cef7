"""The live harness: serve requests with the current version, swapping without dropping any.

Three doors lead here: ``harnessctl ask`` (a question), ``harnessctl run`` (a suite's
task) and the OpenAI-compatible endpoint (:mod:`daemon.endpoint`: a conversation with
tools, :meth:`LiveHarness.chat`). Each request reads the ``current`` pointer once, at its
start, from SQLite (where a promotion or rollback commits atomically), and runs on that
version's immutable directory to the end. New requests after a switch go to the new
version; requests in flight finish on the one they started on. Every request is recorded
with the version that served it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from daemon.config.policy import Policy
from daemon.errors import BadRequest, NotAccepting, Unavailable
from daemon.evaluation.evaluator import Subject, run_one
from daemon.evaluation.health import ENGINE
from daemon.evaluation.runtime import Runtime
from daemon.lineage import Lineage, Version
from daemon.live import requests
from daemon.providers.base import ChatResponse, Message
from daemon.suites.base import Suite
from daemon.tasks import Task


@dataclass(frozen=True)
class Served:
    """One request's answer: the row recorded for it (``answer``: what ``ask`` returns), the
    harness's whole output (the row keeps a preview) and the model's last reply, if any."""

    answer: dict[str, Any]
    output: Any
    last_reply: ChatResponse | None


@dataclass(frozen=True)
class Started:
    """A request has begun on a version: its ``requests`` row and the version's name."""

    request: int
    version: str


OnStart = Callable[[Started], None]
# Told of every request that ended: its kind (ask, run, chat), how it ended ("done";
# "error": the run failed or could not be made; "interrupted": its caller went away or
# harnessd stopped) and its wall seconds.
OnServed = Callable[[str, str, float], None]


class LiveHarness:
    def __init__(self, rt: Runtime, lineage: Lineage, on_served: OnServed | None = None) -> None:
        self.rt = rt
        self.lineage = lineage
        self.on_served = on_served
        self.accepting = True
        self.in_flight = 0
        self.served = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._limiter = anyio.CapacityLimiter(max(2, rt.policy.get().sandbox.concurrency))
        self._scopes: set[anyio.CancelScope] = set()  # one per request in flight

    def _start(self, kind: str, task: Task) -> tuple[int, Version]:
        version = self.lineage.current()
        return requests.start(self.rt.store, kind, version.id, task), version

    def _finish(self, request_id: int, state: str, answer: dict[str, Any]) -> None:
        requests.finish(self.rt.store, request_id, state, answer)

    async def serve(self, kind: str, task: Task, suite: Suite | None) -> dict[str, Any]:
        return (await self.serve_task(kind, task, suite)).answer

    async def serve_task(
        self, kind: str, task: Task, suite: Suite | None, on_start: OnStart | None = None
    ) -> Served:
        """Serve ``task`` on the version live now; cancelling the caller (a client that went
        away) cancels the run, its model calls charged what the provider counted.
        ``on_start`` is told the request and its version once the run has begun (a refusal
        before that raises without calling it)."""
        if not self.accepting:
            raise NotAccepting("harnessd is stopping; not taking requests")
        # The policy in force when the request arrives: its model and sandbox limits serve
        # the whole request, whatever a reload says meanwhile.
        policy = self.rt.policy.get()
        model = policy.models.primary
        self.rt.health.check((ENGINE, model))  # an outage: refuse now, with its reason
        self.in_flight += 1
        self._idle = anyio.Event() if self.in_flight == 1 else self._idle
        began, state = time.monotonic(), "interrupted"
        try:
            with anyio.CancelScope() as scope:
                self._scopes.add(scope)
                served = await self._serve(kind, task, suite, policy, on_start)
                state = "done" if served.answer.get("error") is None else "error"
                return served
            raise NotAccepting(
                "harnessd stopped before this request finished (it waits only briefly for "
                "requests in flight); send it again once harnessd is back"
            )
        except Unavailable as exc:
            state = "error"
            await self.rt.health.report(exc)
            raise
        except NotAccepting:  # cancelled by a stop: state stays "interrupted"
            raise
        except Exception:
            state = "error"
            raise
        finally:
            self._scopes.discard(scope)
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()
            if self.on_served is not None:
                self.on_served(kind, state, time.monotonic() - began)

    async def _serve(
        self, kind: str, task: Task, suite: Suite | None, policy: Policy, on_start: OnStart | None
    ) -> Served:
        # The version is read once, here: the whole run uses its tree, whatever is promoted
        # meanwhile.
        request_id, version = await anyio.to_thread.run_sync(self._start, kind, task)
        if on_start is not None:
            on_start(Started(request_id, version.name))
        subject = Subject(
            self.lineage.path(version), "live", version_id=version.id, version=version.name
        )
        exchanges: list[tuple[Any, ChatResponse]] = []
        try:
            async with self._limiter:
                result, run = await run_one(
                    self.rt,
                    subject,
                    suite,
                    task,
                    policy.models.primary,
                    f"live-{request_id}",
                    policy=policy,
                    exchanges=exchanges,
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._finish, request_id, "interrupted", {})
            raise
        answer = {
            "request": request_id,
            "version": version.name,
            "task": task.id,
            "output": result.output,
            "claimed_success": result.claimed_success,
            "passed": result.passed if suite is not None else None,
            "error": result.error,
            "detail": result.detail,
            "tokens": result.tokens,
            "wall_s": result.wall_s,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
        }
        await anyio.to_thread.run_sync(self._finish, request_id, "done", answer)
        self.served += 1
        output = run.submission.output if run.submission is not None else None
        return Served(answer, output, exchanges[-1][1] if exchanges else None)

    async def ask(self, text: str) -> dict[str, Any]:
        task = Task(
            id=f"ask-{uuid.uuid4().hex[:8]}",
            suite="ask",
            kind="answer",
            prompt=[Message(role="user", content=text)],
        )
        return await self.serve("ask", task, None)

    async def run(self, ref: str) -> dict[str, Any]:
        """``ref`` is ``SUITE:ID`` where SUITE may itself hold a colon (``bfcl:simple``)."""
        spec, sep, task_id = ref.rpartition(":")
        if not sep or not spec or not task_id:
            raise BadRequest(f"'{ref}': expected SUITE:ID, e.g. bfcl:simple:simple_python_3")

        def find() -> tuple[Suite, Task]:
            # The first use of a suite reads its data wheel or files: not on the event loop.
            suite = self.rt.named_suite(spec)  # ConfigError for a bad suite spec
            return suite, suite.task(task_id)  # UnknownTask

        suite, task = await anyio.to_thread.run_sync(find)
        return await self.serve("run", task, suite)

    async def chat(self, task: Task, on_start: OnStart | None = None) -> Served:
        """A conversation from the OpenAI-compatible endpoint (a ``function_call`` or
        ``answer`` task), recorded as kind ``chat``."""
        return await self.serve_task("chat", task, None, on_start)

    async def drain(self, grace_s: float, cancel_s: float = 10.0) -> int:
        """Stop taking requests and give those in flight ``grace_s`` to finish; cancel the
        rest (each caller is told). Returns how many had to be cancelled."""
        self.accepting = False
        with anyio.move_on_after(grace_s):
            await self._idle.wait()
        left = self.in_flight
        for scope in list(self._scopes):
            scope.cancel()
        with anyio.move_on_after(cancel_s):
            await self._idle.wait()
        return left
