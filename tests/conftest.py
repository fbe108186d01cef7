"""Shared test configuration: anyio on asyncio, and fixtures every area may use."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.config.settings import DEFAULT_STATE_DIR, PROJECT_ROOT
from tests.daemon_process import RunningDaemon, start_daemon
from tests.llama_server import LlamaServer, llama_server
from tests.support import heavy


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


KINDS = ("unit", "docker", "model")
_UNMARKED = pytest.StashKey[bool]()
MARKER_HELP = (
    "add exactly what it needs: @pytest.mark.unit if it needs neither Docker, a daemon nor "
    "the model; @pytest.mark.docker if it starts Docker, a daemon (tests/daemon_process.py, "
    "tests/engine_process.py), a Ray cluster or the sandbox; @pytest.mark.model if it runs the "
    "embedded model (llama_cpp, tests/llama_server.py); and @pytest.mark.slow as well if it "
    "takes more than a few seconds (markers: pyproject.toml [tool.pytest.ini_options])"
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test with none of unit/docker/model fails. It is marked ``unit`` here first so that
    ``-m`` selections (the fast session) still pick it up and fail it, not skip it silently.

    tryfirst: this runs before pytest's own ``-m`` deselection."""
    for item in items:
        if not any(item.get_closest_marker(kind) for kind in KINDS):
            item.stash[_UNMARKED] = True
            item.add_marker(pytest.mark.unit)
    _longest_first(items)


# The longest test files first (longest processing time first): pytest-xdist's loadfile
# scheduling hands files to the two workers in collection order, so a long file collected
# last ran alone at the end while the other worker idled (minutes of the suite's wall time).
# Measured with `scripts/test -- --durations=100` on 2026-12-06; a file missing here only
# runs in its usual place.
LONGEST_FIRST = (
    "tests/live/test_live_swaps.py",
    "tests/improve/test_docstring_guide_e2e.py",
    "tests/improve/test_improvement_e2e.py",
    "tests/improve/test_kill9.py",
    "tests/improve/test_climb_e2e.py",
    "tests/improve/test_generated_e2e.py",
    "tests/improve/test_tokens_only_e2e.py",
    "tests/improve/test_modelfree_e2e.py",
    "tests/service/test_engine_outage.py",
    "tests/suites/test_humaneval.py",
    "tests/endpoint/test_endpoint_swap.py",
    "tests/providers/test_openai_real_server.py",
    "tests/providers/test_local_decoding.py",
    "tests/improve/test_moves_e2e.py",
    "tests/improve/test_embedded_proposer.py",
    "tests/evaluation/test_forged_code_checks.py",
    "tests/cluster/test_ray_evaluation.py",
    "tests/improve/test_counterfactual_e2e.py",
    "tests/improve/test_live_replay_e2e.py",
)

# Files that time how long a process takes to clean up after a signal: last, when the other
# worker has mostly finished. Beside the model-heavy files (load 8 on two cores), Ctrl-C on
# `harnessd eval` took over 180 s to exit in two clean-clone runs (17 s alone): a defect
# still open, recorded, that these files must keep showing when it happens alone.
LAST = ("tests/evaluation/test_cancellation.py",)


def _longest_first(items: list[pytest.Item]) -> None:
    """The files of :data:`LONGEST_FIRST` first, in its order, those of :data:`LAST` last;
    a file's tests keep theirs."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    rank.update({path: len(LONGEST_FIRST) + 2 + i for i, path in enumerate(LAST)})
    root = Path(__file__).resolve().parent.parent

    def file_rank(item: pytest.Item) -> int:
        try:
            rel = Path(item.path).resolve().relative_to(root).as_posix()
        except ValueError:
            return len(LONGEST_FIRST) + 1
        return rank.get(rel, len(LONGEST_FIRST) + 1)

    items[:] = sorted(items, key=file_rank)  # stable: the rest keep collection order


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.stash.get(_UNMARKED, False):
        pytest.fail(f"{item.nodeid} carries none of the markers unit, docker, model: {MARKER_HELP}")


def _heavy_process(args: object) -> str | None:
    """What a subprocess command line starts, if it is a Docker engine or client, the model's
    server or a Ray node (None for anything else: git, python -c, harnessd's own CLI ...).
    A daemon is refused where it is started for tests, in tests/daemon_process.py: a unit test
    may run ``harnessd serve`` on a bad config to see it refuse to start."""
    argv = [str(a) for a in args] if isinstance(args, list | tuple) else str(args).split()
    program = Path(argv[0]).name if argv else ""
    if "llama_cpp.server" in argv:
        return "the local model's server"
    if program in ("docker", "dockerd", "containerd"):
        return "the Docker engine"
    if program == "ray" or any("ray.init" in a for a in argv):
        return "a Ray cluster"
    return None


@pytest.fixture(autouse=True)
def unit_tests_touch_neither_docker_nor_the_model(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A test marked ``unit`` (the fast session) fails loudly if it reaches for the Docker
    engine, starts a daemon, a Ray node or the model's server, or loads the local model, so
    the marker cannot silently lie."""
    node = request.node
    if node.get_closest_marker("unit") is None or any(
        node.get_closest_marker(m) for m in ("docker", "model")
    ):
        yield
        return
    advice = (
        "mark it @pytest.mark.docker (Docker, the sandbox, a daemon, a Ray cluster) or "
        "@pytest.mark.model (the embedded model), not unit; and slow as well if it takes more "
        "than a few seconds"
    )

    def refuse(what: str) -> object:
        def fail(*args: object, **kwargs: object) -> None:
            raise AssertionError(f"a test marked 'unit' tried to use {what}: {advice}")

        return fail

    import docker
    import llama_cpp

    monkeypatch.setattr(docker.DockerClient, "__init__", refuse("the Docker engine"))
    monkeypatch.setattr(docker.APIClient, "__init__", refuse("the Docker engine"))

    def refuse_model(self: llama_cpp.Llama, *args: object, **kwargs: object) -> None:
        # What close() (its __del__) needs, so the refused, half-made object goes quietly.
        # Not __new__: CPython keeps a reset __new__ slot that rejects arguments afterwards.
        self._stack = contextlib.ExitStack()
        raise AssertionError(f"a test marked 'unit' tried to use the local model: {advice}")

    monkeypatch.setattr(llama_cpp.Llama, "__init__", refuse_model)
    popen_init = subprocess.Popen.__init__

    def guarded_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if (what := _heavy_process(args)) is not None:
            raise AssertionError(f"a test marked 'unit' tried to start {what}: {advice}")
        popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_popen)
    heavy.refusing(advice)
    try:
        yield
    finally:
        heavy.refusing(None)


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


@pytest.fixture(scope="module")
def shared_daemon(
    tmp_path_factory: pytest.TempPathFactory, asset_cache: Path
) -> Iterator[RunningDaemon]:
    """``running_daemon`` shared by a module's tests that only read it or talk to it (no
    policy edit, no stop): one start instead of one per test."""
    daemon = start_daemon(tmp_path_factory.mktemp("shared-daemon"), asset_cache)
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
