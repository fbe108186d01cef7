"""Shared test configuration: anyio on asyncio, and fixtures every area may use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.settings import _default_state_dir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def asset_cache() -> Path:
    """The pinned-asset cache that ``scripts/setup`` (``harnessd fetch``) filled.

    Tests share it instead of downloading the model and data into every temporary state dir.
    """
    return Path(os.environ.get("HARNESSD_TEST_CACHE") or _default_state_dir() / "cache")
