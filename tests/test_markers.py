"""The marker check of tests/conftest.py: a test with none of unit/docker/model fails, and a
``unit`` test that reaches for Docker, a daemon, a Ray cluster or the model fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

import docker
import llama_cpp
import pytest

from tests import conftest
from tests.daemon_process import start_daemon

# No module-level pytestmark: the spare items below must start with no marker at all.


def _spare(request: pytest.FixtureRequest, name: str) -> pytest.Function:
    """A test item the check has not seen, with no marker of its own."""
    parent = request.node.parent
    assert isinstance(parent, pytest.Module)
    return pytest.Function.from_parent(parent, name=name, callobj=lambda: None)


@pytest.mark.unit
def test_an_unmarked_test_fails_and_says_which_marker_to_add(
    request: pytest.FixtureRequest,
) -> None:
    item = _spare(request, "test_without_a_marker")
    conftest.pytest_collection_modifyitems([item])
    # Marked unit, so the fast session's "-m unit ..." still selects it (and fails it).
    assert item.get_closest_marker("unit") is not None
    with pytest.raises(pytest.fail.Exception) as info:
        conftest.pytest_runtest_setup(item)
    assert "test_without_a_marker carries none of the markers unit, docker, model" in str(
        info.value
    )
    assert "@pytest.mark.docker if it starts Docker, a daemon" in str(info.value)


@pytest.mark.unit
def test_a_marked_test_passes_the_check(request: pytest.FixtureRequest) -> None:
    item = _spare(request, "test_with_a_marker")
    item.add_marker(pytest.mark.docker)
    conftest.pytest_collection_modifyitems([item])
    conftest.pytest_runtest_setup(item)
    assert item.get_closest_marker("unit") is None


@pytest.mark.unit
def test_a_unit_test_may_not_start_a_daemon(tmp_path: Path, asset_cache: Path) -> None:
    with pytest.raises(
        AssertionError, match=r"tried to start a harnessd daemon.*@pytest\.mark\.docker"
    ):
        start_daemon(tmp_path, asset_cache)
    assert not (tmp_path / "daemon.log").exists()


@pytest.mark.unit
def test_a_unit_test_may_not_reach_the_docker_engine() -> None:
    with pytest.raises(AssertionError, match="tried to use the Docker engine"):
        docker.from_env()
    with pytest.raises(AssertionError, match="tried to start the Docker engine"):
        subprocess.run(["dockerd", "--version"], check=False)


@pytest.mark.unit
def test_a_unit_test_may_not_load_the_model_or_start_its_server_or_ray() -> None:
    with pytest.raises(AssertionError, match="tried to use the local model"):
        llama_cpp.Llama(model_path="none.gguf")
    with pytest.raises(AssertionError, match="tried to start the local model's server"):
        subprocess.run(["python3", "-m", "llama_cpp.server", "--help"], check=False)
    with pytest.raises(AssertionError, match="tried to start a Ray cluster"):
        subprocess.run(["ray", "start", "--head"], check=False)


@pytest.mark.unit
def test_ordinary_subprocesses_still_run_in_unit_tests() -> None:
    done = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("git version")


@pytest.mark.model
def test_the_refusal_leaves_the_model_usable_for_later_tests(asset_cache: Path) -> None:
    """Runs after the unit tests above have been refused the model: the class is as it was."""
    from daemon.config import assets

    llm = llama_cpp.Llama(model_path=str(assets.embedded_model(asset_cache)), verbose=False)
    try:
        assert llm.n_ctx() > 0
    finally:
        llm.close()


@pytest.mark.unit
def test_the_longest_files_named_to_run_first_exist() -> None:
    """A renamed file would silently lose its early place (and the suite minutes)."""
    root = Path(__file__).resolve().parent.parent
    missing = [p for p in (*conftest.LONGEST_FIRST, *conftest.LAST) if not (root / p).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_FIRST names missing files: {missing}"
