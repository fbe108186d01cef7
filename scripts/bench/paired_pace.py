#!/usr/bin/env python3
"""The held-out stage's pace with one embedded model instance and with two (``[local]
instances``): paired tasks a minute, in one run.

The held-out stage runs the parent's task beside the candidate's on the same tasks, through
one model ref. Here the seed (as parent) and the seed again (as candidate: a copy of its
tree, so the answers are the same and only the serving differs) are evaluated at the same
time on the same N held-out BFCL tasks, the real path (fresh hardened container per task,
guest, gateway, ledger, verifier), on the embedded SmolLM2-135M:

* ``1 instance``: ``[local] instances = 1`` (one model serves both sides in turn: the
  arrangement before instances existed);
* ``2 instances``: ``[local] instances = 2`` (the default on two cores or more: each side's
  call takes a free instance).

Variants alternate round by round, so machine noise hits each alike. Printed: paired tasks a
minute (median over rounds), the ratio of 2 to 1 instance, and the load average and stolen
CPU time around the run (both slow the model; the ratio means little above a load of 1.5 on
a two-core machine). Held-out verdicts an hour scale with paired tasks a minute: a verdict
is a number of paired tasks (the sequential test stops when it can) plus the stages around
it.

Usage: .venv/bin/python scripts/bench/paired_pace.py [--tasks 12] [--rounds 2]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import anyio
from common import (
    EMBEDDED,
    EMBEDDED_HELDOUT_POLICY,
    ROOT,
    bench_settings,
    cpu_times,
    load_average,
    machine,
    median,
    steal_percent,
)

from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import Split
from daemon.evaluation.runtime import Runtime, eval_instance, open_runtime
from daemon.gateway.metering import MeteredModel
from daemon.providers import make_provider
from daemon.store import Store

MODEL = EMBEDDED
POLICY = EMBEDDED_HELDOUT_POLICY


def _provider(rt: Runtime, count: int) -> MeteredModel:
    loaded = rt.loaded
    local = loaded.settings.local.model_copy(update={"instances": count})
    settings = loaded.model_copy(
        update={"settings": loaded.settings.model_copy(update={"local": local})}
    )
    provider = make_provider(MODEL, settings, rt.policy.get().retry)
    return MeteredModel(provider, rt.store, rt.guard)


async def _paired(rt: Runtime, model: MeteredModel, ids: list[str], twin: Path) -> float:
    """Both sides at once, each one task at a time (the pipeline's default of two sandboxes
    shared by the two sides); paired tasks a minute."""
    rt._models[MODEL] = model
    policy = rt.policy.get()
    tag = uuid.uuid4().hex[:6]
    parent = Subject(ROOT / "seeds" / "minimal", f"parent-{tag}")
    candidate = Subject(twin, f"candidate-{tag}")

    async def side(subject: Subject) -> None:
        await evaluate(rt, subject, split=Split.HELDOUT, task_ids=ids, model=MODEL, policy=policy)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(side, parent)
        tg.start_soon(side, candidate)
    return 60 * len(ids) / (time.perf_counter() - start)


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    load_before, steal_before = load_average(), cpu_times()
    with (
        bench_settings(POLICY.format(tasks=args.tasks)) as (loaded, holder, root),
        tempfile.TemporaryDirectory() as scratch,
    ):
        twin = Path(scratch) / "candidate"
        shutil.copytree(ROOT / "seeds" / "minimal", twin)
        store = Store(root / "state" / "state.db")
        async with open_runtime(loaded, holder, store, instance=eval_instance("bench")) as rt:
            ids = rt.splits(policy=holder.get()).heldout[: args.tasks]
            variants = {"1 instance": _provider(rt, 1), "2 instances": _provider(rt, 2)}
            for model in variants.values():  # load both, warm the image and page cache
                await _paired(rt, model, ids[:1], twin)
            rates: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(args.rounds):
                for name, model in variants.items():
                    rates[name].append(await _paired(rt, model, ids, twin))
        store.close()
    steal = steal_percent(steal_before, cpu_times())
    one = median(rates["1 instance"])
    print(f"{args.tasks} held-out BFCL simple tasks a side, {args.rounds} round(s)")
    print(f"  {'variant':<12} {'paired tasks/min':>17} {'vs 1 instance':>14}")
    for name, found in rates.items():
        rate = median(found)
        print(f"  {name:<12} {rate:>17.2f} {rate / one:>13.2f}x")
    print(f"load {load_before} at start, {load_average()} at end; CPU steal {steal}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    anyio.run(main, parser.parse_args())
