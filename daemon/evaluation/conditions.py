"""Every condition that changes an evaluation's result, as one key.

A parent's stored report is reused as the baseline only when the candidate runs under
exactly the same conditions: the harness tree, the suite and its data, the tasks, the
model, the sandbox limits and token budgets, the sandbox image, the guest runtime, and the
way results are scored. Anything less and a stale baseline (an older image, a tighter
budget, other task data) would be compared with a fresh candidate run.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from daemon.config.policy import Policy
from daemon.evaluation.taskrun import GUEST_DIR
from daemon.suites.base import Suite

SCORING_VERSION = 6
"""Bump when what a task result records changes (2: provenance of solves; 3: provenance
sees disguised injections and checks all of a code answer; 4: and every tool call of a
multi-step task; 5: values the task states are its own, a harness's fixed block is its
design, relayed pairings and echoes support nothing; 6: an enum value snapped only to the
nearest option, free-text answers checked, an option the harness singled out its own)."""

_lock = threading.Lock()
_suite_prints: dict[tuple[str, int], str] = {}
_guest_print: list[str] = []


def _sha(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def suite_fingerprint(suite: Suite) -> str:
    """A hash of every task the suite offers and its ground truth (computed once per suite)."""
    key = (suite.name, id(suite))
    with _lock:
        known = _suite_prints.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256(suite.name.encode())
    for task_id in sorted(suite.task_ids()):
        digest.update(suite.task(task_id).model_dump_json().encode())
        digest.update(json.dumps(suite.expected(task_id), sort_keys=True, default=str).encode())
    value = digest.hexdigest()
    with _lock:
        _suite_prints[key] = value
    return value


def guest_fingerprint() -> str:
    """A hash of the guest runtime's files, which are mounted into every task container."""
    with _lock:
        if _guest_print:
            return _guest_print[0]
    digest = hashlib.sha256()
    for path in sorted(GUEST_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(GUEST_DIR)).encode())
            digest.update(path.read_bytes())
    value = digest.hexdigest()
    with _lock:
        _guest_print[:] = [value]
    return value


def run_conditions(
    *,
    policy: Policy,
    image: str,
    suite: Suite,
    task_ids: list[str],
    model: str,
    tree_hash: str,
) -> dict[str, Any]:
    """The conditions of one evaluation. Blocking (it may hash the suite): worker thread."""
    box, budget = policy.sandbox, policy.budget
    return {
        "tree": tree_hash,
        "suite": suite.name,
        "suite_data": suite_fingerprint(suite),
        "tasks": _sha(task_ids),
        "model": model,
        "limits": {
            "memory_mb": box.memory_mb,
            "cpus": box.cpus,
            "pids": box.pids,
            "tmpfs_mb": box.tmpfs_mb,
            "wall_s": box.wall_s,
            "output_kb": box.output_kb,
        },
        "budgets": {
            "tokens_per_task": budget.tokens_per_task,
            "tokens_per_eval": budget.tokens_per_eval,
        },
        "image": image,
        "guest": guest_fingerprint(),
        "scoring": SCORING_VERSION,
    }


def conditions_key(conditions: dict[str, Any]) -> str:
    return _sha(conditions)
