"""Fixtures for ledger and budget tests: a fresh SQLite store and a settable budget policy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from metering_helpers import Clock, Policies

from daemon.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "state.db")
    yield db
    db.close()


@pytest.fixture
def clock() -> Clock:
    return Clock(1_800_000_000.0)


@pytest.fixture
def policies() -> Policies:
    return Policies()
