"""Fixtures for the patch and coverage tests: a small harness tree owned by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

HARNESS_PY = '''\
"""A tiny harness used by the patch tests."""

from helpers.steps import bounded


def choose(tools, name):
    for tool in tools:
        if tool["name"] == name:
            return tool
    return None


def solve(task, ctx):
    seen = []
    for step in bounded(3):
        seen.append(step)
    return {"output": seen, "claimed_success": True}
'''

STEPS_PY = """\
def bounded(limit):
    count = 0
    while count < limit:
        yield count
        count += 1
"""

README = "# Tiny harness\n\nOnly for tests.\n"


@pytest.fixture
def base_harness(tmp_path: Path) -> Path:
    root = tmp_path / "base"
    (root / "helpers").mkdir(parents=True)
    (root / "harness.py").write_text(HARNESS_PY)
    (root / "helpers" / "steps.py").write_text(STEPS_PY)
    (root / "README.md").write_text(README)
    return root
