"""Every event kind the daemon emits is listed in the events table of docs/operations.md, and
the table lists nothing the daemon does not emit."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _literal_kinds(node: ast.expr) -> set[str]:
    """The kind an ``emit`` call passes: a string, or either string of a conditional."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _literal_kinds(node.body) | _literal_kinds(node.orelse)
    return set()


def _emitted() -> set[str]:
    kinds: set[str] = set()
    for path in (ROOT / "daemon").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("emit", "_emit", "make_event"):
                kinds |= _literal_kinds(node.args[1] if name == "make_event" else node.args[0])
    return kinds


def _documented() -> set[str]:
    text = (ROOT / "docs" / "operations.md").read_text()
    table = text.split("## Events", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {kind for row in rows for kind in re.findall(r"`([a-z_.]+)`", row)}


def test_every_event_kind_is_documented_and_every_documented_kind_exists() -> None:
    emitted, documented = _emitted(), _documented()
    assert len(emitted) > 30  # the scan sees the daemon's events, not nothing
    assert emitted - documented == set(), "emitted but not in docs/operations.md's events table"
    assert documented - emitted == set(), "in docs/operations.md's events table but never emitted"
