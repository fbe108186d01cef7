"""What the host asks of a code check, and what it gets back (plain types, no Docker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# passed: every check passed. failed: a check failed on the candidate's answers. error: the
# candidate raised, or its code did not load. refused: it sent something that is not plain
# data or broke the protocol. timeout: a call or the whole check ran out of time. crashed:
# its process ended or hung up. internal / no_verdict: the trusted side itself failed.
CheckKind = Literal[
    "passed", "failed", "error", "refused", "timeout", "crashed", "internal", "no_verdict"
]


@dataclass(frozen=True)
class CodeCheck:
    """One check: ``program`` (untrusted) must provide the function ``function``; the
    trusted ``checker_source`` defines ``checker``, which is called with a proxy of that
    function and passes by returning (any exception fails)."""

    program: str
    function: str
    checker_source: str
    checker: str = "check"
    timeout_s: float = 10.0  # the whole check, from the trusted side's start
    call_timeout_s: float | None = None  # one call; None: the whole check's limit

    def __post_init__(self) -> None:
        if not self.function.isidentifier() or not self.checker.isidentifier():
            raise ValueError(f"not Python names: {self.function!r}, {self.checker!r}")
        if not self.timeout_s > 0 or not (self.call_timeout_s or 1) > 0:
            raise ValueError("code check time limits must be positive")


@dataclass(frozen=True)
class CheckVerdict:
    """What the trusted side said (or why it said nothing). ``detail`` never quotes the
    checker's own messages or values."""

    passed: bool
    kind: CheckKind
    detail: str
    calls: int = 0  # calls the checker made to the candidate
    wall_s: float = 0.0
