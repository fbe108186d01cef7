"""Every control verb, declared once (the types: :mod:`daemon.control.registry`).

From this table come the verbs the daemon serves (``unknown_verb`` otherwise) and the check
of each request's arguments (``bad_args``), harnessctl's commands, options and help, the
view that prints each reply, and the list the daemon's handlers must cover
(:mod:`daemon.control.handlers`). Adding a verb is one ``VERBS.verb(...)`` here plus its
handler, ``@HANDLERS.on("<name>")``; a verb left without one stops the daemon at import.

The order is harnessctl's order in its help.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
from pathlib import Path
from typing import Any

from daemon.control import views
from daemon.control.client import ControlClient
from daemon.control.protocol import ControlError, ErrorCode
from daemon.control.registry import Arg, Registry, option, positional

__all__ = ["STOP_WAIT_S", "VERBS", "UsageError", "unknown"]

# How long ``harnessctl stop`` waits for the daemon to close its connections.
STOP_WAIT_S = 30.0


class UsageError(Exception):
    """An argument the daemon need not see to refuse (harnessctl exits 2)."""


VERBS = Registry()
VERBS.group("suite", "private suites made of labelled requests")
VERBS.group("policy", "show or check policies")

# ---- status and events -----------------------------------------------------------------------

VERBS.verb(
    "status",
    "live version, its scores per model, activity, budgets, paused",
    view=views.status,
    wide=True,
)
VERBS.verb(
    "watch",
    "stream events as they happen, with progress bars (Ctrl-C leaves)",
    view=views.watch,
    stream=True,
)
VERBS.verb(
    "events",
    "recent events from the log",
    args=(
        Arg(
            "limit",
            int,
            50,
            option("--limit", default=30, metavar="N", help="how many (default 30)"),
        ),
    ),
    view=views.events,
)

# ---- the live harness ------------------------------------------------------------------------

VERBS.verb(
    "ask",
    "answer a free-text question with the live harness",
    args=(Arg("text", str, cli=positional("the question")),),
    view=views.answer,
    unbounded=True,
)
VERBS.verb(
    "run",
    "run one suite task (SUITE:ID) with the live harness, verified",
    args=(
        Arg(
            "task",
            str,
            cli=positional(
                "e.g. bfcl:simple:simple_python_3 or humaneval:HumanEval/0", metavar="SUITE:ID"
            ),
        ),
    ),
    view=views.answer,
    unbounded=True,
)

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


def _label_request(a: argparse.Namespace) -> dict[str, Any]:
    check = _check(a.check)
    expected: Any = a.expected
    if check.get("type") not in _TEXT_EXPECTED:
        try:
            expected = json.loads(a.expected)
        except ValueError as exc:
            raise UsageError(
                f"--expected {a.expected!r}: a {check.get('type')!r} check takes JSON ({exc})"
            ) from None
    return {
        "request": a.request,
        "suite": a.suite,
        "expected": expected,
        "check": check,
        "id": a.id,
    }


VERBS.verb(
    "label",
    "make a served request a task of a private suite (expected answer, check)",
    args=(
        Arg("request", int, cli=positional("the id 'ask' or 'run' printed", metavar="REQUEST")),
        Arg(
            "suite",
            str,
            cli=option("--suite", required=True, help="the private suite's name (a-z 0-9 _ -)"),
        ),
        Arg(
            "expected",
            object,
            cli=option(
                "--expected",
                required=True,
                help="the right answer: text for exact and regex checks (a pattern for regex), "
                "JSON for number, calls and python checks",
            ),
        ),
        Arg(
            "check",
            dict,
            cli=option(
                "--check",
                default="exact",
                help="exact (default), number, regex, calls, python, or a JSON check object "
                'such as \'{"type": "exact", "casefold": true}\'',
            ),
        ),
        Arg("id", str, None, option("--id", help="the task's id (default: request-REQUEST)")),
    ),
    request=_label_request,
    view=views.label,
)


def _write_export(c: ControlClient, a: argparse.Namespace, result: Any) -> Any:
    if a.output is None:
        return result
    Path(a.output).write_text(result["text"], encoding="utf-8")
    return {k: v for k, v in result.items() if k != "text"} | {"written": str(a.output)}


VERBS.verb(
    "suite_export",
    "a private suite of labelled requests, in the task-file format",
    command=("suite", "export"),
    args=(
        Arg("suite", str, cli=positional(metavar="NAME")),
        Arg(
            "output",
            Path,
            None,
            option("-o", "--output", metavar="FILE", help="write to this file (default: stdout)"),
            sent=False,
        ),
    ),
    then=_write_export,
    view=views.suite_export,
)

# ---- lineage ---------------------------------------------------------------------------------

VERBS.verb(
    "lineage",
    "the version tree and recent candidates with their verdicts",
    args=(
        Arg(
            "candidates",
            int,
            10,
            option("--candidates", default=10, metavar="N", help="recent candidates to list"),
        ),
    ),
    view=views.lineage,
    wide=True,
)
VERBS.verb(
    "show",
    "one version or candidate: patch, rationale, reports, verdict",
    args=(Arg("ref", str, cli=positional("v0003, or c12 for a candidate", metavar="VERSION")),),
    view=views.show,
    wide=True,
)
VERBS.verb(
    "diff",
    "what changed between two versions",
    args=(Arg("a", str, cli=positional()), Arg("b", str, cli=positional())),
    view=views.diff,
)


def _report_request(a: argparse.Namespace) -> dict[str, Any]:
    from daemon.report import candidate_arg

    return {"out": str(Path(a.out).resolve()), "candidate": candidate_arg(a.candidate)}


VERBS.verb(
    "report",
    "write the lineage report: one self-contained HTML file",
    args=(
        Arg(
            "out",
            str,
            cli=option(
                "--out",
                default="report.html",
                metavar="FILE",
                help="where to write it (default report.html)",
            ),
        ),
        Arg(
            "candidate",
            int,
            None,
            option(
                "--candidate",
                metavar="CANDIDATE",
                help="whose sequential test to plot (default: the newest)",
            ),
        ),
    ),
    request=_report_request,
    view=views.report,
    unbounded=True,
)
VERBS.verb(
    "rollback",
    "make an earlier accepted version live (recorded)",
    args=(
        Arg("ref", str, cli=positional(metavar="VERSION")),
        Arg(
            "reason",
            str,
            "rollback by harnessctl",
            option("--reason", default="rollback by harnessctl", help="why (kept in the lineage)"),
        ),
    ),
    view=views.rollback,
)

# ---- review ([gates.review]) -----------------------------------------------------------------


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return f"uid {os.getuid()}"


_CANDIDATE = Arg("ref", str, cli=positional("the candidate, e.g. c12", metavar="CANDIDATE"))
_REVIEWER = Arg(
    "reviewer",
    str,
    cli=option(
        "--as",
        metavar="NAME",
        default_from=_login,
        help="who decides, as the lineage records it (default: your login name)",
    ),
)


def _reject_request(a: argparse.Namespace) -> dict[str, Any]:
    if not a.reason.strip():
        raise UsageError("reject needs --reason TEXT: why, in a sentence (kept in the lineage)")
    return {"ref": a.ref, "reviewer": a.reviewer, "reason": a.reason}


VERBS.verb(
    "review",
    "candidates awaiting review ([gates.review]), with their diff and verdict",
    view=views.review,
    wide=True,
)
VERBS.verb(
    "approve",
    "promote a candidate awaiting review (recorded as yours)",
    args=(
        _CANDIDATE,
        _REVIEWER,
        Arg(
            "reason",
            str,
            "",
            option("--reason", default="", help="why (optional; kept in the lineage)"),
        ),
    ),
    view=views.approve,
    unbounded=True,
)
VERBS.verb(
    "reject",
    "reject a candidate awaiting review, with your reason",
    args=(
        _CANDIDATE,
        _REVIEWER,
        Arg("reason", str, cli=option("--reason", required=True, help="why (kept in the lineage)")),
    ),
    request=_reject_request,
    view=views.reject,
)

# ---- the loop --------------------------------------------------------------------------------

VERBS.verb("pause", "pause the improvement loop", view=views.loop_switch)
VERBS.verb("resume", "resume the improvement loop", view=views.loop_switch)

_FILE = Arg("file", Path, cli=positional(), sent=False)


def _file_request(a: argparse.Namespace) -> dict[str, Any]:
    """A file's name and text: the daemon reads nothing of ours."""
    return {"name": str(a.file), "text": Path(a.file).read_text(encoding="utf-8")}


def _propose_request(a: argparse.Namespace) -> dict[str, Any]:
    return _file_request(a) | {"dry_run": a.dry_run, "rationale": a.rationale}


VERBS.verb(
    "propose",
    "submit a patch file to the candidate pipeline",
    args=(
        _FILE,
        Arg("name", str, None),
        Arg("text", str),
        Arg(
            "dry_run", bool, False, option("--dry-run", help="static checks only; nothing recorded")
        ),
        Arg(
            "rationale",
            str,
            "",
            option("--rationale", default="", help="why this patch (kept in the lineage)"),
        ),
    ),
    request=_propose_request,
    view=views.propose,
    unbounded=True,
)

# ---- policy and lifecycle --------------------------------------------------------------------

# Unbounded: power for the policy in force can take seconds of CPU, more on a loaded machine.
VERBS.verb(
    "policy_show",
    "the policy in force",
    command=("policy", "show"),
    view=views.policy_show,
    unbounded=True,
)
VERBS.verb(
    "policy_check",
    "validate a policy file, with the gains it can detect; nothing applied",
    command=("policy", "check"),
    args=(_FILE, Arg("name", str), Arg("text", str)),
    request=_file_request,
    view=views.policy_check,
    unbounded=True,
)


def _wait_stopped(c: ControlClient, a: argparse.Namespace, result: Any) -> Any:
    # The daemon closes every connection once it has drained and stopped serving.
    return dict(result) | {"stopped": c.wait_closed(STOP_WAIT_S)}


VERBS.verb("stop", "drain and stop the daemon", then=_wait_stopped, view=views.stop)


def unknown(verb: object) -> ControlError:
    """The refusal of a verb the table does not declare."""
    known = ", ".join(sorted(v.name for v in VERBS))
    return ControlError(ErrorCode.UNKNOWN_VERB, f"unknown verb {verb!r}; known: {known}")
