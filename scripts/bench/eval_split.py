#!/usr/bin/env python3
"""Where an evaluation's wall time goes: a real evaluation on the embedded model against a
bare replay of exactly the model requests it made (no sandbox, no gateway, no verifier).

Measured in one run, each figure a ratio to the bare replay:

* ``eval, K sandboxes``: ``evaluate`` of the seed on N held-out BFCL tasks, the real path
  (fresh hardened container per task, guest runtime, gateway, ledger, verifier), at
  K = 1 and the policy default 2;
* ``model time inside the eval``: the provider's own time per call, summed, as the gateway
  saw it (includes waiting for the model, which serves one call at a time);
* ``bare replay``: the same requests, in order, straight to the provider;
* ``eval with replayed answers``: the same evaluation with a provider that answers each
  request instantly with the recorded answer: the same tasks, the same calls, the same
  outputs and verdicts, with the model's time taken out, i.e. the daemon's own cost
  (container, guest start, gateway, ledger, verifier);
* ``verifier alone``: the suite's checker on the recorded outputs, on the host;
* ``plain chat, same prompt``: the tool-call requests replayed without their grammar (the
  prompt is the same text; the reply unconstrained), to split the grammar's share.

Usage: .venv/bin/python scripts/bench/eval_split.py [--tasks 8]
"""

from __future__ import annotations

import argparse
import time
import uuid

import anyio
from common import (
    EMBEDDED,
    EMBEDDED_HELDOUT_POLICY,
    ROOT,
    Call,
    Recording,
    bench_settings,
    machine,
    row,
)

from daemon.config.policy import Policy
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.runtime import Runtime, eval_instance, open_runtime
from daemon.gateway.metering import MeteredModel
from daemon.providers.base import ChatRequest, ChatResponse, Usage
from daemon.providers.local_llama import to_chat_messages
from daemon.store import Store

MODEL = EMBEDDED
POLICY = EMBEDDED_HELDOUT_POLICY


class Replayed:
    """Answers each request with the answer recorded for the identical request, at once."""

    capabilities = None

    def __init__(self, calls: list[Call]) -> None:
        self.ref = MODEL
        self._answers = {c.request.model_dump_json(): c.response for c in calls}
        self.misses = 0

    async def chat(self, request: ChatRequest) -> ChatResponse:
        found = self._answers.get(request.model_dump_json())
        if found is None:
            self.misses += 1
            return ChatResponse(
                content="", usage=Usage(prompt_tokens=1, completion_tokens=1), model=MODEL
            )
        return found

    async def prompt_tokens(self, request: ChatRequest) -> int:
        found = self._answers.get(request.model_dump_json())
        return found.usage.prompt_tokens if found else 1

    async def aclose(self) -> None:
        pass


def _use(rt: Runtime, provider: object) -> None:
    """Put ``provider`` behind the runtime's metering for MODEL (what evaluate calls)."""
    rt._models[MODEL] = MeteredModel(provider, rt.store, rt.guard)  # type: ignore[arg-type]


def _concurrency(rt: Runtime, k: int) -> Policy:
    """The bench's policy with ``k`` sandboxes at once."""
    p = rt.policy.get()
    return p.model_copy(update={"sandbox": p.sandbox.model_copy(update={"concurrency": k})})


async def _timed_eval(rt: Runtime, ids: list[str], k: int) -> tuple[float, object]:
    policy = _concurrency(rt, k)
    subject = Subject(ROOT / "seeds" / "minimal", f"bench-{uuid.uuid4().hex[:6]}")
    start = time.perf_counter()
    report = await evaluate(rt, subject, split="heldout", task_ids=ids, model=MODEL, policy=policy)
    return time.perf_counter() - start, report


def _plain(request: ChatRequest) -> ChatRequest:
    """The same prompt text as plain chat: tool descriptions inlined, no grammar."""
    from daemon.providers.base import Message

    turns = to_chat_messages(request)
    return request.model_copy(
        update={
            "messages": [Message(role=t["role"], content=t["content"]) for t in turns],  # type: ignore[arg-type]
            "tools": [],
            "response_schema": None,
        }
    )


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    with bench_settings(POLICY.format(tasks=args.tasks)) as (loaded, holder, root):
        store = Store(root / "state" / "state.db")
        async with open_runtime(loaded, holder, store, instance=eval_instance("bench")) as rt:
            ids = rt.splits(policy=holder.get()).heldout[: args.tasks]
            local = rt.model(MODEL)._provider  # the real provider, model loaded once
            await local.load()  # type: ignore[attr-defined]
            recording = Recording(local)
            _use(rt, recording)
            await _timed_eval(rt, ids[:1], 1)  # warm: image, page cache, grammar caches
            recording.calls.clear()
            wall1, report1 = await _timed_eval(rt, ids, 1)
            print(f"  (eval, 1 sandbox: {wall1:.1f} s)", flush=True)
            calls = list(recording.calls)
            model_in_eval = sum(c.seconds for c in calls)
            recording.calls.clear()
            wall2, _ = await _timed_eval(rt, ids, 2)
            print(f"  (eval, 2 sandboxes: {wall2:.1f} s)", flush=True)

            start = time.perf_counter()
            for c in calls:
                await local.chat(c.request)
            bare = time.perf_counter() - start
            print(f"  (bare replay: {bare:.1f} s)", flush=True)

            tool_calls = [c for c in calls if c.request.tools]
            start = time.perf_counter()
            for c in tool_calls:
                await local.chat(c.request)
            with_grammar = time.perf_counter() - start
            start = time.perf_counter()
            for c in tool_calls:
                await local.chat(_plain(c.request))
            without_grammar = time.perf_counter() - start
            print(
                f"  (tool-call requests {with_grammar:.1f} s, as plain chat "
                f"{without_grammar:.1f} s)",
                flush=True,
            )

            replayed = Replayed(calls)
            _use(rt, replayed)
            wall0, report0 = await _timed_eval(rt, ids, 1)
            print(f"  (eval with replayed answers: {wall0:.1f} s)", flush=True)

            suite = rt.suite(policy=holder.get())
            checker = rt.code_checker(rt.limits(holder.get()))
            start = time.perf_counter()
            for t in report1.tasks:  # type: ignore[attr-defined]
                await suite.check(t.id, t.output, checker)
            verifier = time.perf_counter() - start
        store.close()

    same = [a.passed for a in report1.tasks] == [b.passed for b in report0.tasks]  # type: ignore[attr-defined]
    n = len(ids)
    print(
        f"{n} held-out BFCL simple tasks, {len(calls)} model calls "
        f"({len(tool_calls)} with tools), seed harness, {MODEL}"
    )
    print(f"{'':<48} {'seconds':>9}    ratio to the bare replay")
    print(row("bare replay of the same requests", bare, bare))
    print(row("eval, 1 sandbox", wall1, bare, f"{wall1 / n:.2f} s/task"))
    print(row("eval, 2 sandboxes", wall2, bare, f"{wall2 / n:.2f} s/task"))
    print(row("model time inside the eval (1 sandbox)", model_in_eval, bare))
    note = f"{wall0 / n:.2f} s/task; same verdicts: {same}; misses {replayed.misses}"
    print(row("eval with replayed answers (daemon's own cost)", wall0, bare, note))
    print(row("verifier alone (host checker)", verifier, bare))
    print(row("tool-call requests, with grammar", with_grammar, bare))
    print(
        row(
            "the same prompts as plain chat",
            without_grammar,
            bare,
            f"grammar share {with_grammar / max(without_grammar, 1e-9):.2f}x",
        )
    )
    rest = wall1 - model_in_eval
    print(
        f"split of the 1-sandbox eval: model {model_in_eval / wall1:.0%}, "
        f"rest {rest / wall1:.0%} (container + guest start + gateway + verifier: the "
        f"replayed-answer eval measures it directly as {wall0 / wall1:.0%})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    anyio.run(main, parser.parse_args())
