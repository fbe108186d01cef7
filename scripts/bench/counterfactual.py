#!/usr/bin/env python3
"""Does the counterfactual rewrite make held-out tasks harder? The seed on the embedded model,
paired on the same held-out tasks: once on the public tasks, once on their copies.

Two runtimes over one store: ``[suite] counterfactual = false`` (the public tasks) and
``true`` (their copies, from the same seed), the same N held-out task ids, the real path
(sandbox, gateway, verifier). Printed: each side's accuracy, the paired difference with its
95 % interval (the normal interval of the mean paired difference), the discordant pairs with
McNemar's exact p, and the ground truth replayed on every copy of every BFCL single-call
task (must verify 100 %). The load average is printed before and after.

``--generated`` puts generated tasks (``daemon.suites.generated``) in every copy's place
instead: how hard the seed finds tasks nobody has seen, beside the public ones (the pairing
is then by id only: the tasks differ, so read the two accuracies and their intervals).

``--keep param_order,param_names`` leaves those surfaces as they are (what each costs a
model; see ``daemon.suites.rewrite.bfcl.Surfaces``), ``--public-from FILE`` reuses the
public side of an earlier run's ``--details`` (the model decodes greedily: the same tasks
give the same results).

Usage: .venv/bin/python scripts/bench/counterfactual.py [--tasks 60] [--details out.json]
       [--keep SURFACE,...] [--public-from details.json] [--generated]
       [--suite humaneval]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from pathlib import Path

import anyio
from common import asset_cache, bench_settings, machine

from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.runtime import eval_instance, open_runtime
from daemon.store import Store
from daemon.suites import load_suite
from daemon.suites.bfcl import CATEGORIES, BfclSuite, as_bfcl_calls
from daemon.suites.bfcl_checker import check_calls
from daemon.suites.rewrite import bfcl as rewrite_bfcl

ROOT = Path(__file__).resolve().parents[2]
POLICY = """
[models]
primary = "local:smollm2-135m"
[suite]
name = "{suite}"
dev_size = 20
heldout_size = {tasks}
split_seed = "counterfactual-bench"
counterfactual = {counterfactual}
generated_share = {share}
[sandbox]
concurrency = 2
"""


def replay_ground_truth() -> tuple[int, int]:
    suite = load_suite("bfcl:" + ",".join(CATEGORIES), asset_cache())
    assert isinstance(suite, BfclSuite)
    ids = suite.task_ids()
    copies = suite.counterfactual(ids, "counterfactual-bench")
    ok = 0
    for task_id in ids:
        entry = copies._entry(task_id)
        calls = as_bfcl_calls(entry.functions, copies.reference_output(task_id))
        ok += check_calls(entry.bfcl_category, entry.functions, calls, entry.answers).valid
    return ok, len(ids)


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of k successes in n."""
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided p of b vs c discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    if args.suite.startswith("bfcl"):
        ok, total = replay_ground_truth()
        print(f"ground truth replayed on every BFCL single-call copy: {ok}/{total} verify")
    kept = [k for k in args.keep.split(",") if k]
    if kept:
        rewrite_bfcl.SURFACES = dataclasses.replace(
            rewrite_bfcl.SURFACES, **dict.fromkeys(kept, False)
        )
        print(f"surfaces kept as they are: {', '.join(kept)}")
    solved: dict[bool, dict[str, bool]] = {}
    if args.public_from:
        earlier = json.loads(Path(args.public_from).read_text())
        solved[False] = {k: bool(v) for k, v in earlier["false"].items()}
    for counterfactual in (False, True):
        if counterfactual in solved:
            continue
        share = 1.0 if counterfactual and args.generated else 0.0
        text = POLICY.format(
            tasks=args.tasks,
            counterfactual=str(counterfactual).lower(),
            share=share,
            suite=args.suite,
        )
        with bench_settings(text) as (loaded, holder, root):
            store = Store(root / "state" / "state.db")
            async with open_runtime(loaded, holder, store, instance=eval_instance("cf")) as rt:
                policy = holder.get()
                ids = (await rt.load_splits(policy=policy)).heldout
                subject = Subject(ROOT / "seeds" / "minimal", "seed")
                report = await evaluate(
                    rt,
                    subject,
                    split="heldout",
                    task_ids=ids,
                    model="local:smollm2-135m",
                    policy=policy,
                )
                solved[counterfactual] = {t.id: t.passed for t in report.tasks}
            store.close()
    ids = sorted(solved[False])
    public = [solved[False][i] for i in ids]
    copies = [solved[True][i] for i in ids]
    n = len(ids)
    diffs = [int(c) - int(p) for p, c in zip(public, copies, strict=True)]
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / max(n - 1, 1))
    half = 1.96 * sd / math.sqrt(n)
    b = sum(p and not c for p, c in zip(public, copies, strict=True))
    c = sum(c and not p for p, c in zip(public, copies, strict=True))
    print(f"held-out tasks: {n}")
    other = "generated tasks" if args.generated else "their copies"

    def interval(k: int) -> str:
        return "{:.1%} to {:.1%}".format(*wilson(k, n))

    print(f"  seed on the public tasks: {sum(public) / n:.1%} ({interval(sum(public))})")
    print(f"  seed on {other}: {sum(copies) / n:.1%} ({interval(sum(copies))})")
    print(
        f"  paired difference ({other} - public): {100 * mean:+.1f} points, 95 % interval "
        f"{100 * (mean - half):+.1f} to {100 * (mean + half):+.1f}; discordant {b} public-only, "
        f"{c} {other.split()[0]}-only, McNemar exact p = {mcnemar(b, c):.2f}"
    )
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} at the end")
    if args.details:
        Path(args.details).write_text(json.dumps(solved, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--details", default="")
    parser.add_argument("--keep", default="", help="surfaces to leave as they are")
    parser.add_argument("--public-from", default="", help="an earlier run's --details")
    parser.add_argument("--generated", action="store_true", help="generated tasks, not copies")
    parser.add_argument("--suite", default="bfcl:simple", help="bfcl:simple or humaneval")
    anyio.run(main, parser.parse_args())
