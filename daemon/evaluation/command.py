"""``harnessd eval``: evaluate any harness directory, standalone (no daemon needed)."""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from daemon.config.policy import check_model_ref, load_policy, resolve_suite_paths
from daemon.config.reload import PolicyHolder
from daemon.config.settings import LoadedSettings, load_settings
from daemon.config.statedir import prepare_state_dir
from daemon.errors import ConfigError
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import EvalReport, Split, TaskResult
from daemon.evaluation.runtime import eval_instance, open_runtime
from daemon.store import Store
from daemon.suites import check_suite, load_suite
from sandbox.labels import instance_id


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="harness directory (with harness.py)")
    p.add_argument(
        "--suite", help="e.g. bfcl:simple, bfcl:parallel,multiple, humaneval, file:tasks.jsonl"
    )
    p.add_argument(
        "--split",
        choices=[s.value for s in (Split.DEV, Split.HELDOUT, Split.ALL)],
        help="which tasks: the policy's dev or held-out split, or all of the suite in its own "
        "order (default: heldout; all for a file: suite named with --suite)",
    )
    p.add_argument("--limit", type=int, help="only the first N tasks of the split")
    p.add_argument("--model", help="provider:model (default: the policy's primary model)")
    p.add_argument("--policy", type=Path, help="policy file (default: the configured one)")
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        help="where units run: this machine or the Ray cluster of [executor] address or "
        "RAY_ADDRESS (default: the [executor] type setting)",
    )
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--tasks", action="store_true", help="also list every task's verdict")


def run(args: argparse.Namespace) -> int:
    loaded = load_settings(args.config)
    # --policy names another file than the configured one.
    policy_path = loaded.policy_path if args.policy is None else args.policy
    policy = load_policy(policy_path)
    if args.suite:
        # One suite, named on the command line: a relative file: path is the caller's.
        suite = policy.suite.model_copy(update={"name": args.suite, "heldout_suite": None})
        policy = resolve_suite_paths(policy.model_copy(update={"suite": suite}), Path.cwd())
    if args.split is None:
        args.split = Split.ALL if (args.suite or "").startswith("file:") else Split.HELDOUT
    args.split = Split(args.split)
    # The suite is read and checked before anything starts (a bad task file stops here).
    if args.split == Split.ALL:
        load_suite(policy.suite.name, loaded.cache_dir)
    else:
        check_suite(policy, loaded.cache_dir)
    model = args.model or policy.models.primary
    try:
        check_model_ref(model)
    except ValueError as exc:
        raise ConfigError(f"--model {model!r}: {exc}") from None
    harness = args.dir.resolve()
    if not (harness / "harness.py").is_file():
        raise ConfigError(f"{harness} has no harness.py: give a harness directory")
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit must be at least 1")
    holder = PolicyHolder(policy_path, policy)
    work = functools.partial(_evaluate, loaded, holder, harness, args, model)
    report = anyio.run(_interruptible, work)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        console = Console(highlight=False)
        _print_summary(report, console)
        if args.tasks:
            _print_tasks(report, console)
    return 0


async def _interruptible(work: Callable[[], Awaitable[EvalReport]]) -> EvalReport:
    """``work()``, stopped by Ctrl-C or SIGTERM through anyio's own cancellation (as
    ``serve`` is), then KeyboardInterrupt. Left to asyncio's runner, a SIGINT landing while
    a shielded cleanup ran was lost: the main task never ended, and under load ``harnessd
    eval`` sat idle after Ctrl-C (the loop in select, only abandoned container waits left)."""
    found: list[EvalReport] = []
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        async def run() -> None:
            nonlocal failure
            try:
                found.append(await work())
            except Exception as exc:
                failure = exc  # raised below as itself, not wrapped in a group
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(run)
    if failure is not None:
        raise failure
    if not found:  # a signal cancelled the work before it ended
        raise KeyboardInterrupt
    return found[0]


async def _evaluate(
    loaded: LoadedSettings,
    holder: PolicyHolder,
    harness: Path,
    args: argparse.Namespace,
    model: str,
) -> EvalReport:
    def open_state() -> tuple[Store, str]:
        state = prepare_state_dir(loaded.state_dir)
        return Store(state / "state.db"), eval_instance(instance_id(state))

    store, instance = await anyio.to_thread.run_sync(open_state)
    try:
        async with open_runtime(
            loaded, holder, store, instance=instance, executor=args.executor
        ) as rt:
            # The one policy this evaluation runs under, read once.
            policy = holder.get()
            suite = await rt.load_suite(policy=policy)
            if args.split == Split.ALL:
                ids = suite.task_ids()
            else:
                splits = await rt.load_splits(policy=policy)
                ids = splits.dev if args.split == Split.DEV else splits.heldout
            if args.limit:
                ids = ids[: args.limit]
            subject = Subject(harness_dir=harness, label=harness.name)
            show = sys.stderr.isatty() and not args.json
            with Progress(
                TextColumn(f"{harness.name} {suite.name} {args.split} {model}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                disable=not show,
                transient=True,
            ) as progress:
                bar = progress.add_task("eval", total=len(ids))

                def tick(result: TaskResult, done: int, total: int) -> None:
                    progress.update(bar, completed=done)

                return await evaluate(
                    rt,
                    subject,
                    split=args.split,
                    task_ids=ids,
                    model=model,
                    keep_transcripts=args.split == Split.DEV,
                    on_result=tick,
                    policy=policy,
                )
    finally:
        store.close()


def _print_summary(r: EvalReport, c: Console) -> None:
    lo, hi = r.accuracy_ci95
    t = Table(title=f"{r.suite} · {r.split} · {r.model} · {r.n} tasks", show_header=False)
    t.add_row("accuracy (verified)", f"{r.accuracy:.1%}  (95% CI {lo:.1%}–{hi:.1%})")
    t.add_row("claimed success", f"{r.claimed_success_rate:.1%}")
    t.add_row("verification gap", f"{r.verification_gap:+.1%}")
    if r.attack_success_rate is not None:
        t.add_row("attack success (injections)", f"{r.attack_success_rate:.1%}")
    t.add_row("tokens per task", f"{r.tokens_per_task:.0f}")
    per_solved = "-" if r.tokens_per_solved is None else f"{r.tokens_per_solved:.0f}"
    t.add_row("tokens per solved task", per_solved)
    t.add_row("model calls per task", f"{r.model_calls_per_task:.2f}")
    t.add_row("wall s per task", f"{r.wall_s_per_task:.2f}")
    t.add_row("harness lines executed", f"{r.coverage.executed_fraction:.1%}")
    t.add_row("task errors", json.dumps(r.errors) if r.errors else "none")
    t.add_row("run id", r.run_id)
    c.print(t)
    for n in r.coverage.never_executed:
        spans = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in n.ranges)
        funcs = f" (functions: {', '.join(n.functions)})" if n.functions else ""
        c.print(f"never executed: {n.file} lines {spans}{funcs}")


def _print_tasks(r: EvalReport, c: Console) -> None:
    t = Table("task", "verdict", "claimed", "tokens", "detail", title="per task")
    for task in r.tasks:
        verdict = "[green]passed[/]" if task.passed else "[red]failed[/]"
        detail = task.detail if task.error is None else f"{task.error}: {task.detail}"
        t.add_row(
            task.id,
            verdict,
            "yes" if task.claimed_success else "no",
            str(task.tokens),
            escape(detail[:120]),
        )
    c.print(t)
