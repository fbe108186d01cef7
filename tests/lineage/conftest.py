"""Fixtures for the lineage tests: a real SQLite store, a real git, a seed harness."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lineage_helpers import write_seed

from daemon.lineage import Lineage
from daemon.store import Store


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    return write_seed(tmp_path / "seed")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "state" / "harnessd.db")
    yield opened
    opened.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "harnesses"


@pytest.fixture
def lineage(store: Store, root: Path) -> Lineage:
    return Lineage(store, root)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path
