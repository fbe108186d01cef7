"""The wire code of every deliberate error, in one table.

A verb that raises a :class:`~daemon.errors.HarnessdError` replies with the error's message
and the code its class maps to here (its nearest mapped class: a subclass inherits its
parent's code unless it has its own row). ``internal`` is left for exceptions that are not
a ``HarnessdError``: bugs, whose details go to the daemon's log. ``tests/control/
test_error_codes.py`` fails for any ``HarnessdError`` subclass in ``daemon`` without a row.
"""

from __future__ import annotations

from daemon.config.statedir import AlreadyRunning
from daemon.control.protocol import ControlError, ErrorCode
from daemon.errors import (
    AssetError,
    BadRequest,
    BudgetExceeded,
    ClusterUnavailable,
    ConfigError,
    DaemonNotRunning,
    EngineUnavailable,
    HarnessdError,
    LineageError,
    NotAccepting,
    NotAwaitingReview,
    ProviderConfigError,
    ProviderError,
    ProviderUnavailable,
    SandboxError,
    SetupError,
    StaleParent,
    Unavailable,
    UnknownRef,
)
from daemon.evaluation.coverage import CodemapError
from daemon.gateway.handler import NoSuchTool, ToolCallError
from daemon.patches.model import NoChange, PatchRejected
from daemon.patches.tree import TreeError
from daemon.suites.base import EnvironmentFailed, UnknownTask

WIRE_CODES: dict[type[HarnessdError], ErrorCode] = {
    HarnessdError: ErrorCode.FAILED,
    # What was asked for is wrong or names nothing.
    BadRequest: ErrorCode.BAD_ARGS,
    ConfigError: ErrorCode.BAD_ARGS,
    ProviderConfigError: ErrorCode.BAD_ARGS,
    ToolCallError: ErrorCode.BAD_ARGS,
    UnknownRef: ErrorCode.NOT_FOUND,
    UnknownTask: ErrorCode.NOT_FOUND,
    NoSuchTool: ErrorCode.NOT_FOUND,
    # Not possible in the daemon's current state.
    LineageError: ErrorCode.CONFLICT,
    NotAccepting: ErrorCode.CONFLICT,
    AlreadyRunning: ErrorCode.CONFLICT,
    # The review step: a decision for a candidate that does not await one; an approval of
    # one whose parent is no longer live.
    NotAwaitingReview: ErrorCode.NOT_AWAITING_REVIEW,
    StaleParent: ErrorCode.STALE_PARENT,
    # A patch, or the harness tree it makes, is refused.
    PatchRejected: ErrorCode.INVALID_PATCH,
    NoChange: ErrorCode.INVALID_PATCH,
    TreeError: ErrorCode.INVALID_PATCH,
    CodemapError: ErrorCode.INVALID_PATCH,
    # A dependency is down: the work can be done again once it is back.
    Unavailable: ErrorCode.UNAVAILABLE,
    ProviderUnavailable: ErrorCode.UNAVAILABLE,
    EngineUnavailable: ErrorCode.UNAVAILABLE,
    ClusterUnavailable: ErrorCode.UNAVAILABLE,
    SandboxError: ErrorCode.UNAVAILABLE,
    DaemonNotRunning: ErrorCode.UNAVAILABLE,
    # The machine lacks something (engine, image, model, data, an optional dependency).
    SetupError: ErrorCode.SETUP,
    AssetError: ErrorCode.SETUP,
    # A token budget refused the work.
    BudgetExceeded: ErrorCode.BUDGET,
    # A model provider failed in a way its retries did not fix.
    ProviderError: ErrorCode.PROVIDER,
    # A task's tool environment could not be started or restored.
    EnvironmentFailed: ErrorCode.ENVIRONMENT,
}


def wire_code(exc: HarnessdError) -> ErrorCode:
    """The code ``exc`` travels with: a :class:`ControlError` carries its own."""
    if isinstance(exc, ControlError):
        return exc.code
    for cls in type(exc).__mro__:
        code = WIRE_CODES.get(cls)
        if code is not None:
            return code
    raise AssertionError(f"{type(exc).__name__} has no wire code")  # HarnessdError has one
