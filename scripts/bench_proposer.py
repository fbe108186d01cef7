#!/usr/bin/env python3
"""Proposer figures: of N proposals, the share that parse, apply and compile, pass the smoke
stage, pass the dev screen and change the harness's dev behaviour (and so reach the held-out
stage); tokens and seconds each.

Every proposal goes through the daemon's own code: ``ImprovementLoop.prepare_proposal`` and
``sample`` (the prompt with its archive, the policy's protocol, a fresh seed, the static
stage with its duplicate screen, the lineage record), then the pipeline's own stages before
the held-out test (``BEFORE_HELDOUT``: smoke, dev screen, dev change) in the real sandbox.
The held-out stage itself is not run (minutes a candidate on the embedded model); a
candidate that passes every earlier stage is counted as reaching it and recorded as such,
so the archive of later prompts shows it as the daemon would ("not promoted"). The parent
stays the seed: every proposal is measured against the same harness. As in the loop,
``[proposer] samples`` proposals share one prompt and are drawn back to back (so llama.cpp
reuses the prompt it has just read); the prompt is then rebuilt with the archive.

Each new proposal is screened as soon as its prompt's samples are drawn, until
``--dev-deadline`` (minutes from the start) if one is given; the summary says how many were
left unscreened.

Each proposal is classified by re-running the stages on what the model wrote: it parses
(is the protocol's JSON, or a patch for the text protocol); it applies (lands on the
harness, a no-op included); it compiles (the static stage passes); it is new (not a no-op,
not a duplicate of anything tried before: what the loop then evaluates).

Usage: .venv/bin/python scripts/bench_proposer.py [--proposals 30] [--policy FILE]
       [--config harnessd.toml] [--state DIR] [--json FILE] [--dev-deadline MINUTES]

A fresh state dir is made under /tmp unless --state names one (it must not hold a lineage).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio

from daemon.config.policy import PatchPolicy, load_policy
from daemon.config.reload import PolicyHolder
from daemon.config.settings import LoadedSettings, load_settings
from daemon.config.statedir import prepare_state_dir
from daemon.evaluation.runtime import PolicySnapshot, eval_instance, open_runtime
from daemon.gateway import ledger
from daemon.improve import intake
from daemon.improve.loop import Ask, ImprovementLoop, LoopControl
from daemon.improve.pipeline import BEFORE_HELDOUT, CandidateEvaluation, policy_used
from daemon.improve.proposer import edit_protocol
from daemon.improve.stages import run_stages
from daemon.lineage import Lineage, Version
from daemon.patches import (
    NoChange,
    ParseFailure,
    PatchRejected,
    Proposal,
    apply_proposal,
    parse_proposal,
    static_check,
)
from daemon.store import Store
from daemon.verdict import Gate, Verdict
from sandbox.labels import instance_id

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    candidate: int
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    parses: bool
    applies: bool
    compiles: bool
    new: bool
    smoke: bool = False
    dev_screen: bool | None = None  # None: not screened (failed smoke, or the deadline)
    changes_dev: bool | None = None  # None: not reached
    screened: bool = True  # False: new, but the deadline had passed
    reason: str = ""
    reply: str = ""


def _stages(
    ask: Ask, base: Path, raw: str, policy: PatchPolicy, scratch: Path
) -> tuple[bool, bool, bool]:
    """(parses, applies, compiles) of a reply, re-derived from what the model wrote."""
    parsed: Proposal | ParseFailure | PatchRejected = (
        parse_proposal(raw)
        if ask.targets is None
        else edit_protocol.to_proposal(raw, ask.sources, ask.targets, ask.offer)
    )
    if isinstance(parsed, ParseFailure):
        return False, False, False
    if isinstance(parsed, PatchRejected):
        return True, False, False
    if not parsed.edits:
        return True, True, True  # a no-op lands and compiles; the screen refuses it
    dest = scratch / "tree"
    try:
        applied = apply_proposal(base, parsed, dest)
    except NoChange:
        return True, True, True  # lands, and compiles as its base did; the screen refuses it
    except PatchRejected:
        return True, False, False
    try:
        static_check(applied, policy)
        return True, True, True
    except PatchRejected:
        return True, True, False
    finally:
        shutil.rmtree(dest, ignore_errors=True)


async def _screen(
    loop: ImprovementLoop, cid: int, snapshot: PolicySnapshot
) -> tuple[bool, bool | None, bool | None]:
    """(passes smoke, passes the dev screen, changes dev behaviour) of a recorded candidate,
    by the pipeline's own stages before the held-out test (smoke, dev screen, dev change:
    ``BEFORE_HELDOUT``), under ``snapshot``, the policy it was proposed under. Its verdict
    is recorded; one that would go on is recorded as having reached the held-out stage."""
    rt, lineage = loop.rt, loop.lineage
    cand = await anyio.to_thread.run_sync(lineage.candidate, cid)
    parent = await anyio.to_thread.run_sync(lineage.get, cand.parent_version_id)
    tree = await anyio.to_thread.run_sync(intake.materialise, lineage, cid, rt.work_dir)
    try:
        run = CandidateEvaluation(loop.pipeline, cid, parent, tree, cand.patch, snapshot)
        used = policy_used(snapshot)
        verdict = await run_stages(BEFORE_HELDOUT, run, snapshot.policy, used)
    finally:
        shutil.rmtree(tree.parent, ignore_errors=True)
    by_gate = {g.gate: g for g in verdict.gates if not g.skipped}
    smoke = verdict.stage != "smoke"  # smoke stops a candidate only by refusing it
    screen = by_gate.get(Gate.DEV_SCREEN)
    change = by_gate.get(Gate.DEV_CHANGE)
    passed_screen = None if screen is None else screen.passed
    changes = None if change is None else (change.measured or 0) > 0
    if verdict.decision == "accept":  # it would go on to the held-out test
        verdict = Verdict.of(
            "heldout",
            verdict.gates,
            reason="benchmark: reached the held-out stage, which it does not run",
            policy=used,
        )
    stage = verdict.stage
    await anyio.to_thread.run_sync(lambda: lineage.set_candidate(cid, "rejected", stage, verdict))
    return smoke, passed_screen, changes


async def bench(
    loaded: LoadedSettings, policy_path: Path, n: int, scratch: Path, dev_deadline: float | None
) -> list[Row]:
    policy = load_policy(policy_path)
    holder = PolicyHolder(policy_path, policy)
    state = prepare_state_dir(loaded.state_dir)
    store = Store(state / "state.db")
    rows: list[Row] = []
    started = time.monotonic()
    try:
        async with open_runtime(
            loaded, holder, store, instance=eval_instance(instance_id(state))
        ) as rt:
            lineage = Lineage(store, loaded.harnesses_dir)
            seed: Version = lineage.init_seed(ROOT / "seeds" / "minimal")
            loop = ImprovementLoop(rt, lineage, LoopControl())
            snapshot = rt.snapshot()  # the one policy every proposal here is made under
            parent_dev = await loop.pipeline.baseline(
                seed, "dev", policy.models.primary, policy=snapshot.policy
            )
            print(f"seed on dev: {parent_dev.accuracy:.0%} of {parent_dev.n}", flush=True)
            with tempfile.TemporaryDirectory() as bases:
                while len(rows) < n:
                    ask = await loop.prepare_proposal(Path(bases) / f"p{len(rows)}", snapshot)
                    drawn: list[tuple[Row, intake.Submitted]] = []
                    for _ in range(min(policy.proposer.samples, n - len(rows))):
                        drawn.append(await _draw(loop, ask, store, seed, policy.patch, scratch))
                    for row, sub in drawn:
                        late = (
                            dev_deadline is not None and time.monotonic() - started > dev_deadline
                        )
                        if sub.accepted_for_evaluation and not late:
                            row.smoke, row.dev_screen, row.changes_dev = await _screen(
                                loop, sub.candidate_id, snapshot
                            )
                        elif sub.accepted_for_evaluation:
                            row.screened = False
                        rows.append(row)
                        print(json.dumps(asdict(row)), flush=True)
    finally:
        store.close()
    return rows


async def _draw(
    loop: ImprovementLoop,
    ask: Ask,
    store: Store,
    seed: Version,
    patch: PatchPolicy,
    scratch: Path,
) -> tuple[Row, intake.Submitted]:
    """One proposal, recorded and screened statically by the loop's own code."""
    start = time.monotonic()
    sub = await loop.sample(ask)
    seconds = time.monotonic() - start
    if sub is None:
        raise SystemExit("the proposer's token budget refused a proposal")
    cand = loop.lineage.candidate(sub.candidate_id)
    spent = ledger.spent_by_candidate(store, sub.candidate_id, "propose")
    parses, applies, compiles = _stages(ask, loop.lineage.path(seed), cand.raw, patch, scratch)
    row = Row(
        sub.candidate_id,
        round(seconds, 1),
        spent.prompt_tokens,
        spent.completion_tokens,
        parses,
        applies,
        compiles,
        sub.accepted_for_evaluation,
        reason=sub.reason,
        reply=cand.raw[:300],
    )
    return row, sub


def _share(rows: list[Row], field: str) -> str:
    k = sum(bool(getattr(r, field)) for r in rows)
    return f"{k}/{len(rows)} ({100 * k / len(rows):.0f} %)"


def summary(rows: list[Row]) -> str:
    secs = [r.seconds for r in rows]
    prompt = [r.prompt_tokens for r in rows]
    completion = [r.completion_tokens for r in rows]
    late = sum(r.new and not r.screened for r in rows)
    reach = sum(bool(r.dev_screen) and bool(r.changes_dev) for r in rows)
    lines = [
        "| proposals | parse | apply | apply and compile | new program | pass smoke "
        "| pass dev screen | change dev behaviour (reach held-out) |",
        "|---|---|---|---|---|---|---|---|",
        f"| {len(rows)} | {_share(rows, 'parses')} | {_share(rows, 'applies')} "
        f"| {_share(rows, 'compiles')} | {_share(rows, 'new')} | {_share(rows, 'smoke')} "
        f"| {_share(rows, 'dev_screen')} | {reach}/{len(rows)} ({100 * reach / len(rows):.0f} %) |",
        "",
        f"per proposal: {statistics.mean(prompt):.0f} prompt + {statistics.mean(completion):.0f} "
        f"completion tokens (mean), {statistics.mean(secs):.1f} s mean, "
        f"{statistics.median(secs):.1f} s median, {max(secs):.1f} s max",
    ]
    if late:
        lines.append(f"{late} new proposals not screened (--dev-deadline passed)")
    return "\n".join(lines)


def _rows(path: Path) -> list[Row]:
    """The rows in a run's output (``--json`` file or its printed lines), whether or not the
    run finished."""
    return [
        Row(**json.loads(line))
        for line in path.read_text().splitlines()
        if line.startswith("{") and '"seconds"' in line
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--proposals", type=int, default=30)
    p.add_argument("--policy", type=Path, default=ROOT / "policies" / "default.toml")
    p.add_argument("--state", type=Path, help="a fresh state dir (default: a new one in /tmp)")
    p.add_argument("--config", type=Path, help="harnessd.toml (for the asset cache, providers)")
    p.add_argument("--json", type=Path, help="also write every row to this file")
    p.add_argument("--dev-deadline", type=float, help="minutes after which no dev screen starts")
    p.add_argument("--summarize", type=Path, help="only print the summary of rows printed before")
    args = p.parse_args()
    if args.summarize:
        print(summary(_rows(args.summarize)))
        return 0
    base = load_settings(args.config)
    where = args.state or Path(tempfile.mkdtemp(prefix="bench-proposer-"))
    moved = {"state_dir": where / "state", "harnesses_dir": where / "harnesses"}
    settings = base.settings.model_copy(update={**moved, "cache_dir": base.cache_dir})
    loaded = LoadedSettings(settings=settings, config_path=base.config_path, base_dir=where)
    print(f"state in {where}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        deadline = None if args.dev_deadline is None else 60 * args.dev_deadline
        rows = anyio.run(
            bench, loaded, args.policy.resolve(), args.proposals, Path(scratch), deadline
        )
    if args.json:
        args.json.write_text("\n".join(json.dumps(asdict(r)) for r in rows) + "\n")
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
