"""The check rules of file suites that run on the host: ``exact``, ``number``, ``regex``.

Each rule is parsed from a task line's ``check`` object (:func:`parse_rule`, which raises
:class:`BadKey` naming the key and what is expected) and judges an untrusted output with
plain comparisons. Details never quote the expected answer: they may be shown for
held-out tasks, where the ground truth must stay hidden.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from daemon.tasks import CheckResult

CHECK_TYPES = ("exact", "number", "regex", "calls", "python")
DEFAULT_TOL = 1e-6
# Outputs longer than this are not searched with a pattern: a user's pattern with nested
# quantifiers on a long hostile output could hold a worker thread for hours.
REGEX_MAX_CHARS = 65_536
# The first number in a text: an optional sign, digits with an optional fraction (or a bare
# fraction), an optional exponent. No thousands separators: "1,000" reads as 1.
NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


class BadKey(Exception):
    """A task line's value at ``key`` is not what is expected."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"key '{key}': {problem}")
        self.key = key
        self.problem = problem


def shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def as_text(value: Any) -> str:
    """A string as it is; any other JSON value as its compact JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


@dataclass(frozen=True)
class Exact:
    casefold: bool = False

    def check(self, output: Any, expected: Any) -> CheckResult:
        got, want = as_text(output).strip(), as_text(expected).strip()
        if self.casefold:
            got, want = got.casefold(), want.casefold()
        if got == want:
            return CheckResult(passed=True, detail="ok")
        how = " (ignoring case)" if self.casefold else ""
        return CheckResult(passed=False, detail=f"the output is not the expected text{how}")


@dataclass(frozen=True)
class Number:
    tol: float = DEFAULT_TOL

    def check(self, output: Any, expected: Any) -> CheckResult:
        if is_number(output):
            value = float(output)
        elif isinstance(output, str):
            match = NUMBER.search(output)
            if match is None:
                return CheckResult(passed=False, detail="the output holds no number")
            value = float(match.group())
        else:
            return CheckResult(passed=False, detail="the output is neither text nor a number")
        if math.isfinite(value) and abs(value - float(expected)) <= self.tol:
            return CheckResult(passed=True, detail="ok")
        return CheckResult(
            passed=False,
            detail=f"the first number in the output ({value:g}) is not within {self.tol:g} "
            "of the expected one",
        )


@dataclass(frozen=True)
class Regex:
    pattern: re.Pattern[str]

    def check(self, output: Any, expected: Any) -> CheckResult:
        text = as_text(output)
        if len(text) > REGEX_MAX_CHARS:
            return CheckResult(
                passed=False,
                detail=f"the output is {len(text)} characters, more than a regex check "
                f"reads ({REGEX_MAX_CHARS})",
            )
        if self.pattern.search(text) is not None:
            return CheckResult(passed=True, detail="ok")
        return CheckResult(passed=False, detail="the expected pattern does not match the output")


def _options(check: dict[str, Any], allowed: dict[str, type]) -> dict[str, Any]:
    """The check's keys besides ``type``, each of the type it must have."""
    for key, value in check.items():
        if key == "type":
            continue
        kind = allowed.get(key)
        if kind is None:
            names = ", ".join(["type", *allowed]) if allowed else "type"
            raise BadKey(
                f"check.{key}", f"unknown key for a '{check['type']}' check (allowed: {names})"
            )
        if (kind is float and is_number(value)) or type(value) is kind:
            continue
        raise BadKey(f"check.{key}", f"expected a {kind.__name__}, got {shown(value)}")
    return {k: v for k, v in check.items() if k != "type"}


def parse_host_rule(kind: str, check: dict[str, Any], expected: Any) -> Exact | Number | Regex:
    """An ``exact``, ``number`` or ``regex`` rule, with ``expected`` checked for it."""
    if kind == "exact":
        options = _options(check, {"casefold": bool})
        return Exact(casefold=options.get("casefold", False))
    if kind == "number":
        options = _options(check, {"tol": float})
        tol = float(options.get("tol", DEFAULT_TOL))
        if tol < 0:
            raise BadKey("check.tol", f"expected a number of at least 0, got {shown(tol)}")
        if not is_number(expected):
            raise BadKey("expected", f"a 'number' check needs a number, got {shown(expected)}")
        return Number(tol=tol)
    options = _options(check, {"ignorecase": bool})
    if not isinstance(expected, str) or not expected:
        raise BadKey("expected", f"a 'regex' check needs a pattern (text), got {shown(expected)}")
    flags = re.IGNORECASE if options.get("ignorecase") else 0
    try:
        return Regex(re.compile(expected, flags))
    except re.error as exc:
        raise BadKey("expected", f"not a valid regular expression: {exc}") from None
