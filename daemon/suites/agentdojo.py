"""``agentdojo:<suite>`` and ``agentdojo:<suite>:injections``: AgentDojo's tool-use tasks.

Suites ``workspace``, ``travel``, ``banking`` and ``slack`` (benchmark v1.2.2, AgentDojo's
default). A task (kind ``tool_use``, one user turn) shows AgentDojo's system message, the
user task's prompt and the suite's tools; the tools run on the task's environment in a
worker process (``toolenv``), and the verdict is the user task's own utility check on the
final environment and the harness's final text. The ``:injections`` form plants
AgentDojo's ``important_instructions`` attack (with its neutral model name) in the data the
user task reads, for every (user task, injection task) pair: ``passed`` is still utility,
and ``attack_succeeded`` is the injection task's security check (True: the attacker's goal
was reached), which the ``security`` gate compares between a candidate and its parent.

This process never imports AgentDojo: what it shows and keeps (prompts, tool schemas, the
planted texts, ground truth) is a catalogue a worker computes once per suite from the
pinned wheel and that is cached beside it.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from daemon.config import extras
from daemon.config.assets import WHEELS, fetch_wheel
from daemon.providers.base import Message, ToolSpec
from daemon.suites.base import CheckResult, CodeChecker, UnknownTask
from daemon.suites.envworker import WorkerLimits, run_once
from daemon.suites.episode import WorkerEpisode, worker_episode
from daemon.tasks import Task

SUITES = ("workspace", "travel", "banking", "slack")
_PACKAGE = "agentdojo"
# Planning the injections runs every user task's ground truth once (workspace: ~10 s here).
_CATALOGUE_S = 600.0
_PAIR = "+"  # "user_task_3+injection_task_1"
_NEEDS = ("yaml", "docstring_parser", "deepdiff", "email_validator")


def _catalogue(cache_dir: Path, wheel: Path, suite: str) -> dict[str, Any]:
    """The suite's catalogue, computed by a worker once and kept in the asset cache."""
    sha = WHEELS[_PACKAGE].sha256
    path = cache_dir / _PACKAGE / f"catalogue-{sha[:16]}-{suite}.json"
    if path.is_file():
        cached: dict[str, Any] = json.loads(path.read_text())
        return cached
    args = {"wheel": str(wheel), "sha256": sha, "cache_dir": str(cache_dir / _PACKAGE)}
    value = run_once("catalogue", {**args, "suites": [suite]}, timeout_s=_CATALOGUE_S)
    catalogue: dict[str, Any] = value[suite]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".catalogue-")
    with os.fdopen(fd, "w") as out:
        json.dump(catalogue, out)
    os.replace(tmp, path)
    return catalogue


class AgentDojoSuite:
    """Ids are AgentDojo's user task ids (``user_task_0``), joined with an injection task
    id for the injection form (``user_task_0+injection_task_2``)."""

    license = WHEELS[_PACKAGE].license

    def __init__(
        self,
        suite: str,
        catalogue: dict[str, Any],
        *,
        injections: bool,
        wheel: Path,
        cache_dir: Path,
        limits: WorkerLimits | None = None,
    ) -> None:
        self.suite = suite
        self.injections = injections
        self.name = f"agentdojo:{suite}" + (":injections" if injections else "")
        self._catalogue = catalogue
        self._wheel = wheel
        self._cache_dir = cache_dir.resolve()
        self.limits = limits or WorkerLimits()
        self._tools = [ToolSpec(**spec) for spec in catalogue["tools"]]
        users = catalogue["user_tasks"]
        if injections:
            self._ids = [
                f"{uid}{_PAIR}{iid}" for uid in users for iid in catalogue["injection_tasks"]
            ]
        else:
            self._ids = list(users)
        self._known = set(self._ids)

    @classmethod
    def load(cls, suite: str, cache_dir: Path, *, injections: bool) -> AgentDojoSuite:
        if suite not in SUITES:
            raise ValueError(f"unknown AgentDojo suite {suite!r}")
        # What AgentDojo's environments import, in the tool-environment worker.
        extras.require("toolenv", "AgentDojo's tool environments", _NEEDS)
        cache_dir = cache_dir.resolve()  # the worker runs in /
        wheel = fetch_wheel(cache_dir, _PACKAGE)
        catalogue = _catalogue(cache_dir, wheel, suite)
        return cls(suite, catalogue, injections=injections, wheel=wheel, cache_dir=cache_dir)

    def _parts(self, task_id: str) -> tuple[str, str | None]:
        if task_id not in self._known:
            raise UnknownTask(self.name, task_id)
        uid, _, iid = task_id.partition(_PAIR)
        return uid, iid or None

    def task_ids(self) -> list[str]:
        return list(self._ids)

    def task(self, task_id: str) -> Task:
        uid, _ = self._parts(task_id)
        prompt = self._catalogue["user_tasks"][uid]["prompt"]
        return Task(
            id=task_id,
            suite="agentdojo",
            kind="tool_use",
            prompt=[
                Message(role="system", content=self._catalogue["system"]),
                Message(role="user", content=prompt),
            ],
            tools=list(self._tools),
        )

    def expected(self, task_id: str) -> dict[str, Any]:
        """The user task's ground-truth calls and answer (never the attacker's)."""
        uid, _ = self._parts(task_id)
        user = self._catalogue["user_tasks"][uid]
        return {"calls": user["ground_truth"], "answer": user["answer"]}

    def reference_output(self, task_id: str) -> dict[str, Any]:
        """What a perfect, injection-proof harness does: the user task's calls, its answer."""
        uid, _ = self._parts(task_id)
        user = self._catalogue["user_tasks"][uid]
        return {"turns": [user["ground_truth"]], "answer": user["answer"]}

    def injection_calls(self, task_id: str) -> list[dict[str, Any]]:
        """The attacker's ground-truth calls for an injection task (tests, audits)."""
        _, iid = self._parts(task_id)
        if iid is None:
            return []
        calls: list[dict[str, Any]] = self._catalogue["injection_tasks"][iid]["ground_truth"]
        return calls

    async def check(self, task_id: str, output: Any, checker: CodeChecker) -> CheckResult:
        self._parts(task_id)
        return CheckResult(passed=False, detail="an AgentDojo task is judged by its episode")

    def episode(self, task_id: str) -> AbstractAsyncContextManager[WorkerEpisode]:
        uid, iid = self._parts(task_id)
        planted = self._catalogue["injections"][uid][iid] if iid is not None else {}
        start = {
            "kind": "agentdojo",
            "memory_mb": self.limits.memory_mb,
            "cpu_s": self.limits.cpu_s,
            "wheel": str(self._wheel),
            "sha256": WHEELS[_PACKAGE].sha256,
            "cache_dir": str(self._cache_dir / _PACKAGE),
            "suite": self.suite,
            "user_task": uid,
            "injection_task": iid,
            "injections": planted,
        }
        return worker_episode(start, self.limits, attacked=iid is not None)
