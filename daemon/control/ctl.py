"""``harnessctl``: attach to a running harnessd over its control socket.

One function per verb; each prints for people (rich) or, with ``--json``, the daemon's reply
as JSON. Exit codes: 0 ok, 1 the daemon refused (error code and message printed), 2 usage
or config error, 3 daemon not running.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from daemon.control import views as ctlview
from daemon.control.client import ControlClient
from daemon.control.protocol import COMMAND_GROUPS, SOCKET_NAME, VERBS, ControlError
from daemon.errors import HarnessdError

# Soft wrap: a line (a path, a verdict) is never broken by rich at 80 columns when output goes
# to a pipe or a file; the terminal wraps what is too long for it.
out = Console(highlight=False, soft_wrap=True)

# How long ``harnessctl stop`` waits for the daemon to close its connections.
STOP_WAIT_S = 30.0
# Verbs that may take minutes (a task run, a report, power computed for a policy, an
# approval's promotion on a loaded machine): no
# timeout on their reply. Every other verb gets 30 s.
_UNBOUNDED = ("ask", "run", "propose", "report", "policy_show", "policy_check", "approve")

# What harnessctl does for one verb: call the daemon (and post-process its reply).
Call = Callable[[ControlClient, argparse.Namespace], Any]
# A verb's own arguments, added to its parser.
Arguments = Callable[[argparse.ArgumentParser], None]


class UsageError(Exception):
    """An argument the daemon need not see to refuse (exit code 2)."""


def _socket_path(args: argparse.Namespace) -> Path:
    if args.socket:
        return Path(args.socket)
    if args.state_dir:
        return Path(args.state_dir) / SOCKET_NAME
    from daemon.config.settings import load_settings

    return load_settings(args.config).state_dir / SOCKET_NAME


def status(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("status")


def watch(c: ControlClient, a: argparse.Namespace) -> Any:
    ctlview.watch(c.watch(), as_json=a.json, console=out)
    return None


def events(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("events", limit=a.limit)


def ask(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("ask", text=a.text)


def run(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("run", task=a.task)


# Checks whose ``expected`` is the text as typed; the others take JSON (a number, calls, ...).
_TEXT_EXPECTED = ("exact", "regex")


def _check(text: str) -> dict[str, Any]:
    """``--check``: a check type, or a whole check object as JSON; a checker path relative
    to the working directory is made absolute (the daemon resolves nothing of ours)."""
    try:
        check = json.loads(text) if text.lstrip().startswith("{") else {"type": text}
    except ValueError as exc:
        raise UsageError(f"--check {text!r}: not a JSON object ({exc})") from None
    if not isinstance(check, dict):
        raise UsageError(f"--check {text!r}: expected a check type or a JSON object")
    checker = check.get("checker")
    if isinstance(checker, str) and ":" in checker:
        file, _, function = checker.rpartition(":")
        check["checker"] = f"{Path(file).expanduser().resolve()}:{function}"
    return check


def label(c: ControlClient, a: argparse.Namespace) -> Any:
    check = _check(a.check)
    expected: Any = a.expected
    if check.get("type") not in _TEXT_EXPECTED:
        try:
            expected = json.loads(a.expected)
        except ValueError as exc:
            raise UsageError(
                f"--expected {a.expected!r}: a {check.get('type')!r} check takes JSON ({exc})"
            ) from None
    return c.call(
        "label", request=a.request, suite=a.suite, expected=expected, check=check, id=a.id
    )


def suite_export(c: ControlClient, a: argparse.Namespace) -> Any:
    result = c.call("suite_export", suite=a.suite)
    if a.output is None:
        return result
    Path(a.output).write_text(result["text"], encoding="utf-8")
    return {k: v for k, v in result.items() if k != "text"} | {"written": str(a.output)}


def lineage(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("lineage", candidates=a.candidates)


def show(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("show", ref=a.ref)


def diff(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("diff", a=a.a, b=a.b)


def report(c: ControlClient, a: argparse.Namespace) -> Any:
    from daemon.report import candidate_arg

    return c.call("report", out=str(Path(a.out).resolve()), candidate=candidate_arg(a.candidate))


def rollback(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("rollback", ref=a.ref, reason=a.reason)


def review(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("review")


def approve(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("approve", ref=a.ref, reviewer=a.reviewer, reason=a.reason)


def reject(c: ControlClient, a: argparse.Namespace) -> Any:
    if not a.reason.strip():
        raise UsageError("reject needs --reason TEXT: why, in a sentence (kept in the lineage)")
    return c.call("reject", ref=a.ref, reviewer=a.reviewer, reason=a.reason)


def pause(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("pause")


def resume(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("resume")


def propose(c: ControlClient, a: argparse.Namespace) -> Any:
    text = Path(a.file).read_text(encoding="utf-8")
    return c.call("propose", name=str(a.file), text=text, dry_run=a.dry_run, rationale=a.rationale)


def policy_show(c: ControlClient, a: argparse.Namespace) -> Any:
    return c.call("policy_show")


def policy_check(c: ControlClient, a: argparse.Namespace) -> Any:
    text = Path(a.file).read_text(encoding="utf-8")
    return c.call("policy_check", name=str(a.file), text=text)


def stop(c: ControlClient, a: argparse.Namespace) -> Any:
    result = c.call("stop")
    # The daemon closes every connection once it has drained and stopped serving.
    return dict(result) | {"stopped": c.wait_closed(STOP_WAIT_S)}


def _events_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=30)


def _ask_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("text")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "task", metavar="SUITE:ID", help="e.g. bfcl:simple:simple_python_3 or humaneval:HumanEval/0"
    )


def _label_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("request", type=int, metavar="REQUEST", help="the id 'ask' or 'run' printed")
    p.add_argument("--suite", required=True, help="the private suite's name (a-z 0-9 _ -)")
    p.add_argument(
        "--expected",
        required=True,
        help="the right answer: text for exact and regex checks (a pattern for regex), "
        "JSON for number, calls and python checks",
    )
    p.add_argument(
        "--check",
        default="exact",
        help="exact (default), number, regex, calls, python, or a JSON check object such as "
        '\'{"type": "exact", "casefold": true}\'',
    )
    p.add_argument("--id", help="the task's id (default: request-REQUEST)")


def _suite_export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("suite", metavar="NAME")
    p.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")


def _lineage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--candidates", type=int, default=10, help="recent candidates to list")


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="VERSION", help="v0003, or c12 for a candidate")


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a")
    p.add_argument("b")


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="report.html", help="where to write it (default report.html)")
    p.add_argument("--candidate", help="whose sequential test to plot (default: the newest)")


def _rollback_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", metavar="VERSION")
    p.add_argument("--reason", default="rollback by harnessctl")


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return f"uid {os.getuid()}"


def _decision_args(p: argparse.ArgumentParser, *, reason_required: bool) -> None:
    p.add_argument("ref", metavar="CANDIDATE", help="the candidate, e.g. c12")
    p.add_argument(
        "--as",
        dest="reviewer",
        default=_login(),
        help="who decides, as the lineage records it (default: your login name)",
    )
    if reason_required:
        p.add_argument("--reason", required=True, help="why (kept in the lineage)")
    else:
        p.add_argument("--reason", default="", help="why (optional; kept in the lineage)")


def _approve_args(p: argparse.ArgumentParser) -> None:
    _decision_args(p, reason_required=False)


def _reject_args(p: argparse.ArgumentParser) -> None:
    _decision_args(p, reason_required=True)


def _propose_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file")
    p.add_argument("--dry-run", action="store_true", help="static checks only; nothing recorded")
    p.add_argument("--rationale", default="", help="why this patch (kept in the lineage)")


def _file_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("file")


# Each verb of the protocol's table (``VERBS``: its command and help line) with what
# harnessctl does for it and the arguments it takes.
COMMANDS: dict[str, tuple[Call, Arguments | None]] = {
    "status": (status, None),
    "watch": (watch, None),
    "events": (events, _events_args),
    "ask": (ask, _ask_args),
    "run": (run, _run_args),
    "label": (label, _label_args),
    "suite_export": (suite_export, _suite_export_args),
    "lineage": (lineage, _lineage_args),
    "show": (show, _show_args),
    "diff": (diff, _diff_args),
    "report": (report, _report_args),
    "rollback": (rollback, _rollback_args),
    "review": (review, None),
    "approve": (approve, _approve_args),
    "reject": (reject, _reject_args),
    "pause": (pause, None),
    "resume": (resume, None),
    "propose": (propose, _propose_args),
    "policy_show": (policy_show, None),
    "policy_check": (policy_check, _file_arg),
    "stop": (stop, None),
}


def build_parser() -> argparse.ArgumentParser:
    """harnessctl's parser: a command per verb of ``VERBS``, in its order, with its help."""
    if set(COMMANDS) != set(VERBS):
        raise AssertionError(f"harnessctl and VERBS differ: {set(COMMANDS) ^ set(VERBS)}")
    parser = argparse.ArgumentParser(prog="harnessctl", description="Talk to a running harnessd.")
    parser.add_argument("--config", type=Path, help="harnessd config, to find the state dir")
    parser.add_argument("--state-dir", help="the daemon's state dir (overrides --config)")
    parser.add_argument("--socket", help="the control socket path (overrides the rest)")
    parser.add_argument("--json", action="store_true", help="print the daemon's reply as JSON")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    groups: dict[str, Any] = {}
    for name, verb in VERBS.items():
        where = sub
        if len(verb.command) == 2:
            group = verb.command[0]
            if group not in groups:
                groups[group] = sub.add_parser(group, help=COMMAND_GROUPS[group]).add_subparsers(
                    dest=f"{group}_verb", required=True, metavar="SUBVERB"
                )
            where = groups[group]
        p = where.add_parser(verb.command[-1], help=verb.help, description=verb.help)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
        call, arguments = COMMANDS[name]
        p.set_defaults(fn=call, view=name)
        if arguments is not None:
            arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        path = _socket_path(args)
        with ControlClient(
            # policy check computes power: seconds of CPU, far longer on a loaded machine
            path,
            timeout=None if args.view in _UNBOUNDED else 30,
        ) as c:
            result = args.fn(c, args)
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
    if result is None:
        return 0
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        ctlview.render(args.view, result, out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "100")
    sys.exit(main())
