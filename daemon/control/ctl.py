"""``harnessctl``: attach to a running harnessd over its control socket.

Its commands, their arguments and help, what each sends and the view that prints each reply
all come from the verb table (:mod:`daemon.control.verbs`). Each prints for people (rich, as
wide as the terminal; ``--wide`` on the table views for all of it) or, with ``--json``, the
daemon's reply as JSON. Exit codes: 0 ok, 1 the daemon refused (error code and message
printed), 2 usage or config error, 3 daemon not running.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from daemon.control.client import ControlClient
from daemon.control.protocol import SOCKET_NAME, ControlError
from daemon.control.registry import Verb
from daemon.control.verbs import VERBS, UsageError
from daemon.errors import HarnessdError

# Every verb gets 30 s for its reply unless its declaration says it may take minutes.
TIMEOUT_S = 30.0
# ``--wide``: a console without a practical width limit, so no table drops or clips
# anything (a rationale is at most 2,000 characters); the terminal wraps what it must.
WIDE_COLUMNS = 100_000


def _socket_path(args: argparse.Namespace) -> Path:
    if args.socket:
        return Path(args.socket)
    if args.state_dir:
        return Path(args.state_dir) / SOCKET_NAME
    from daemon.config.settings import load_settings

    return load_settings(args.config).state_dir / SOCKET_NAME


def build_parser() -> argparse.ArgumentParser:
    """harnessctl's parser: a command per verb of the table, in its order, with its help."""
    parser = argparse.ArgumentParser(
        prog="harnessctl",
        description="Talk to a running harnessd over its control socket.",
        epilog="'harnessctl VERB --help' shows a verb's arguments. Exit codes: 0 ok, 1 the "
        "daemon refused (its error code is printed), 2 usage or config error, 3 no daemon.",
    )
    parser.add_argument("--config", type=Path, help="harnessd config, to find the state dir")
    parser.add_argument("--state-dir", help="the daemon's state dir (overrides --config)")
    parser.add_argument("--socket", help="the control socket path (overrides the rest)")
    parser.add_argument("--json", action="store_true", help="print the daemon's reply as JSON")
    sub = parser.add_subparsers(dest="command", required=True, metavar="VERB")
    groups: dict[str, Any] = {}
    for verb in VERBS:
        where = sub
        if len(verb.command) == 2:
            group = verb.command[0]
            if group not in groups:
                groups[group] = sub.add_parser(
                    group, help=VERBS.groups[group], description=VERBS.groups[group]
                ).add_subparsers(dest=f"{group}_command", required=True, metavar="SUBVERB")
            where = groups[group]
        p = where.add_parser(verb.command[-1], help=verb.help, description=verb.help)
        p.add_argument(
            "--json",
            action="store_true",
            default=argparse.SUPPRESS,
            help="print the daemon's reply as JSON",
        )
        if verb.wide:
            p.add_argument(
                "--wide",
                action="store_true",
                help="every column, nothing clipped (the terminal wraps long lines)",
            )
        for arg in verb.args:
            arg.add_to(p)
        p.set_defaults(verb=verb)
    return parser


def _console(args: argparse.Namespace) -> Console:
    """Output as wide as the terminal (``COLUMNS`` when it is not one); in a terminal, text
    wraps at words to fit it, while to a pipe or a file a line (a path, a verdict) is never
    broken."""
    wide = getattr(args, "wide", False)
    console = Console(highlight=False, width=WIDE_COLUMNS if wide else None)
    console.soft_wrap = not console.is_terminal
    return console


def _show(verb: Verb, result: Any, args: argparse.Namespace) -> None:
    if not args.json:
        verb.view(result, _console(args))
    elif verb.stream:
        events: Iterable[Any] = result
        for event in events:
            print(json.dumps(event), flush=True)
    else:
        print(json.dumps(result, indent=2, default=str))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    verb: Verb = args.verb
    try:
        path = _socket_path(args)
        with ControlClient(path, timeout=None if verb.unbounded else TIMEOUT_S) as c:
            result = verb.send(c, args)
            if verb.stream:  # shown while the connection is open
                _show(verb, result, args)
                return 0
    except UsageError as exc:
        print(f"harnessctl: {exc}", file=sys.stderr)
        return 2
    except ControlError as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": {"code": exc.code.value, "message": str(exc)}}))
        else:
            print(f"harnessctl: error ({exc.code.value}): {exc}", file=sys.stderr)
        return 1
    except HarnessdError as exc:
        print(f"harnessctl: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"harnessctl: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if result is not None:
        _show(verb, result, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
