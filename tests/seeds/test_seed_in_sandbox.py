"""The seed harness through the real guest runtime, gateway and sandbox, judged by the suites.

The model is a stand-in that replies with a suite's reference answer (the subject here is
the seed's contract with the sandbox, not a model's skill).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation.taskrun import TaskRun, run_task
from daemon.gateway.session import NoSuchTool
from daemon.providers.base import ChatRequest, ChatResponse, ToolCall, Usage
from daemon.suites import load_suite
from daemon.suites.codecheck import DockerCodeChecker
from daemon.tasks import Task
from sandbox.engine import DockerEngine
from sandbox.image import ensure_image
from sandbox.labels import INSTANCE, instance_labels
from sandbox.limits import Limits

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

SEED_DIR = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
LIMITS = Limits(memory_mb=256, pids=32, tmpfs_mb=8, wall_s=60.0, output_kb=64)


class ReferenceModel:
    """Answers every chat with a fixed reply, and records the requests."""

    def __init__(self, content: str | None, calls: list[dict[str, Any]]) -> None:
        self.content = content
        self.calls = [ToolCall(id=f"call_{i}", **call) for i, call in enumerate(calls)]
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        usage = Usage(prompt_tokens=20, completion_tokens=10)
        return ChatResponse(content=self.content, tool_calls=self.calls, usage=usage, model="ref")

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        raise NoSuchTool(f"no tool named {name!r}")

    async def next_turn(self) -> dict[str, Any]:
        return {"done": True}

    async def tokens_left(self) -> int:
        return 4000

    async def restart(self) -> None:
        return None  # no host-side state


class Sandbox:
    def __init__(self, engine: DockerEngine, image: str, instance: str, runs_dir: Path) -> None:
        self.engine = engine
        self.image = image
        self.labels = instance_labels(instance)
        self.runs_dir = runs_dir

    async def run_seed(self, task: Task, model: ReferenceModel) -> TaskRun:
        return await run_task(
            self.engine,
            image=self.image,
            harness_dir=SEED_DIR,
            task=task,
            handler=model,
            limits=LIMITS,
            runs_dir=self.runs_dir,
            labels=self.labels,
        )

    def code_checker(self) -> DockerCodeChecker:
        return DockerCodeChecker(self.engine, self.image, LIMITS, self.labels)


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    instance = "seeds-" + secrets.token_hex(4)
    async with DockerEngine.connected() as engine:
        image = await ensure_image(engine, log=lambda line: None)
        yield Sandbox(engine, image, instance, tmp_path)
        left = await engine.call(
            "listing test containers",
            engine.api.containers,
            all=True,
            filters={"label": f"{INSTANCE}={instance}"},
        )
        assert left == []


async def test_seed_answers_a_bfcl_task_in_the_sandbox(sandbox: Sandbox, asset_cache: Path) -> None:
    suite = load_suite("bfcl:parallel_multiple", asset_cache)
    task = suite.task("parallel_multiple_0")
    model = ReferenceModel(None, suite.reference_output("parallel_multiple_0"))
    run = await sandbox.run_seed(task, model)
    assert run.error is None, run.outcome.output
    assert run.submission is not None
    assert run.submission.claimed_success is True
    assert (
        await suite.check(task.id, run.submission.output, checker=sandbox.code_checker())
    ).passed
    (request,) = model.requests
    assert request.tools == task.tools and request.messages == task.prompt
    assert "harness.py" in run.submission.coverage


async def test_seed_answers_a_humaneval_task_in_the_sandbox(
    sandbox: Sandbox, asset_cache: Path
) -> None:
    suite = load_suite("humaneval", asset_cache)
    task = suite.task("HumanEval/2")
    code = str(task.meta["code_prompt"]) + suite.expected("HumanEval/2")
    model = ReferenceModel(f"Here you go:\n```python\n{code}```\n", [])
    run = await sandbox.run_seed(task, model)
    assert run.error is None, run.outcome.output
    assert run.submission is not None and run.submission.output == code
    result = await suite.check(task.id, run.submission.output, checker=sandbox.code_checker())
    assert result.passed, result.detail
