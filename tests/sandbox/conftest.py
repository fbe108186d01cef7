"""Fixtures for sandbox tests: the real image, a real engine, a stand-in model, clean-up checks.

Every test gets its own instance label and runs dir; at teardown the test fails if any
container with its label or any per-run directory is left behind.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.errors import BudgetExceeded
from daemon.evaluation.taskrun import TaskRun, run_task
from daemon.gateway.session import NoSuchTool
from daemon.providers.base import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage
from daemon.tasks import Task
from sandbox.engine import DockerEngine
from sandbox.image import ensure_image
from sandbox.labels import INSTANCE, instance_labels
from sandbox.limits import Limits

# Small limits keep hostile runs short; wall_s is generous for runs that should not time out.
SMALL = Limits(memory_mb=128, cpus=1.0, pids=32, tmpfs_mb=8, wall_s=30.0, output_kb=64)
SHORT_WALL = 3.0


@pytest.fixture(scope="session")
def image() -> str:
    """The real sandbox image tag, built once (cached by tag) if the engine lacks it."""

    async def build() -> str:
        async with DockerEngine.connected() as engine:
            return await ensure_image(engine, log=print)

    return anyio.run(build)


@dataclass
class StandInModel:
    """A deterministic GatewayHandler: each chat costs 10+5 tokens and returns one tool call."""

    budget: int = 1000
    spent: int = 0
    chats: list[ChatRequest] = field(default_factory=list)
    tools: dict[str, Any] = field(default_factory=lambda: {"lookup": {"answer": 42}})
    on_chat: anyio.Event | None = None
    block_chat: bool = False

    async def chat(self, request: ChatRequest) -> ChatResponse:
        if self.spent >= self.budget:
            raise BudgetExceeded("task", self.spent, self.budget)
        self.chats.append(request)
        if self.on_chat is not None:
            self.on_chat.set()
        if self.block_chat:
            await anyio.sleep_forever()
        self.spent += 15
        call = ToolCall(
            id=f"call-{len(self.chats)}", name="get_weather", arguments={"city": "Oslo"}
        )
        usage = Usage(prompt_tokens=10, completion_tokens=5)
        return ChatResponse(content=None, tool_calls=[call], usage=usage, model="stand-in")

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        if name not in self.tools:
            raise NoSuchTool(f"no tool named {name!r}")
        return {"tool": self.tools[name], "arguments": arguments}

    async def next_turn(self) -> dict[str, Any]:
        return {"done": True}

    async def tokens_left(self) -> int:
        return max(0, self.budget - self.spent)

    async def restart(self) -> None:
        return None  # no host-side state


def make_task(**meta: Any) -> Task:
    return Task(
        id="t-" + secrets.token_hex(3),
        suite="test",
        kind="function_call",
        prompt=[Message(role="user", content="What is the weather in Oslo?")],
        tools=[
            ToolSpec(
                name="get_weather",
                description="Weather for a city",
                parameters={"type": "object", "properties": {"city": {"type": "string"}}},
            )
        ],
        meta=meta,
    )


@dataclass
class Sandbox:
    """One test's sandbox context: engine, image, its own label and runs dir."""

    engine: DockerEngine
    image: str
    instance: str
    runs_dir: Path
    harness_root: Path

    @property
    def labels(self) -> dict[str, str]:
        return instance_labels(self.instance)

    def harness(self, files: dict[str, str] | str) -> Path:
        """A harness directory from ``{"harness.py": source, ...}`` or one harness.py source."""
        if isinstance(files, str):
            files = {"harness.py": files}
        folder = Path(tempfile.mkdtemp(dir=self.harness_root))
        for name, source in files.items():
            (folder / name).write_text(textwrap.dedent(source).lstrip())
        folder.chmod(0o755)
        return folder

    async def run(
        self,
        files: dict[str, str] | str | Path,
        *,
        limits: Limits = SMALL,
        handler: StandInModel | None = None,
        task: Task | None = None,
    ) -> TaskRun:
        harness_dir = files if isinstance(files, Path) else self.harness(files)
        return await run_task(
            self.engine,
            image=self.image,
            harness_dir=harness_dir,
            task=task or make_task(),
            handler=handler or StandInModel(),
            limits=limits,
            runs_dir=self.runs_dir,
            labels=self.labels,
        )

    async def containers(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self.engine.call(
            "listing test containers",
            self.engine.api.containers,
            all=True,
            filters={"label": f"{INSTANCE}={self.instance}"},
        )
        return found


@pytest.fixture
def runs_dir() -> Iterator[Path]:
    # Short on purpose: a Unix socket path must fit in 107 bytes.
    path = Path(tempfile.mkdtemp(prefix="hd-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def sandbox(image: str, runs_dir: Path, tmp_path: Path) -> AsyncIterator[Sandbox]:
    instance = "test-" + secrets.token_hex(4)
    harness_root = tmp_path / "harnesses"
    harness_root.mkdir()
    async with DockerEngine.connected() as engine:
        box = Sandbox(engine, image, instance, runs_dir / "runs", harness_root)
        yield box
        left = await box.containers()
        reaped = await engine.reap(instance)
    assert not left, f"containers left behind: {[c['Id'][:12] for c in left]} (reaped {reaped})"
    leftover_dirs = list(box.runs_dir.iterdir()) if box.runs_dir.exists() else []
    assert not leftover_dirs, f"per-run directories left behind: {leftover_dirs}"
