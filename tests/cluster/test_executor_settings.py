"""``[executor]`` is validated like every other key, and the ``ray`` executor names what is
missing before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.cluster.ray_executor import ray_address
from daemon.config.settings import ExecutorSettings, load_settings
from daemon.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("HARNESSD_EXECUTOR__TYPE", raising=False)
    monkeypatch.delenv("HARNESSD_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no harnessd.toml of the working directory


def test_executor_keys_are_checked_and_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "harnessd.toml"
    config.write_text('[executor]\ntype = "dask"\n')
    with pytest.raises(ConfigError, match=r"harnessd.toml: key 'executor.type'"):
        load_settings(config)
    config.write_text('[executor]\ntype = "ray"\ngateway_port = 70000\n')
    with pytest.raises(ConfigError, match=r"key 'executor.gateway_port'"):
        load_settings(config)
    config.write_text('[executor]\ntype = "ray"\nhead = "x"\n')
    with pytest.raises(ConfigError, match=r"unknown key 'executor.head'"):
        load_settings(config)
    config.write_text('[executor]\ntype = "ray"\naddress = "10.0.0.5:6379"\n')
    executor = load_settings(config).settings.executor
    assert (executor.type, executor.address, executor.gateway_port) == ("ray", "10.0.0.5:6379", 0)
    assert load_settings(None).settings.executor.type == "local"


def test_the_environment_selects_the_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESSD_EXECUTOR__TYPE", "ray")
    assert load_settings(None).settings.executor.type == "ray"


def test_ray_needs_a_head_address_from_the_settings_or_ray_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError, match=r"\[executor\] address.*RAY_ADDRESS"):
        ray_address(ExecutorSettings(type="ray"))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.7:6379")
    assert ray_address(ExecutorSettings(type="ray")) == "10.0.0.7:6379"
    # The setting wins over the environment.
    assert ray_address(ExecutorSettings(type="ray", address="h:1")) == "h:1"
