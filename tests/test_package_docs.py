"""Every package says what it owns and what it may import, in its ``__init__``'s docstring
(the README's layout section promises it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
_OWNS = re.compile(r"^Owns(?: \([^)]*\))?:", re.MULTILINE)
_MAY_IMPORT = re.compile(r"^May import:", re.MULTILINE)


def _packages() -> list[Path]:
    return sorted(
        [*(ROOT / "daemon").rglob("__init__.py"), *(ROOT / "sandbox").rglob("__init__.py")]
    )


def missing_lines(init: Path) -> list[str]:
    """What the package's docstring lacks: an ``Owns:`` and a ``May import:`` line."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    lacks = []
    if not _OWNS.search(doc):
        lacks.append("an 'Owns:' line")
    if not _MAY_IMPORT.search(doc):
        lacks.append("a 'May import:' line")
    return lacks


def test_every_package_says_what_it_owns_and_may_import() -> None:
    packages = _packages()
    assert len(packages) >= 15, packages  # daemon's and sandbox's packages and subpackages
    bad = {str(p.relative_to(ROOT)): missing_lines(p) for p in packages if missing_lines(p)}
    assert not bad, f"package docstrings without their contract: {bad}"


def test_a_docstring_without_the_lines_is_caught(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text('"""pkg: does things.\n\nIt owns the frobs (but says so in prose)."""\n')
    assert missing_lines(init) == ["an 'Owns:' line", "a 'May import:' line"]
