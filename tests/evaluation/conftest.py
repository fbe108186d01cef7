"""An in-process Runtime (real engine, image, suites, ledger) in a temporary state dir."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from daemon.config.policy import Policy, load_policy
from daemon.config.reload import PolicyHolder
from daemon.config.settings import load_settings
from daemon.evaluation.runtime import Runtime, open_runtime
from daemon.store import Store
from sandbox.labels import instance_id


def make_policy(tmp_path: Path, text: str) -> tuple[Path, Policy]:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path, load_policy(path)


@pytest.fixture
async def runtime_factory(
    tmp_path: Path, asset_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[object]:
    """``async with factory(policy_text) as rt``: a Runtime on a policy of the test's."""
    for name in list(os.environ):
        if name.startswith("HARNESSD_"):
            monkeypatch.delenv(name)
    config = tmp_path / "harnessd.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\ncache_dir = "{asset_cache}"\n')
    loaded = load_settings(config)
    (tmp_path / "state").mkdir(mode=0o700)
    store = Store(tmp_path / "state" / "state.db")

    @asynccontextmanager
    async def factory(policy_text: str) -> AsyncIterator[Runtime]:
        path, policy = make_policy(tmp_path, policy_text)
        holder = PolicyHolder(path, policy)
        async with open_runtime(
            loaded, holder, store, instance=instance_id(tmp_path / "state")
        ) as rt:
            yield rt

    try:
        yield factory
    finally:
        store.close()
