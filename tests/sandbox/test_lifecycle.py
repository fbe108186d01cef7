"""Well-behaved runs, cancellation, orphan reaping and engine errors (real Docker)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.errors import SandboxError
from daemon.evaluation.taskrun import classify, run_task
from daemon.gateway.session import GatewayRecord
from daemon.tasks import Submission
from sandbox.container import ContainerOutcome, RunSpec, created_container
from sandbox.engine import DockerEngine
from sandbox.errors import SandboxUnavailable
from sandbox.image import image_tag
from sandbox.labels import INSTANCE, instance_id, instance_labels
from sandbox.limits import Limits
from sandbox.rundir import PREFIX, remove_orphan_run_dirs
from tests.sandbox.conftest import SMALL, Sandbox, StandInModel, make_task

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

HARNESS = """
import helpers


def solve(task, ctx):
    reply = ctx.model.chat(task["prompt"], tools=task["tools"])
    calls = helpers.calls(reply)
    (ctx.scratch / "notes.txt").write_text("scratch works")
    looked_up = ctx.tools.call("lookup", {"q": "oslo"})
    try:
        ctx.tools.call("missing", {})
    except ctx.ToolError as exc:
        ctx.log("tool error:", exc.code)
    return {
        "output": calls,
        "claimed_success": True,
        "confidence": 0.75,
        "extra": looked_up["tool"]["answer"] + ctx.tokens_left(),
    }


def never_called():
    return "dead"
"""

HELPERS = """
def calls(reply):
    return [{"name": c["name"], "arguments": c["arguments"]} for c in reply["tool_calls"]]


def unused():
    return None
"""


async def test_well_behaved_harness_gets_its_submission_and_coverage_through(
    sandbox: Sandbox,
) -> None:
    model = StandInModel()
    run = await sandbox.run({"harness.py": HARNESS, "helpers.py": HELPERS}, handler=model)
    assert run.error is None, (run.outcome, run.submission)
    assert run.submission is not None
    assert run.submission.output == [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    assert run.submission.claimed_success is True
    assert run.submission.confidence == 0.75
    # One line number per statement (the statement's first line): imports, defs, executed
    # bodies, the except clause (11); the multi-line return (13-18) is one statement at 13;
    # not never_called's body (22), not unused()'s body in helpers.
    assert run.submission.coverage == {
        "harness.py": [1, *range(4, 14), 21],
        "helpers.py": [1, 2, 5],
    }
    assert "tool error: no_tool" in run.outcome.output
    assert run.outcome.exit_code == 0
    assert run.gateway.model_calls == 1 and run.gateway.tool_calls == 2
    assert run.gateway.transcript[0]["op"] == "chat"
    assert model.chats[0].tools[0].name == "get_weather"


async def test_solve_raising_is_a_crash_with_coverage_so_far(sandbox: Sandbox) -> None:
    harness = "def solve(task, ctx):\n    x = 1\n    raise ValueError('nope')\n    y = 2\n"
    run = await sandbox.run(harness)
    assert run.error == "crash"
    assert run.submission is not None
    assert run.submission.error == "ValueError: nope"
    assert run.submission.output is None and run.submission.claimed_success is False
    assert run.submission.coverage == {"harness.py": [1, 2, 3]}
    assert run.outcome.exit_code == 1
    assert "solve() raised ValueError: nope" in run.outcome.output


async def test_missing_solve_and_syntax_errors_are_crashes(sandbox: Sandbox) -> None:
    no_solve = await sandbox.run("def answer(task, ctx):\n    return {}\n")
    assert no_solve.error == "crash"
    assert no_solve.submission is not None and "does not define solve" in (
        no_solve.submission.error or ""
    )
    broken = await sandbox.run("def solve(task, ctx)\n    return {}\n")
    assert broken.error == "crash"
    assert broken.submission is not None and (broken.submission.error or "").startswith(
        "SyntaxError"
    )


async def test_cancelling_mid_run_leaves_nothing_behind(sandbox: Sandbox) -> None:
    """Cancel while the harness waits on a model call: container and run dir must go."""
    model = StandInModel(on_chat=anyio.Event(), block_chat=True)
    harness = "def solve(task, ctx):\n    ctx.model.chat(task['prompt'])\n"
    seen_containers: list[dict[str, Any]] = []
    seen_dirs: list[Path] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(sandbox.run, harness, handler=model))
        assert model.on_chat is not None
        with anyio.fail_after(60):
            await model.on_chat.wait()
        seen_containers = await sandbox.containers()
        seen_dirs = list(sandbox.runs_dir.iterdir())
        tg.cancel_scope.cancel()
    assert len(seen_containers) == 1 and len(seen_dirs) == 1
    assert await sandbox.containers() == []
    assert list(sandbox.runs_dir.iterdir()) == []


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5])
async def test_cancelling_at_any_moment_leaves_nothing_behind(
    sandbox: Sandbox, delay: float
) -> None:
    harness = "import time\ndef solve(task, ctx):\n    time.sleep(60)\n"
    with anyio.move_on_after(delay):
        await sandbox.run(harness)
        pytest.fail("the run should have been cancelled")
    assert await sandbox.containers() == []
    assert not sandbox.runs_dir.exists() or list(sandbox.runs_dir.iterdir()) == []


async def test_concurrent_runs_are_independent(sandbox: Sandbox) -> None:
    harness = (
        "def solve(task, ctx):\n"
        "    return {'output': task['meta']['n'] * 2, 'claimed_success': True}\n"
    )
    folder = sandbox.harness(harness)
    results: dict[int, object] = {}

    async def one(n: int) -> None:
        run = await sandbox.run(folder, task=make_task(n=n))
        results[n] = run.submission.output if run.submission else run.error

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(one, n)
    assert results == {0: 0, 1: 2, 2: 4, 3: 6}


async def test_reap_removes_orphans_of_this_instance_only(sandbox: Sandbox) -> None:
    engine = sandbox.engine
    other = "other-" + sandbox.instance
    spec = RunSpec(image=sandbox.image, command=["sleep", "600"], labels=sandbox.labels)
    bystander = RunSpec(
        image=sandbox.image, command=["sleep", "600"], labels=instance_labels(other)
    )
    async with created_container(engine, bystander) as keep_id:
        # Simulate a daemon killed mid-run: create containers outside any context manager.
        for _ in range(2):
            orphan = await engine.call(
                "create orphan",
                engine.api.create_container,
                spec.image,
                list(spec.command),
                labels=dict(spec.labels),
                network_disabled=True,  # like every sandbox: no bridge needed
                host_config=engine.api.create_host_config(network_mode="none"),
            )
            await engine.call("start orphan", engine.api.start, orphan["Id"])
        assert len(await sandbox.containers()) == 2
        assert await engine.reap(sandbox.instance) == 2
        assert await sandbox.containers() == []
        survivors = await engine.call(
            "list", engine.api.containers, all=True, filters={"label": f"{INSTANCE}={other}"}
        )
        assert [c["Id"] for c in survivors] == [keep_id]
    assert await engine.reap(sandbox.instance) == 0


async def test_orphan_run_dirs_are_removed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    (runs / f"{PREFIX}abc").mkdir(parents=True)
    (runs / f"{PREFIX}abc" / "gateway.sock").write_text("")
    (runs / f"{PREFIX}def").mkdir()
    (runs / "keep-me").mkdir()
    assert await remove_orphan_run_dirs(runs) == 2
    assert [p.name for p in runs.iterdir()] == ["keep-me"]
    assert await remove_orphan_run_dirs(tmp_path / "missing") == 0


async def test_unreachable_engine_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable, match="no Docker engine answers at unix:///nonexistent"):
        await DockerEngine.connect()


async def test_missing_image_and_harness_are_sandbox_errors(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    model = StandInModel()
    with pytest.raises(SandboxError, match="does not exist"):
        await run_task(
            sandbox.engine,
            image=sandbox.image,
            harness_dir=tmp_path / "nope",
            task=make_task(),
            handler=model,
            limits=SMALL,
            runs_dir=sandbox.runs_dir,
            labels=sandbox.labels,
        )
    with pytest.raises(SandboxError, match="no-such-image"):
        await run_task(
            sandbox.engine,
            image="harnessd-sandbox:no-such-image",
            harness_dir=sandbox.harness("def solve(task, ctx):\n    pass\n"),
            task=make_task(),
            handler=model,
            limits=SMALL,
            runs_dir=sandbox.runs_dir,
            labels=sandbox.labels,
        )


def test_image_tag_and_ids_are_stable(tmp_path: Path) -> None:
    tag = image_tag()
    assert tag.startswith("harnessd-sandbox:") and len(tag.split(":")[1]) == 12
    assert image_tag() == tag
    assert instance_id(tmp_path) == instance_id(tmp_path / "." / "")
    assert instance_id(tmp_path) != instance_id(tmp_path / "other")


def test_limits_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="wall_s"):
        Limits(wall_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=4)


def test_classify_precedence() -> None:
    clean = ContainerOutcome(exit_code=0, reason=None, output="", output_bytes=0, wall_s=1.0)
    timeout = ContainerOutcome(
        exit_code=None, reason="timeout", output="", output_bytes=0, wall_s=1.0
    )
    ok = Submission(output="x", claimed_success=True)
    assert classify(GatewayRecord(submission=ok), clean) is None
    assert classify(GatewayRecord(submission=ok, budget_refused=True), timeout) == "budget"
    assert classify(GatewayRecord(submission=ok), timeout) == "timeout"
    assert classify(GatewayRecord(submission=None), clean) == "crash"
    failed = Submission(error="MemoryError: ")
    assert classify(GatewayRecord(submission=failed), clean) == "oom"
    violated = GatewayRecord(submission=None, protocol_violation=True)
    assert classify(violated, clean) == "protocol"
    assert classify(GatewayRecord(submission=Submission(error="KeyError: 'x'")), clean) == "crash"
