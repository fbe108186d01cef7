"""The layout rules the architecture relies on, checked on the source itself (the rules are
functions in ``tests/support/layout_rules.py``; each is also shown catching a planted break)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import layout_rules as layout

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
DAEMON = ROOT / "daemon"
# The modules that own a table (and the store, which owns the connection and the schema).
SQL_OWNERS = {
    "daemon/store.py",
    "daemon/events.py",
    "daemon/gateway/ledger.py",
    "daemon/lineage/versions.py",
    "daemon/lineage/candidates.py",
    "daemon/evaluation/results.py",
    "daemon/improve/alpha_ledger.py",
    "daemon/improve/replication.py",
    "daemon/live/requests.py",
}
_SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE)\b")


def _strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def test_sql_is_written_only_by_the_table_owners() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in layout.modules(ROOT)
        if str(p.relative_to(ROOT)) not in SQL_OWNERS and any(_SQL.search(s) for s in _strings(p))
    ]
    assert not offenders, f"SQL outside the table owners: {offenders}"


def test_daemon_top_level_stays_small() -> None:
    # A module is as long as its one job needs (no line cap); the top level holds only the
    # service, entry points and the contracts every component shares.
    top = [p.name for p in DAEMON.glob("*.py")]
    assert len(top) <= 12, top


def test_no_import_cycles_between_modules_and_sandbox_never_imports_daemon() -> None:
    graph = layout.import_graph(ROOT)
    assert not layout.sandbox_imports_of_daemon(graph)
    cycle = layout.import_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_acceptance_core_is_pure() -> None:
    """``daemon.acceptance`` imports nothing from ``daemon`` outside itself, and from the
    standard library only what computes (the guarantees in DESIGN.md are about this code)."""
    assert not layout.acceptance_core_violations(ROOT)


def test_the_proposer_reaches_only_its_allow_list() -> None:
    """The information rule, enforced by the import graph: everything the proposer package
    imports, at any depth, is on a list of modules that cannot read held-out ids, results,
    verdicts or the alpha ledger."""
    graph = layout.import_graph(ROOT)
    assert any(m.startswith(layout.PROPOSER + ".") for m in graph)
    bad = layout.proposer_violations(graph)
    assert not bad, (
        f"{layout.PROPOSER} reaches {bad}, not on its allow-list (PROPOSER_MAY_REACH in "
        "tests/support/layout_rules.py): add a module there only if it cannot reach held-out "
        "data; the proposer learns of held-out outcomes only what daemon.improve.briefing "
        "hands it"
    )
    # The list names only what exists (a module renamed away must leave it).
    assert set(graph) >= layout.PROPOSER_MAY_REACH, layout.PROPOSER_MAY_REACH - set(graph)


def test_the_tool_environment_code_imports_only_its_own_folder() -> None:
    assert not layout.toolenv_violations(ROOT)


@pytest.fixture(scope="module")
def planted_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the real ``daemon/`` and ``sandbox/`` sources, for planting imports in."""
    root = tmp_path_factory.mktemp("tree")
    for package in layout.PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("*.pyc"))
    assert layout.proposer_violations(layout.import_graph(root)) == []  # clean before planting
    return root


def _planted(clean: Path, where: Path, plants: dict[str, str]) -> Path:
    """A copy of the clean tree at ``where``, with each module's planted line appended."""
    shutil.copytree(clean, where)
    for module, line in plants.items():
        path = where / module
        path.write_text(path.read_text() + f"\n{line}\n")
    return where


def test_a_relative_import_out_of_the_acceptance_core_is_caught(
    planted_root: Path, tmp_path: Path
) -> None:
    assert layout.acceptance_core_violations(planted_root) == []
    plants = {
        "daemon/acceptance/rule.py": "from ..store import Store",
        "daemon/acceptance/power.py": "from . import knobs",
    }
    root = _planted(planted_root, tmp_path / "tree", plants)
    assert layout.acceptance_core_violations(root) == [
        "daemon.acceptance.rule imports daemon.store (outside the acceptance core)"
    ]


@pytest.mark.parametrize(
    ("module", "line", "reached"),
    [
        # A relative import of the held-out stage: once it is resolved, the closure has it.
        (
            "daemon/improve/proposer/search.py",
            "from ..heldout import HeldoutRun",
            "daemon.improve.heldout",
        ),
        # A module nobody put on the allow-list, reached through a permitted one.
        ("daemon/patches/tree.py", "from daemon.improve import tried", "daemon.improve.tried"),
        ("daemon/improve/proposer/prompt.py", "import daemon.store", "daemon.store"),
    ],
)
def test_a_planted_import_the_proposer_may_not_reach_is_caught(
    planted_root: Path, tmp_path: Path, module: str, line: str, reached: str
) -> None:
    root = _planted(planted_root, tmp_path / "tree", {module: line})
    assert reached in layout.proposer_violations(layout.import_graph(root))


def test_relative_imports_resolve_to_absolute_names(tmp_path: Path) -> None:
    (tmp_path / "daemon" / "a" / "b").mkdir(parents=True)
    init, leaf = tmp_path / "daemon/a/__init__.py", tmp_path / "daemon/a/b/c.py"
    init.write_text("from . import x\nfrom .b import c\n")
    leaf.write_text("from . import d\nfrom .. import y\nfrom ...store import Store\n")
    assert layout.imported_modules(init, "daemon.a") == {
        "daemon.a",
        "daemon.a.x",
        "daemon.a.b",
        "daemon.a.b.c",
    }
    assert layout.imported_modules(leaf, "daemon.a.b.c") == {
        "daemon.a.b",
        "daemon.a.b.d",
        "daemon.a",
        "daemon.a.y",
        "daemon.store",
        "daemon.store.Store",
    }


def test_the_linter_refuses_a_relative_import(tmp_path: Path) -> None:
    """Ruff's ban on relative imports (TID252), with the project's own settings."""
    source = 'from ..store import Store\n\n__all__ = ["Store"]\n'
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--output-format=concise",
            "--stdin-filename",
            "daemon/acceptance/planted.py",
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "TID252" in result.stdout, result.stdout


def test_tests_import_helpers_never_other_test_modules() -> None:
    """Shared test code lives in helper modules (tests/support/, tests/daemon_process.py, an
    area's non-test modules), so running or deleting one test module never changes another."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for name, _ in layout.import_statements(path, layout.module_name(ROOT, path)):
            if name.startswith("tests.") and name.split(".")[-1].startswith("test_"):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_each_class_and_type_alias_name_is_defined_once() -> None:
    """One name per concept: two things called ``Step`` (or two copies of one ``Emit``) make
    a reader guess which is meant. Private names count too."""
    offenders = layout.duplicate_type_names(ROOT, layout.modules(ROOT))
    assert not offenders, f"names defined more than once (rename one, or import it): {offenders}"


def test_a_name_defined_twice_is_caught(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from typing import Any, TypeVar\nT = TypeVar('T')\nclass Step: ...\n"
        "Emit = dict[str, Any]\nMAX = 3\n"
    )
    (tmp_path / "b.py").write_text(
        "from typing import TYPE_CHECKING, TypeVar\nT = TypeVar('T')\nMAX = 4\n"
        "Step = int | str\nif TYPE_CHECKING:\n    class Emit: ...\n"
    )
    (tmp_path / "c.py").write_text("def f() -> None:\n    class Step: ...\n")
    found = layout.duplicate_type_names(tmp_path, sorted(tmp_path.glob("*.py")))
    assert found == {"Emit": ["a.py", "b.py"], "Step": ["a.py", "b.py"]}


def test_a_tool_environment_import_of_the_daemon_is_caught(
    planted_root: Path, tmp_path: Path
) -> None:
    assert layout.toolenv_violations(planted_root) == []
    plants = {"daemon/suites/toolenv/bfcl_api.py": "from ...store import Store"}
    root = _planted(planted_root, tmp_path / "tree", plants)
    assert layout.toolenv_violations(root) == [
        "daemon.suites.toolenv.bfcl_api imports daemon.store"
    ]
