#!/usr/bin/env python3
"""Evaluation throughput at 1, 2 and 4 sandboxes, with a zero-latency scripted model and with
the same model behind a fixed 200 ms latency (a remote API's round trip, roughly).

Each variant evaluates the seed on the same N held-out BFCL tasks through the real path
(fresh hardened container per task, guest, gateway, ledger, verifier). Variants run
interleaved round by round, so machine noise hits each alike; printed are tasks per second
(median over rounds) and the speed-up over one sandbox with the same model.

Usage: .venv/bin/python scripts/bench/throughput.py [--tasks 12] [--rounds 2]
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections import defaultdict

import anyio
from common import ROOT, SILENT_MODEL, bench_settings, machine, median

from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.runtime import Runtime, eval_instance, open_runtime
from daemon.gateway.metering import MeteredModel
from daemon.providers.base import ChatRequest, ChatResponse, Provider
from daemon.store import Store

SANDBOXES = (1, 2, 4)
LATENCY_S = 0.2
POLICY = """
[models]
primary = "scripted:{root}/answers.toml"
[suite]
name = "bfcl:simple"
dev_size = 2
heldout_size = {tasks}
split_seed = "bench"
[sandbox]
concurrency = 1
"""


class Delayed:
    """The wrapped provider, each answer ``LATENCY_S`` late (the event loop stays free)."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.ref = inner.ref
        self.capabilities = inner.capabilities

    async def chat(self, request: ChatRequest) -> ChatResponse:
        await anyio.sleep(LATENCY_S)
        return await self.inner.chat(request)

    async def prompt_tokens(self, request: ChatRequest) -> int:
        return await self.inner.prompt_tokens(request)

    async def aclose(self) -> None:
        pass


async def _run(rt: Runtime, ref: str, model: MeteredModel, ids: list[str], k: int) -> float:
    rt._models[ref] = model
    p = rt.policy.get()
    sandbox = p.sandbox.model_copy(update={"concurrency": k})
    policy = p.model_copy(update={"sandbox": sandbox})
    subject = Subject(ROOT / "seeds" / "minimal", f"bench-{uuid.uuid4().hex[:6]}")
    start = time.perf_counter()
    await evaluate(rt, subject, split="heldout", task_ids=ids, model=ref, policy=policy)
    return len(ids) / (time.perf_counter() - start)


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    text = POLICY.replace("{tasks}", str(args.tasks))
    with bench_settings(text, {"answers.toml": SILENT_MODEL}) as (loaded, holder, root):
        ref = f"scripted:{root}/answers.toml"
        store = Store(root / "state" / "state.db")
        async with open_runtime(loaded, holder, store, instance=eval_instance("bench")) as rt:
            ids = rt.splits(policy=holder.get()).heldout[: args.tasks]
            fast = rt.model(ref)
            slow = MeteredModel(Delayed(fast._provider), rt.store, rt.guard)
            models = {"zero latency": fast, f"{LATENCY_S * 1000:.0f} ms latency": slow}
            await _run(rt, ref, fast, ids[:2], 2)  # warm up: image, page cache
            rates: dict[tuple[str, int], list[float]] = defaultdict(list)
            for _ in range(args.rounds):
                for name, model in models.items():
                    for k in SANDBOXES:
                        rates[(name, k)].append(await _run(rt, ref, model, ids, k))
        store.close()
    print(f"{args.tasks} held-out BFCL simple tasks, seed harness, {args.rounds} round(s)")
    print(f"  {'model':<16} {'sandboxes':>9} {'tasks/s':>9} {'speed-up vs 1':>14}")
    for name in models:
        one = median(rates[(name, 1)])
        for k in SANDBOXES:
            rate = median(rates[(name, k)])
            print(f"  {name:<16} {k:>9} {rate:>9.2f} {rate / one:>13.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    anyio.run(main, parser.parse_args())
