#!/usr/bin/env python3
"""The loop's search against plain parallel sampling, at the same number of proposals and
dev runs (issue 36: "a search must beat that baseline to be worth having").

Two arms, each in a fresh state dir, each from the seed (``seeds/minimal``), each with the
same policy apart from what makes the search a search:

* **search**: the loop as it runs (``[proposer] search = "thompson"``: the next proposal may
  build on an earlier candidate by its dev results; the archive of earlier candidates in
  every prompt; the merge of two candidates that win on different dev tasks);
* **sampling**: independent samples from the live version (``search = "live"``, no archive:
  ``verdicts_shown = 0``), the baseline of "Rethinking the Evaluation of Harness Evolution".

Every proposal goes through the daemon's own code (``ImprovementLoop.prepare_proposal`` and
``sample``: prompt, protocol, grammar, static stage, lineage record), and each that passes
the static stage runs the pipeline's own stages before the held-out test
(``Pipeline.screen``: smoke, dev screen, dev change) in the real sandbox, against the seed.
A candidate that passes them is recorded as rejected "benchmark: screened" so that later
proposals of the search arm can build on it (its dev report is what the search reads).

Figures per arm: proposals, passed static, passed the dev stages, the best dev accuracy gain
over the seed and how many candidates gained on dev. Dev figures of the best of several are
inflated by the choice itself, so with ``--heldout N`` (default 60) each arm's best
candidate by dev evidence and the seed are run on the same N held-out tasks (counterfactual
copies and generated tasks, as the daemon evaluates them): the unbiased comparison.

Both arms draw dev and held-out tasks with one ``[suite] split_seed`` (``--split-seed``,
default a fresh one), so their figures are on the same tasks.

Usage: .venv/bin/python scripts/bench/search_baseline.py [--proposals 12] [--heldout 60]
       [--split-seed S] [--arms search,sampling] [--policy FILE] [--config harnessd.toml]
       [--workdir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
from common import ROOT, cpu_times, load_average, steal_percent

from daemon.config.policy import load_policy
from daemon.config.reload import PolicyHolder
from daemon.config.settings import LoadedSettings, load_settings
from daemon.config.statedir import prepare_state_dir
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import EvalReport, Split
from daemon.evaluation.runtime import eval_instance, open_runtime
from daemon.improve import intake
from daemon.improve import loop as loop_module
from daemon.improve.loop import ImprovementLoop, LoopControl
from daemon.improve.pipeline import Screened
from daemon.lineage import CandidateState, Lineage
from daemon.store import Store
from daemon.verdict import Stage, Verdict
from sandbox.labels import instance_id

ARMS: dict[str, dict[str, Any]] = {
    "search": {"search": "thompson", "merge": True},
    "sampling": {"search": "live", "verdicts_shown": 0, "merge": False},
}


@dataclass
class Arm:
    name: str
    proposals: int = 0
    passed_static: int = 0
    screened: int = 0  # passed smoke, the dev screen and the dev change gate
    seed_dev: float = 0.0
    dev: dict[int, float] = field(default_factory=dict)  # candidate -> dev accuracy
    tokens: dict[int, float] = field(default_factory=dict)  # candidate -> dev tokens/task
    best: int | None = None
    heldout: float | None = None  # the best candidate's held-out accuracy
    seed_heldout: float | None = None
    heldout_n: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        gains = [a - self.seed_dev for a in self.dev.values()]
        best = max(gains, default=0.0)
        line = (
            f"| {self.name} | {self.proposals} | {self.passed_static} | {self.screened} "
            f"| {100 * self.seed_dev:.0f} % | {100 * best:+.0f} points "
            f"| {sum(g > 0 for g in gains)} |"
        )
        if self.heldout is not None and self.seed_heldout is not None:
            line += (
                f" c{self.best}: {100 * self.heldout:.1f} % vs seed "
                f"{100 * self.seed_heldout:.1f} % ({self.heldout_n} tasks) |"
            )
        else:
            line += " no candidate passed the dev stages |"
        return line


def _policy_text(base: Path, changes: dict[str, Any], split_seed: str) -> str:
    """``base`` with ``[proposer]`` keys replaced (or added) by ``changes``; one proposal a
    cycle goes to the dev stages here, so dev-side selection is left to this script. Every
    arm gets the same ``[suite] split_seed``: the same dev tasks and the same held-out pool
    (each fresh state dir would otherwise draw its own from its own installation secret,
    and the arms' figures would be on different tasks)."""
    data = tomllib.loads(base.read_text())
    data["suite"] = {**data.get("suite", {}), "split_seed": split_seed}
    proposer = dict(data.get("proposer", {}))
    proposer.update(changes)
    proposer["dev_pool"] = 1
    data["proposer"] = proposer
    lines: list[str] = []
    for table, values in data.items():
        if isinstance(values, dict):
            continue
        lines.append(f"{table} = {json.dumps(values)}")
    lines.extend(_tables(data, ""))
    return "\n".join(lines) + "\n"


def _tables(data: dict[str, Any], prefix: str) -> list[str]:
    out: list[str] = []
    for name, values in data.items():
        if not isinstance(values, dict):
            continue
        out.append(f"\n[{prefix}{name}]")
        for key, value in values.items():
            if not isinstance(value, dict):
                out.append(f"{key} = {json.dumps(value)}")
        out.extend(_tables(values, f"{prefix}{name}."))
    return out


async def run_arm(
    name: str, loaded: LoadedSettings, policy_path: Path, n: int, heldout: int
) -> Arm:
    policy = load_policy(policy_path)
    holder = PolicyHolder(policy_path, policy)
    state = prepare_state_dir(loaded.state_dir)
    store = Store(state / "state.db")
    arm = Arm(name)
    began = time.monotonic()
    try:
        async with open_runtime(
            loaded, holder, store, instance=eval_instance(instance_id(state))
        ) as rt:
            lineage = Lineage(store, loaded.harnesses_dir)
            seed = lineage.init_seed(ROOT / "seeds" / "minimal")
            loop = ImprovementLoop(rt, lineage, LoopControl())
            snapshot = rt.snapshot()
            primary = policy.models.primary
            seed_dev = await loop.pipeline.baseline(seed, Split.DEV, primary, policy=policy)
            arm.seed_dev = seed_dev.accuracy
            print(f"[{name}] seed on dev: {seed_dev.accuracy:.0%} of {seed_dev.n}", flush=True)
            with tempfile.TemporaryDirectory() as bases:
                while arm.proposals < n:
                    scratch = Path(bases) / f"p{arm.proposals}"
                    # The search's merge move (no model call) counts as one proposal and
                    # one dev run, as it takes a place in the loop's pool.
                    sub = None
                    if policy.proposer.merge:
                        sub = await loop._merge(scratch, snapshot)
                    if sub is None:
                        ask = await loop.prepare_proposal(scratch, snapshot)
                        sub = await loop.sample(ask)
                    if sub is None:
                        raise SystemExit("the proposer's token budget refused a proposal")
                    arm.proposals += 1
                    if not sub.accepted_for_evaluation:
                        print(f"[{name}] c{sub.candidate_id}: static: {sub.reason}", flush=True)
                        continue
                    arm.passed_static += 1
                    outcome = await loop.pipeline.screen(sub.candidate_id, snapshot)
                    if not isinstance(outcome, Screened):
                        print(f"[{name}] c{sub.candidate_id}: {outcome.reason}", flush=True)
                        continue
                    arm.screened += 1
                    dev = _dev_of(outcome)
                    arm.dev[outcome.cid] = dev.accuracy
                    arm.tokens[outcome.cid] = dev.tokens_per_task
                    print(
                        f"[{name}] c{outcome.cid}: dev {dev.accuracy:.0%} "
                        f"(seed {seed_dev.accuracy:.0%}), {dev.tokens_per_task:.0f} tokens/task",
                        flush=True,
                    )
                    await _set_aside(loop, outcome)
            if arm.dev:
                arm.best = max(
                    sorted(arm.dev), key=lambda c: (arm.dev[c], -arm.tokens[c])
                )  # the pipeline's order: accuracy, then tokens
                await _heldout(loop, arm, seed, heldout, policy)
    finally:
        store.close()
    arm.seconds = round(time.monotonic() - began, 1)
    return arm


def _dev_of(screened: Screened) -> EvalReport:
    assert screened.run.dev is not None
    return screened.run.dev[1]


async def _set_aside(loop: ImprovementLoop, screened: Screened) -> None:
    """A screened candidate is recorded as rejected (this benchmark runs no held-out test for
    it), its dev report kept for the search's choice of base; its tree is removed."""
    verdict = Verdict.of(
        Stage.DEV, screened.gates, reason="benchmark: screened; no held-out test here"
    )
    cid = screened.cid
    await anyio.to_thread.run_sync(
        lambda: loop.lineage.set_candidate(cid, CandidateState.REJECTED, Stage.DEV, verdict)
    )
    await anyio.to_thread.run_sync(lambda: _remove(screened.run.tree.parent))


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


async def _heldout(loop: ImprovementLoop, arm: Arm, seed: Any, n: int, policy: Any) -> None:
    """The arm's best candidate and the seed on the same ``n`` held-out tasks."""
    if n <= 0 or arm.best is None:
        return
    rt = loop.rt
    splits = await rt.load_splits(policy=policy)
    ids = splits.heldout[:n]
    primary = policy.models.primary
    seed_report = await loop.pipeline.baseline(seed, Split.HELDOUT, primary, ids, policy=policy)
    tree = await anyio.to_thread.run_sync(intake.materialise, loop.lineage, arm.best, rt.work_dir)
    try:
        subject = Subject(tree, f"c{arm.best}", candidate_id=arm.best, version_id=None)
        report = await evaluate(
            rt, subject, split=Split.HELDOUT, task_ids=ids, model=primary, policy=policy
        )
    finally:
        await anyio.to_thread.run_sync(lambda: _remove(tree.parent))
    arm.heldout, arm.seed_heldout, arm.heldout_n = report.accuracy, seed_report.accuracy, len(ids)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--proposals", type=int, default=12)
    p.add_argument("--heldout", type=int, default=60)
    p.add_argument("--policy", type=Path, default=ROOT / "policies" / "default.toml")
    p.add_argument("--config", type=Path, help="harnessd.toml (for the asset cache, providers)")
    p.add_argument("--workdir", type=Path, help="where the arms' state dirs go (default /tmp)")
    p.add_argument("--json", type=Path, help="also write the arms' figures to this file")
    p.add_argument(
        "--arms",
        default=",".join(ARMS),
        help=f"which arms, comma-separated (default {','.join(ARMS)})",
    )
    p.add_argument(
        "--reply-attempts",
        type=int,
        help="replies drawn per proposal until one passes the static checks (default: the "
        f"loop's, {loop_module.REPLY_ATTEMPTS}); 1 compares with runs made before that existed",
    )
    p.add_argument(
        "--split-seed",
        help="the arms' shared [suite] split_seed (default: a fresh one, printed); give the "
        "same one to runs of single arms (--arms) that are to be compared",
    )
    args = p.parse_args()
    unknown = set(args.arms.split(",")) - set(ARMS)
    if unknown:
        p.error(f"--arms: unknown {sorted(unknown)}; choose from {list(ARMS)}")
    if args.reply_attempts is not None:
        loop_module.REPLY_ATTEMPTS = args.reply_attempts
    base = load_settings(args.config)
    where = args.workdir or Path(tempfile.mkdtemp(prefix="bench-search-"))
    load_before, steal_before = load_average(), cpu_times()
    split_seed = args.split_seed or secrets.token_hex(8)
    print(f"workdir {where}; split seed {split_seed}; load {load_before}", flush=True)
    arms: list[Arm] = []
    for name, changes in ARMS.items():
        if name not in args.arms.split(","):
            continue
        folder = where / name
        folder.mkdir(parents=True, exist_ok=True)
        policy_path = folder / "policy.toml"
        policy_path.write_text(_policy_text(args.policy, changes, split_seed))
        moved = {"state_dir": folder / "state", "harnesses_dir": folder / "harnesses"}
        settings = base.settings.model_copy(update={**moved, "cache_dir": base.cache_dir})
        loaded = LoadedSettings(settings=settings, config_path=base.config_path, base_dir=folder)
        arms.append(anyio.run(run_arm, name, loaded, policy_path, args.proposals, args.heldout))
        print(arms[-1].summary(), flush=True)  # kept in the log should a later arm fail
    steal = steal_percent(steal_before, cpu_times())
    print()
    print(
        "| arm | proposals | passed static | passed dev stages | seed on dev "
        "| best dev gain | candidates gaining on dev | best by dev, on held-out |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for arm in arms:
        print(arm.summary())
    print(f"\nload {load_before} at start, {load_average()} at end; CPU steal {steal}")
    if args.json:
        args.json.write_text(json.dumps([asdict(a) for a in arms], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
