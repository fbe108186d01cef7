"""Shared test configuration: anyio on asyncio, and helpers every area may use."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
