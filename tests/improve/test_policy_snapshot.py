"""One policy per candidate, through the loop's real cycle: proposal, static stage, every
pipeline stage and the verdict read the snapshot the cycle began with, though the policy
file is edited (and reloaded) in the middle of the candidate.

The real loop, pipeline, evaluator, intake, lineage, alpha ledger and acceptance test run
here; only a task's sandboxed run is scripted (the candidate solves every task, its parent
none), so the test needs no Docker. Every policy handed to the runtime (suite, splits), to
an evaluation and to a task run (its sandbox limits) is recorded: each must be the cycle's
snapshot. The edited
policy would change what the candidate is measured on (other splits), reject its patch at
the static stage, and fail its token gate.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.config.policy import Policy, load_policy
from daemon.config.reload import PolicyHolder
from daemon.config.settings import load_settings
from daemon.evaluation import evaluator
from daemon.evaluation.report import TaskResult
from daemon.evaluation.runtime import Runtime, policy_sha256
from daemon.evaluation.taskrun import TaskRun
from daemon.gateway.session import GatewayRecord
from daemon.improve import live_replay, matched, modelfree, pipeline
from daemon.improve.loop import ImprovementLoop, LoopControl
from daemon.lineage import Lineage
from daemon.store import Store
from daemon.tasks import Submission
from sandbox.container import ContainerOutcome
from tests.improve.patches import IMPROVE

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "seeds" / "minimal"
TASKS = ROOT / "policies" / "suites" / "example" / "exact.jsonl"
# The split of the evaluation a task run belongs to (set around each evaluation).
SPLIT: ContextVar[str] = ContextVar("split")


def policy_text(proposer: Path, *, edited: bool) -> str:
    """The policy before the edit, or after it: other split sizes (other tasks), a patch
    size no patch fits, a token cap every candidate fails, more samples."""
    return f"""
[models]
primary = "scripted:{proposer}"
panel = []

[proposer]
model = "scripted:{proposer}"
protocol = "text"
search = "live"
samples = {3 if edited else 1}
dev_pool = 1

[suite]
name = "file:{TASKS}"
dev_size = {2 if edited else 4}
heldout_size = {30 if edited else 24}
split_seed = "snapshot"

[patch]
max_bytes = {64 if edited else 200000}

[gates.tokens]
max_token_ratio = {0.01 if edited else 1.2}

[loop]
cycle_pause_s = 0.0
"""


@dataclass(frozen=True)
class Use:
    """One place a policy was handed over: what for, and which policy."""

    what: str
    sha256: str


class World:
    """The runtime's policy-taking calls and every task run, recorded; ``edit_when`` says
    at which task run the policy file is rewritten and reloaded."""

    def __init__(self, rt: Runtime, edited: str, edit_when: str) -> None:
        self.rt = rt
        self.edited = edited
        self.edit_when = edit_when
        self.uses: list[Use] = []
        self.edited_at: int | None = None  # the index in ``uses`` of the edit

    def use(self, what: str, policy: Policy) -> None:
        self.uses.append(Use(what, policy_sha256(policy)))

    async def evaluate(self, rt: Runtime, subject: evaluator.Subject, **kw: Any) -> Any:
        """The real evaluator, its policy and split recorded."""
        who = "parent" if subject.candidate_id is None else "candidate"
        self.use(f"evaluate: {who} on {kw['split']}", kw["policy"])
        SPLIT.set(kw["split"])
        return await evaluator.evaluate(rt, subject, **kw)

    async def run_one(
        self,
        rt: Runtime,
        subject: evaluator.Subject,
        suite: Any,
        task: Any,
        model: str,
        run_id: str,
        *,
        policy: Policy,
        decoy: Any = None,
        **_: Any,
    ) -> tuple[TaskResult, TaskRun]:
        """A task run: the candidate solves every task (not a decoy's), its parent none."""
        who = "parent" if subject.candidate_id is None else "candidate"
        self.use(f"task run: {who} on {SPLIT.get('live')}", policy)
        if self.edited_at is None and f"{who} on {SPLIT.get('live')}" == self.edit_when:
            # What a reload of the edited file does, in the middle of the candidate.
            self.rt.policy.path.write_text(self.edited)
            await self.rt.policy.reload()
            self.edited_at = len(self.uses)
        passed = subject.candidate_id is not None and decoy is None
        lines = {
            p.name: list(range(1, len(p.read_text().splitlines()) + 1))
            for p in subject.harness_dir.glob("*.py")
        }
        answer = "Paris" if passed else "I do not know."
        result = TaskResult(
            id=task.id,
            passed=passed,
            claimed_success=passed,
            output=answer,
            tokens=100,
            model_calls=1,
            supported=True if passed else None,
        )
        run = TaskRun(
            task_id=task.id,
            submission=Submission(output=answer, claimed_success=passed, coverage=lines),
            error=None,
            outcome=ContainerOutcome(0, None, "", 0, 0.0),
            gateway=GatewayRecord(),
            wall_s=0.0,
        )
        return result, run


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[World]:
    proposer = tmp_path / "proposer.toml"
    reply = {"content": IMPROVE}
    proposer.write_text(
        'mode = "sequence"\nafter_last = "repeat_last"\n\n[[replies]]\n'
        f"content = {json.dumps(reply['content'])}\n"
    )
    (tmp_path / "state").mkdir(mode=0o700)
    config = tmp_path / "harnessd.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\ncache_dir = "{tmp_path / "cache"}"\n')
    path = tmp_path / "policy.toml"
    path.write_text(policy_text(proposer, edited=False))
    store = Store(tmp_path / "state" / "state.db")
    holder = PolicyHolder(path, load_policy(path))
    # No engine: a task's sandboxed run is the world's.
    rt = Runtime(load_settings(config), holder, store, None, "unused", "snapshot-test")  # type: ignore[arg-type]
    found = World(rt, policy_text(proposer, edited=True), request.param)
    monkeypatch.setattr(evaluator, "run_one", found.run_one)
    # The live replay's runs (requests made in the live shape) are task runs too.
    monkeypatch.setattr(live_replay, "run_one", found.run_one)
    for module in (pipeline, modelfree, matched):
        monkeypatch.setattr(module, "evaluate", found.evaluate)
    for name in ("suite", "splits"):
        real = getattr(Runtime, name)

        def spy(
            self: Runtime,
            spec: str | None = None,
            *,
            policy: Policy,
            _real: Any = real,
            _name: str = name,
        ) -> Any:
            found.use(f"runtime.{_name}", policy)
            return _real(self, spec, policy=policy)

        monkeypatch.setattr(Runtime, name, spy)
    yield found
    store.close()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "world",
    [
        # While the proposal is prepared (its parent's dev baseline): before it is asked
        # for, recorded and screened.
        "parent on dev",
        # Between the candidate's dev run and its held-out test.
        "candidate on dev",
    ],
    indirect=True,
)
async def test_an_edit_mid_candidate_leaves_one_policy_from_proposal_to_verdict(
    world: World, tmp_path: Path
) -> None:
    rt = world.rt
    original = rt.policy.get()
    lineage = Lineage(rt.store, tmp_path / "harnesses")
    lineage.init_seed(SEED)
    started = time.monotonic()
    verdict = await ImprovementLoop(rt, lineage, LoopControl()).cycle()
    edited = rt.policy.get()
    assert time.monotonic() - started < 60
    assert world.edited_at is not None, "the policy was never edited mid-candidate"
    assert edited.patch.max_bytes == 64 and policy_sha256(edited) != policy_sha256(original)

    # The verdict names one policy: the one in force when the cycle began.
    assert verdict is not None and verdict.decision == "accept", verdict
    assert verdict.policy is not None
    assert (verdict.policy.path, verdict.policy.sha256) == (
        str(rt.policy.path),
        policy_sha256(original),
    )
    (cand,) = lineage.candidates()
    assert cand.state == "accepted" and cand.verdict == verdict
    # Under the edited policy the token gate would have failed (and the patch not fit).
    tokens = next(g for g in verdict.gates if g.gate == "tokens")
    assert tokens.passed and tokens.threshold == original.gates.tokens.max_token_ratio

    # Every stage took the same policy, before the edit and after it.
    later = world.uses[world.edited_at :]
    kinds = {u.what for u in later}
    for stage in ("candidate on heldout", "parent on heldout", "candidate on decoy"):
        assert {f"evaluate: {stage}", f"task run: {stage}"} <= kinds, (stage, kinds)
    assert {"runtime.splits", "runtime.suite"} <= kinds, kinds
    strays = [u for u in world.uses if u.sha256 != policy_sha256(original)]
    assert not strays, strays
