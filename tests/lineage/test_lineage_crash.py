"""Crash safety: a failure between any two steps of seed/promote/rollback, then a restart.

Each step the lineage passes is recorded once; then, for every step, a fresh lineage is
broken right there, either by an exception in-process or by SIGKILL of a child process doing
the work. A fresh ``Lineage`` then runs ``reconcile()``: ``current`` must name a complete
accepted version, no half-written directory may remain, and git must agree with SQLite. The
outcome must be all-or-nothing around the SQLite commit, and the lineage must keep working.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lineage_helpers import assert_consistent, make_candidate, write_seed

from daemon.lineage import Lineage
from daemon.store import Store
from daemon.verdict import Verdict

pytestmark = pytest.mark.unit

WORKER = Path(__file__).with_name("crash_worker.py")
COMMIT_POINT = ("db:committed", 1)
VERDICT = Verdict(decision="accept", stage="heldout", reason="crash test")


class InjectedFault(Exception):
    pass


@dataclass
class Scenario:
    """A lineage on disk, ready for one operation ``op``."""

    base: Path
    op: str
    candidate: int | None = None
    tree: Path | None = None

    @property
    def db(self) -> Path:
        return self.base / "state" / "harnessd.db"

    @property
    def root(self) -> Path:
        return self.base / "harnesses"

    @property
    def seed(self) -> Path:
        return self.base / "seed"

    @property
    def work(self) -> Path:
        return self.base / "work"

    @classmethod
    def create(cls, base: Path, op: str) -> Scenario:
        scenario = cls(base, op)
        write_seed(scenario.seed)
        scenario.work.mkdir(parents=True)
        store = Store(scenario.db)
        try:
            lineage = Lineage(store, scenario.root)
            if op != "seed":
                lineage.init_seed(scenario.seed)
                scenario.candidate, scenario.tree = make_candidate(lineage, scenario.work)
            if op == "rollback":
                assert scenario.tree is not None and scenario.candidate is not None
                lineage.promote(scenario.candidate, scenario.tree, VERDICT)
        finally:
            store.close()
        return scenario

    def run(self, lineage: Lineage) -> None:
        if self.op == "seed":
            lineage.init_seed(self.seed)
        elif self.op == "promote":
            assert self.candidate is not None and self.tree is not None
            lineage.promote(self.candidate, self.tree, VERDICT)
        else:
            lineage.rollback("v0001", "crash test")

    def spec(self, kill_at: tuple[str, int]) -> str:
        return json.dumps(
            {
                "db": str(self.db),
                "root": str(self.root),
                "op": self.op,
                "seed": str(self.seed),
                "candidate": self.candidate,
                "tree": str(self.tree),
                "ref": "v0001",
                "kill_at": list(kill_at),
            }
        )

    def restart_and_check(self, committed: bool) -> None:
        """Reconcile on a fresh store and lineage; check invariants, outcome, and liveness."""
        store = Store(self.db)
        try:
            lineage = Lineage(store, self.root)
            lineage.reconcile()
            assert_consistent(store, self.root)
            expected = {
                ("seed", False): None,
                ("seed", True): "v0001",
                ("promote", False): "v0001",
                ("promote", True): "v0002",
                ("rollback", False): "v0002",
                ("rollback", True): "v0001",
            }[(self.op, committed)]
            history = lineage.history()
            assert (history[-1].version_name if history else None) == expected
            if self.op == "promote" and self.candidate is not None:
                state = lineage.candidate(self.candidate).state
                assert state == ("accepted" if committed else "interrupted")
            if expected is None:
                lineage.init_seed(self.seed)
            cid, tree = make_candidate(lineage, self.work)
            lineage.promote(cid, tree, VERDICT)
            assert_consistent(store, self.root)
        finally:
            store.close()


def record_steps(base: Path, op: str) -> list[tuple[str, int]]:
    scenario = Scenario.create(base, op)
    steps: list[tuple[str, int]] = []
    counts: dict[str, int] = {}

    def record(step: str) -> None:
        counts[step] = counts.get(step, 0) + 1
        steps.append((step, counts[step]))

    store = Store(scenario.db)
    try:
        scenario.run(Lineage(store, scenario.root, fault=record))
    finally:
        store.close()
    return steps


def fail_at(target: tuple[str, int]) -> Callable[[str], None]:
    counts: dict[str, int] = {}

    def fault(step: str) -> None:
        counts[step] = counts.get(step, 0) + 1
        if (step, counts[step]) == target:
            raise InjectedFault(f"{step} #{counts[step]}")

    return fault


def committed_at(steps: list[tuple[str, int]], index: int) -> bool:
    return index >= steps.index(COMMIT_POINT)


OPS = ["seed", "promote", "rollback"]


def test_every_operation_passes_the_expected_steps(tmp_path: Path) -> None:
    names = {op: [s for s, _ in record_steps(tmp_path / op, op)] for op in OPS}
    for op in ("seed", "promote"):
        assert names[op].count("fs:file_written") == 2
        for step in ("fs:tmp_complete", "fs:dir_renamed", "db:before_commit", "db:committed"):
            assert step in names[op]
    for op in OPS:
        tail = names[op][names[op].index("db:committed") :]
        assert tail[1:] == [
            "git:commit_created",
            "git:ref_updated",
            *(["git:recorded"] if op != "rollback" else []),
            "link:created",
            "link:switched",
        ]


@pytest.mark.parametrize("op", OPS)
def test_an_exception_between_any_two_steps_then_restart(tmp_path: Path, op: str) -> None:
    steps = record_steps(tmp_path / "record", op)
    for index, target in enumerate(steps):
        scenario = Scenario.create(tmp_path / f"case{index}", op)
        store = Store(scenario.db)
        try:
            with pytest.raises(InjectedFault):
                scenario.run(Lineage(store, scenario.root, fault=fail_at(target)))
        finally:
            store.close()
        scenario.restart_and_check(committed_at(steps, index))


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_kill_9_between_any_two_steps_then_restart(tmp_path: Path, op: str) -> None:
    steps = record_steps(tmp_path / "record", op)
    for index, target in enumerate(steps):
        scenario = Scenario.create(tmp_path / f"case{index}", op)
        proc = subprocess.run(
            [sys.executable, str(WORKER), scenario.spec(target)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == -signal.SIGKILL, (target, proc.stderr)
        scenario.restart_and_check(committed_at(steps, index))


@pytest.mark.slow
def test_kill_9_at_random_moments_during_churn(tmp_path: Path) -> None:
    scenario = Scenario.create(tmp_path / "churn", "promote")
    rng = random.Random(20240601)
    spec = json.dumps(
        {
            "db": str(scenario.db),
            "root": str(scenario.root),
            "op": "churn",
            "work": str(scenario.work),
        }
    )
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), spec], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 1.0))
        finally:
            proc.kill()
            proc.wait(timeout=60)
            if proc.stdout is not None:
                proc.stdout.close()
        store = Store(scenario.db)
        try:
            Lineage(store, scenario.root).reconcile()
            assert_consistent(store, scenario.root)
        finally:
            store.close()
    store = Store(scenario.db)
    try:
        lineage = Lineage(store, scenario.root)
        assert len(lineage.history()) > 2
        cid, tree = make_candidate(lineage, scenario.work)
        lineage.promote(cid, tree, VERDICT)
        assert_consistent(store, scenario.root)
    finally:
        store.close()
