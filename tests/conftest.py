"""Shared test configuration: anyio on asyncio, and fixtures every area may use."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.config.settings import DEFAULT_STATE_DIR, PROJECT_ROOT
from tests.daemon_process import RunningDaemon, start_daemon
from tests.llama_server import LlamaServer, llama_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def unit_tests_touch_neither_docker_nor_the_model(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test marked ``unit`` (the fast session) fails loudly if it reaches for the Docker
    engine or loads the local model, so the marker cannot silently lie."""
    node = request.node
    if node.get_closest_marker("unit") is None or any(
        node.get_closest_marker(m) for m in ("docker", "model")
    ):
        return

    def refuse(what: str) -> object:
        def fail(*args: object, **kwargs: object) -> None:
            raise AssertionError(f"a test marked 'unit' tried to use {what}")

        return fail

    import docker
    import llama_cpp

    monkeypatch.setattr(docker.DockerClient, "__init__", refuse("the Docker engine"))
    monkeypatch.setattr(docker.APIClient, "__init__", refuse("the Docker engine"))
    monkeypatch.setattr(llama_cpp.Llama, "__init__", refuse("the local model"))


@pytest.fixture(scope="session")
def asset_cache() -> Path:
    """The pinned-asset cache that ``scripts/setup`` (``harnessd fetch``) filled.

    Tests share it instead of downloading the model and data into every temporary state dir.
    """
    default = PROJECT_ROOT / DEFAULT_STATE_DIR / "cache"
    return Path(os.environ.get("HARNESSD_TEST_CACHE") or default)


@pytest.fixture(scope="session", autouse=True)
def no_output_reader_outlives_its_container() -> Iterator[None]:
    """Every container output reader must have ended by the end of the run: one left
    blocked would mean a connection closed in the wrong order (see sandbox.output)."""
    yield
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        alive = [t for t in threading.enumerate() if t.name == "harnessd-output"]
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(f"{len(alive)} container output readers still running after the tests")


@pytest.fixture
def running_daemon(tmp_path: Path, asset_cache: Path) -> Iterator[RunningDaemon]:
    """A daemon on the default seed with the loop disabled, stopped afterwards."""
    daemon = start_daemon(tmp_path, asset_cache)
    try:
        yield daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


@pytest.fixture(scope="session")
def real_openai_server(
    asset_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """llama.cpp's OpenAI-compatible server on the embedded model, for the whole session
    (started on first use; tests that use it are marked ``model``)."""
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with llama_server(asset_cache, log) as server:
        yield server
