"""The control socket's wire contract, shared by the daemon and ``harnessctl``.

Newline-delimited JSON frames (transport: :mod:`daemon.jsonlines`), versioned on their own:
the control protocol's version moves with harnessctl, not with the guest protocol. A request is
``{"v": 1, "id": <scalar>, "verb": "<verb>", "args": {...}}``; the reply echoes ``id`` with
``"ok": true, "result": ...`` or ``"ok": false, "error": {"code", "message"}``. ``watch``
replies once, then streams ``{"v": 1, "event": {...}}`` frames until the client leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from daemon.errors import HarnessdError
from daemon.jsonlines import error_frame, ok_frame

__all__ = [
    "COMMAND_GROUPS",
    "MAX_MESSAGE",
    "PROTOCOL_VERSION",
    "SOCKET_NAME",
    "VERBS",
    "ControlError",
    "ErrorCode",
    "Verb",
    "error_reply",
    "ok_reply",
]

PROTOCOL_VERSION = 1

SOCKET_NAME = "control.sock"
MAX_MESSAGE = 1 << 20  # 1 MiB per frame, both directions


class ErrorCode(StrEnum):
    """The closed set of error codes a reply may carry."""

    BAD_FRAME = "bad_frame"  # not a JSON object on one line
    TOO_LARGE = "too_large"  # frame over MAX_MESSAGE
    UNSUPPORTED_VERSION = "unsupported_version"
    UNKNOWN_VERB = "unknown_verb"
    BAD_ARGS = "bad_args"  # arguments missing or of the wrong form
    NOT_FOUND = "not_found"  # no such version, candidate, task or suite
    CONFLICT = "conflict"  # not possible in the current state (e.g. rollback to current)
    # A review decision for a candidate that does not await review (or another way of
    # deciding one that does).
    NOT_AWAITING_REVIEW = "not_awaiting_review"
    # The candidate's parent is no longer live: its evidence is about another version.
    STALE_PARENT = "stale_parent"
    INVALID_POLICY = "invalid_policy"
    INVALID_PATCH = "invalid_patch"
    FORBIDDEN = "forbidden"  # peer uid differs from the daemon's
    UNAVAILABLE = "unavailable"  # a dependency (engine, model, cluster) is down
    SETUP = "setup"  # the machine lacks something: engine, image, model, data, an extra
    BUDGET = "budget"  # a token budget refused the work
    PROVIDER = "provider"  # a model provider failed in a way its retries did not fix
    ENVIRONMENT = "environment"  # a task's tool environment could not be started or restored
    FAILED = "failed"  # any other deliberate error: its message says what to do
    INTERNAL = "internal"  # a bug (not a deliberate error): details are in the daemon's log


@dataclass(frozen=True)
class Verb:
    """One control verb: its name on the wire, how ``harnessctl`` spells it, what it does."""

    command: tuple[str, ...]  # harnessctl's words: ("status",), ("policy", "show")
    help: str  # one line: harnessctl's help and description for the command


# The one table of verbs: the daemon serves exactly these (``unknown_verb`` otherwise), and
# harnessctl's parser takes its commands and help lines from it (``ctl.build_parser``).
VERBS: dict[str, Verb] = {
    "status": Verb(("status",), "live version, its scores per model, activity, budgets, paused"),
    "watch": Verb(("watch",), "stream events as they happen, with progress bars (Ctrl-C leaves)"),
    "events": Verb(("events",), "recent events from the log"),
    "ask": Verb(("ask",), "answer a free-text question with the live harness"),
    "run": Verb(("run",), "run one suite task (SUITE:ID) with the live harness, verified"),
    "label": Verb(
        ("label",), "make a served request a task of a private suite (expected answer, check)"
    ),
    "suite_export": Verb(
        ("suite", "export"), "a private suite of labelled requests, in the task-file format"
    ),
    "lineage": Verb(("lineage",), "the version tree and recent candidates with their verdicts"),
    "show": Verb(("show",), "one version or candidate: patch, rationale, reports, verdict"),
    "diff": Verb(("diff",), "what changed between two versions"),
    "report": Verb(("report",), "write the lineage report: one self-contained HTML file"),
    "rollback": Verb(("rollback",), "make an earlier accepted version live (recorded)"),
    "review": Verb(
        ("review",), "candidates awaiting review ([gates.review]), with their diff and verdict"
    ),
    "approve": Verb(("approve",), "promote a candidate awaiting review (recorded as yours)"),
    "reject": Verb(("reject",), "reject a candidate awaiting review, with your reason"),
    "pause": Verb(("pause",), "pause the improvement loop"),
    "resume": Verb(("resume",), "resume the improvement loop"),
    "propose": Verb(("propose",), "submit a patch file to the candidate pipeline"),
    "policy_show": Verb(("policy", "show"), "the policy in force"),
    "policy_check": Verb(
        ("policy", "check"), "validate a policy file, with the gains it can detect; nothing applied"
    ),
    "stop": Verb(("stop",), "drain and stop the daemon"),
}

# harnessctl's command groups (the first word of a two-word command) and their help lines.
COMMAND_GROUPS: dict[str, str] = {
    "suite": "private suites made of labelled requests",
    "policy": "show or check policies",
}


class ControlError(HarnessdError):
    """A verb failed in a way the client should see, with a code from the closed set."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def ok_reply(req_id: Any, result: Any) -> dict[str, Any]:
    return ok_frame(PROTOCOL_VERSION, req_id, result)


def error_reply(req_id: Any, code: str, message: str) -> dict[str, Any]:
    return error_frame(PROTOCOL_VERSION, req_id, code, message)
