"""``harnessctl``: attach to a running harnessd over its control socket.

One function per verb; each prints for people (rich) or, with ``--json``, the daemon's reply
as JSON. Exit codes: 0 ok, 1 the daemon refused (error code and message printed), 2 usage
or config error, 3 daemon not running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from daemon.control import views as ctlview
from daemon.control.client import ControlClient
from daemon.control.protocol import SOCKET_NAME, ControlError
from daemon.errors import HarnessdError

# Soft wrap: a line (a path, a verdict) is never broken by rich at 80 columns when output goes
# to a pipe or a file; the terminal wraps what is too long for it.
out = Console(highlight=False, soft_wrap=True)

# How long ``harnessctl stop`` waits for the daemon to close its connections.
STOP_WAIT_S = 30.0

Verb = Callable[[ControlClient, argparse.Namespace], Any]


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harnessctl", description="Talk to a running harnessd.")
    parser.add_argument("--config", type=Path, help="harnessd config, to find the state dir")
    parser.add_argument("--state-dir", help="the daemon's state dir (overrides --config)")
    parser.add_argument("--socket", help="the control socket path (overrides the rest)")
    parser.add_argument("--json", action="store_true", help="print the daemon's reply as JSON")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def add(name: str, fn: Verb, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
        p.set_defaults(fn=fn, view=name)
        return p

    add("status", status, "live version, scores per model, activity, budgets")
    add("watch", watch, "stream events with progress bars (Ctrl-C to leave)")
    add("events", events, "recent events").add_argument("--limit", type=int, default=30)
    add("ask", ask, "answer a question with the live harness").add_argument("text")
    add("run", run, "run one suite task with the live harness").add_argument(
        "task", metavar="SUITE:ID", help="e.g. bfcl:simple:simple_python_3 or humaneval:HumanEval/0"
    )
    p = add("label", label, "make a served request a task of a private suite")
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
    suite = sub.add_parser("suite", help="private suites made of labelled requests")
    suite_sub = suite.add_subparsers(dest="suite_verb", required=True, metavar="SUBVERB")
    p = suite_sub.add_parser("export", help="a labelled suite in the task-file format")
    p.add_argument("suite", metavar="NAME")
    p.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(fn=suite_export, view="suite_export")
    add("lineage", lineage, "the version tree").add_argument(
        "--candidates", type=int, default=10, help="recent candidates to list"
    )
    add("show", show, "a version or candidate: patch, rationale, reports, verdict").add_argument(
        "ref", metavar="VERSION", help="v0003, or c12 for a candidate"
    )
    p = add("diff", diff, "diff between two versions")
    p.add_argument("a")
    p.add_argument("b")
    p = add("report", report, "write the lineage report: one self-contained HTML file")
    p.add_argument("--out", default="report.html", help="where to write it (default report.html)")
    p.add_argument("--candidate", help="whose sequential test to plot (default: the newest)")
    p = add("rollback", rollback, "make an earlier accepted version live")
    p.add_argument("ref", metavar="VERSION")
    p.add_argument("--reason", default="rollback by harnessctl")
    add("pause", pause, "pause the improvement loop")
    add("resume", resume, "resume the improvement loop")
    p = add("propose", propose, "submit a patch file to the candidate pipeline")
    p.add_argument("file")
    p.add_argument("--dry-run", action="store_true", help="static checks only; nothing recorded")
    p.add_argument("--rationale", default="", help="why this patch (kept in the lineage)")
    policy = sub.add_parser("policy", help="show or check policies").add_subparsers(
        dest="policy_verb", required=True, metavar="SUBVERB"
    )
    p = policy.add_parser("show", help="the policy in force")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(fn=policy_show, view="policy_show")
    p = policy.add_parser("check", help="validate a policy file against the daemon")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(fn=policy_check, view="policy_check")
    add("stop", stop, "drain and stop the daemon")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        path = _socket_path(args)
        with ControlClient(
            # policy check computes power: seconds of CPU, far longer on a loaded machine
            path,
            timeout=None if args.verb in ("ask", "run", "propose", "report", "policy") else 30,
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
