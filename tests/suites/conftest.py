"""Suites loaded from the real pinned wheels, and a real sandboxed code checker."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from daemon.suites import load_suite
from daemon.suites.bfcl import CATEGORIES, BfclSuite
from daemon.suites.codecheck import DockerCodeChecker
from daemon.suites.humaneval import HumanEvalSuite
from sandbox.engine import DockerEngine
from sandbox.image import ensure_image
from sandbox.labels import INSTANCE, instance_labels
from sandbox.limits import Limits


@pytest.fixture(scope="session")
def bfcl(asset_cache: Path) -> BfclSuite:
    suite = load_suite("bfcl:" + ",".join(CATEGORIES), asset_cache)
    assert isinstance(suite, BfclSuite)
    return suite


@pytest.fixture(scope="session")
def humaneval(asset_cache: Path) -> HumanEvalSuite:
    suite = load_suite("humaneval", asset_cache)
    assert isinstance(suite, HumanEvalSuite)
    return suite


@pytest.fixture
async def checker(tmp_path: Path) -> AsyncIterator[DockerCodeChecker]:
    """A DockerCodeChecker on the real sandbox image; checks that no container and no check
    directory outlives the test."""
    instance = "suites-" + secrets.token_hex(4)
    async with DockerEngine.connected() as engine:
        image = await ensure_image(engine, log=lambda line: None)
        limits = Limits(memory_mb=256, pids=32, output_kb=64)
        yield DockerCodeChecker(
            engine, image, limits, instance_labels(instance), temp_parent=tmp_path
        )
        left = await engine.call(
            "listing test containers",
            engine.api.containers,
            all=True,
            filters={"label": f"{INSTANCE}={instance}"},
        )
        assert left == [], f"containers left behind: {left}"
    assert list(tmp_path.iterdir()) == [], "check directories left behind"
