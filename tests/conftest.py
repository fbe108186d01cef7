"""Shared test configuration: anyio on asyncio, and fixtures every area may use."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.settings import DEFAULT_STATE_DIR, PROJECT_ROOT


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
