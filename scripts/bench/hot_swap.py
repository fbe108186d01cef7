#!/usr/bin/env python3
"""Hot swap under concurrent ``ask`` load: how long a switch of the live version takes, how
many requests are dropped, and what the switching costs the requests in flight.

In one process, the daemon's own parts: a lineage with two versions (the seed and a
promoted patch of it), the live harness serving ``ask`` in real sandboxes with a scripted
model, and K clients asking back to back. Phases alternate, each for the same time: calm
(no switch) and switching (the live version flips between the two every ``--every`` s,
through the same rollback the control verb uses). Printed: switch latency (pointer commit,
``current`` symlink, git commit), requests served and dropped per phase, median request
latency while switching relative to calm, and which versions served the switching phase.

Usage: .venv/bin/python scripts/bench/hot_swap.py [--clients 4] [--seconds 20] [--every 1.0]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import anyio
import anyio.to_thread
from common import ROOT, SILENT_MODEL, bench_settings, machine, median

from daemon.evaluation.runtime import eval_instance, open_runtime
from daemon.lineage import CandidateSource, Lineage, NewCandidate
from daemon.live.harness import LiveHarness
from daemon.patches import apply_proposal, parse_proposal
from daemon.patches.model import Proposal
from daemon.store import Store
from daemon.verdict import Verdict

POLICY = """
[models]
primary = "scripted:{root}/answers.toml"
[suite]
name = "bfcl:simple"
[sandbox]
concurrency = {clients}
"""
PATCH = (
    "harness.py\n<<<<<<< SEARCH\nMAX_STEPS = 4{tail}=======\nMAX_STEPS = 3{tail}>>>>>>> REPLACE\n"
)


def _two_versions(lineage: Lineage, work: Path) -> None:
    seed = lineage.init_seed(ROOT / "seeds" / "minimal")
    line = next(
        x
        for x in (lineage.path(seed) / "harness.py").read_text().splitlines()
        if x.startswith("MAX_STEPS = 4")
    )
    text = PATCH.format(tail=line.removeprefix("MAX_STEPS = 4") + "\n")
    proposal = parse_proposal(text)
    assert isinstance(proposal, Proposal), proposal
    applied = apply_proposal(lineage.path(seed), proposal, work / "tree")
    cid = lineage.add_candidate(
        NewCandidate(
            parent_id=seed.id,
            source=CandidateSource.EXTERNAL,
            proposer_model=None,
            rationale="fewer steps",
            patch=applied.git_diff,
            raw=text,
        )
    )
    lineage.set_candidate(cid, "evaluating", "heldout")
    lineage.promote(cid, work / "tree", Verdict(decision="accept", stage="done", reason="bench"))


async def _phase(live: LiveHarness, lineage: Lineage, args: argparse.Namespace, swap: bool):  # type: ignore[no-untyped-def]
    latencies: list[float] = []
    served: Counter[str] = Counter()
    dropped = 0
    switches: list[float] = []
    deadline = time.monotonic() + args.seconds

    async def client(i: int) -> None:
        nonlocal dropped
        n = 0
        while time.monotonic() < deadline:
            n += 1
            start = time.perf_counter()
            try:
                answer = await live.ask(f"client {i} question {n}: what is {n} + {i}?")
            except Exception:
                dropped += 1
                continue
            if answer.get("error"):
                dropped += 1
            else:
                latencies.append(time.perf_counter() - start)
                served[str(answer["version"])] += 1

    async def swapper() -> None:
        names = [v.name for v in lineage.versions()]
        while time.monotonic() + args.every < deadline:
            await anyio.sleep(args.every)
            target = names[0] if lineage.current().name == names[1] else names[1]
            start = time.perf_counter()
            await anyio.to_thread.run_sync(lineage.rollback, target, "bench switch")
            switches.append(time.perf_counter() - start)

    async with anyio.create_task_group() as tg:
        for i in range(args.clients):
            tg.start_soon(client, i)
        if swap:
            tg.start_soon(swapper)
    return latencies, served, dropped, switches


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    policy = POLICY.replace("{clients}", str(args.clients))
    with bench_settings(policy, {"answers.toml": SILENT_MODEL}) as (loaded, holder, root):
        store = Store(root / "state" / "state.db")
        lineage = Lineage(store, root / "harnesses")
        _two_versions(lineage, root)
        async with open_runtime(loaded, holder, store, instance=eval_instance("bench")) as rt:
            live = LiveHarness(rt, lineage)
            await live.ask("warm up")
            calm: list[float] = []
            busy: list[float] = []
            drops = {"calm": 0, "switching": 0}
            served_calm = served_busy = 0
            versions: Counter[str] = Counter()
            switches: list[float] = []
            for _ in range(args.rounds):
                lat, served, dropped, _s = await _phase(live, lineage, args, swap=False)
                calm += lat
                drops["calm"] += dropped
                served_calm += sum(served.values())
                lat, served, dropped, sw = await _phase(live, lineage, args, swap=True)
                busy += lat
                drops["switching"] += dropped
                served_busy += sum(served.values())
                versions.update(served)
                switches += sw
        store.close()
    print(
        f"{args.clients} clients asking back to back, {args.rounds} x {args.seconds:.0f} s "
        f"per phase, a switch every {args.every} s while switching"
    )
    print(
        f"  switches: {len(switches)}, latency median {median(switches) * 1000:.0f} ms, "
        f"max {max(switches, default=0) * 1000:.0f} ms"
    )
    print(
        f"  calm:      {served_calm} served, {drops['calm']} dropped, "
        f"median request {median(calm):.2f} s"
    )
    print(
        f"  switching: {served_busy} served, {drops['switching']} dropped, "
        f"median request {median(busy):.2f} s = {median(busy) / median(calm):.2f}x calm; "
        f"served by {dict(versions)}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    anyio.run(main, parser.parse_args())
