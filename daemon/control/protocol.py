"""The control socket's wire contract, shared by the daemon and ``harnessctl``.

Newline-delimited JSON frames (transport: :mod:`daemon.jsonlines`), versioned on their own:
the control protocol's version moves with harnessctl, not with the guest protocol. A request is
``{"v": 1, "id": <scalar>, "verb": "<verb>", "args": {...}}``; the reply echoes ``id`` with
``"ok": true, "result": ...`` or ``"ok": false, "error": {"code", "message"}``. ``watch``
replies once, then streams ``{"v": 1, "event": {...}}`` frames until the client leaves.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from daemon.errors import HarnessdError
from daemon.jsonlines import error_frame, ok_frame

__all__ = [
    "MAX_MESSAGE",
    "PROTOCOL_VERSION",
    "SOCKET_NAME",
    "VERBS",
    "ControlError",
    "ErrorCode",
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
    INVALID_POLICY = "invalid_policy"
    INVALID_PATCH = "invalid_patch"
    FORBIDDEN = "forbidden"  # peer uid differs from the daemon's
    UNAVAILABLE = "unavailable"  # a dependency (engine, model) is down
    INTERNAL = "internal"  # a bug: details are in the daemon's log


# verb -> one-line description (also the source of harnessctl's help).
VERBS: dict[str, str] = {
    "status": "live version, its scores per model, activity, budgets, paused or not",
    "watch": "stream events as they happen",
    "events": "recent events from the log",
    "ask": "answer a free-text question with the live harness",
    "run": "run one suite task (SUITE:ID) with the live harness",
    "label": "make a served request a task of a private suite (expected answer and check)",
    "suite_export": "a private suite of labelled requests, in the task-file format",
    "lineage": "the version tree and recent candidates",
    "show": "one version or candidate: patch, rationale, reports, verdict",
    "diff": "diff between two versions",
    "report": "write the lineage report (one self-contained HTML file with plots)",
    "rollback": "make an earlier accepted version live",
    "pause": "pause the improvement loop",
    "resume": "resume the improvement loop",
    "propose": "submit a patch to the candidate pipeline",
    "policy_show": "the policy in force",
    "policy_check": "validate a policy file without applying it",
    "stop": "drain and stop the daemon",
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
