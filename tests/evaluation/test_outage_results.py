"""A dependency lost mid-evaluation ends the evaluation as an outage, never as results.

A task whose model calls failed because the provider was down, or whose container died
with the engine, says nothing about the harness: counted, it would reject a good candidate
(or make a poor parent look poorer). The evaluation stops with the outage instead, and is
recorded as interrupted.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from daemon.errors import EngineUnavailable, ProviderUnavailable
from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.health import engine_outage
from sandbox.errors import SandboxUnavailable

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"

POLICY = """
[models]
primary = "scripted:{model}"
[suite]
name = "bfcl:simple"
dev_size = 4
heldout_size = 10
[sandbox]
wall_s = 60.0
concurrency = 2
"""

# The first call is answered, every later one fails as an unreachable server would.
DOWN_AFTER_ONE = """
mode = "sequence"
after_last = "repeat_last"

[[replies]]
content = "I do not know."

[[replies]]
error = "connection refused"
error_kind = "unavailable"
"""


async def test_a_provider_down_mid_evaluation_is_an_outage(
    tmp_path: Path, runtime_factory: object
) -> None:
    model = tmp_path / "down.toml"
    model.write_text(DOWN_AFTER_ONE)
    async with runtime_factory(POLICY.format(model=model)) as rt:  # type: ignore[operator]
        policy = rt.policy.get()
        ids = rt.splits(policy=policy).dev
        with pytest.raises(ProviderUnavailable) as caught:
            await evaluate(
                rt,
                Subject(SEED, "seed"),
                split="dev",
                task_ids=ids,
                model=f"scripted:{model}",
                policy=policy,
            )
        assert caught.value.dependency == f"scripted:{model}"
    db = sqlite3.connect(tmp_path / "state" / "state.db")
    assert db.execute("SELECT state FROM evaluations").fetchall() == [("interrupted",)]


async def test_a_sandbox_failure_is_an_engine_outage_only_if_the_engine_is_gone(
    tmp_path: Path, runtime_factory: object
) -> None:
    async with runtime_factory(POLICY.format(model=tmp_path / "none.toml")) as rt:  # type: ignore[operator]
        refused = RuntimeError("the engine refused something")
        assert await engine_outage(rt.engine, refused) is None  # it still answers
        lost = RuntimeError("wrapped")
        lost.__cause__ = SandboxUnavailable("no Docker engine answers")
        found = await engine_outage(rt.engine, lost)
        assert isinstance(found, EngineUnavailable) and "scripts/docker-engine" in found.fix
