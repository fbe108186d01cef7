"""Fixtures for the report tests: a recorded lineage, and headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import find_chromium
from world import build_world

from daemon.store import Store


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One recorded lineage per test module (building it commits to git several times)."""
    root = tmp_path_factory.mktemp("world")
    build_world(root).close()
    yield root


@pytest.fixture
def world_store(world_dir: Path) -> Iterator[Store]:
    store = Store(world_dir / "state" / "state.db")
    yield store
    store.close()


@pytest.fixture(scope="module")
def world_page(world_dir: Path) -> str:
    from daemon.report.build import build_report

    store = Store(world_dir / "state" / "state.db")
    try:
        return build_report(store)
    finally:
        store.close()


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, installed with apt-get when missing (needs root, as in CI)."""
    return find_chromium()
