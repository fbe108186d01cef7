"""The control socket's wire contract, shared by the daemon and ``harnessctl``.

Newline-delimited JSON frames (transport: :mod:`daemon.jsonlines`), versioned on their own:
the control protocol's version moves with harnessctl, not with the guest protocol. A request is
``{"v": 1, "id": <scalar>, "verb": "<verb>", "args": {...}}``; the reply echoes ``id`` with
``"ok": true, "result": ...`` or ``"ok": false, "error": {"code", "message"}``. ``watch``
replies once, then streams ``{"v": 1, "event": {...}}`` frames until the client leaves.
The verbs and their arguments are declared in :mod:`daemon.control.verbs`.
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


class ControlError(HarnessdError):
    """A verb failed in a way the client should see, with a code from the closed set."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def ok_reply(req_id: Any, result: Any) -> dict[str, Any]:
    return ok_frame(PROTOCOL_VERSION, req_id, result)


def error_reply(req_id: Any, code: str, message: str) -> dict[str, Any]:
    return error_frame(PROTOCOL_VERSION, req_id, code, message)
