"""The layout rules the architecture relies on, checked on the source itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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
    "daemon/live/requests.py",
}
_SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE)\b")


def _modules() -> list[Path]:
    return sorted([*DAEMON.rglob("*.py"), *(ROOT / "sandbox").rglob("*.py")])


def _strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def test_sql_is_written_only_by_the_table_owners() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in _modules()
        if str(p.relative_to(ROOT)) not in SQL_OWNERS and any(_SQL.search(s) for s in _strings(p))
    ]
    assert not offenders, f"SQL outside the table owners: {offenders}"


def test_daemon_top_level_stays_small() -> None:
    # A module is as long as its one job needs (no line cap); the top level holds only the
    # service, entry points and the contracts every component shares.
    top = [p.name for p in DAEMON.glob("*.py")]
    assert len(top) <= 12, top


def _imports(path: Path, package: str) -> set[str]:
    """Modules of ``daemon``/``sandbox`` that ``path`` imports, at any depth (TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.split(".")[0] in ("daemon", "sandbox")}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_no_import_cycles_between_modules_and_sandbox_never_imports_daemon() -> None:
    names = {_module_name(p): p for p in _modules()}
    graph = {
        name: {m for m in _imports(path, name) if m in names and m != name}
        for name, path in names.items()
    }
    for name, deps in graph.items():
        if name.startswith("sandbox"):
            assert not any(d.startswith("daemon") for d in deps), (name, deps)
    # Cycles among modules (a package __init__ re-exporting its own modules is not a cycle).
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in graph[node]:
            if node.startswith(dep + "."):
                continue  # a module importing its own package's __init__
            if dep.startswith(node + "."):
                continue  # a package __init__ importing its own submodules
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name)


def _graph() -> dict[str, set[str]]:
    names = {_module_name(p): p for p in _modules()}
    return {
        name: {m for m in _imports(path, name) if m in names and m != name}
        for name, path in names.items()
    }


def _reach(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    """Every module reachable from ``start`` through imports (importing ``a.b`` also runs
    the package ``a``'s ``__init__``)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(
            ".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in graph
        )
        todo.extend(graph.get(name, ()))
    return seen


# What the pure acceptance core may import from the standard library: no IO, no clocks, no
# threads, no randomness (its functions are deterministic functions of their arguments).
_CORE_STDLIB = {
    "__future__",
    "collections",
    "dataclasses",
    "enum",
    "functools",
    "itertools",
    "math",
    "typing",
    "bisect",
    "heapq",
    "fractions",
    "statistics",
    "operator",
}


def test_acceptance_core_is_pure() -> None:
    """``daemon.acceptance`` imports nothing from ``daemon`` outside itself, and from the
    standard library only what computes (the guarantees in DESIGN.md are about this code)."""
    for path in sorted((DAEMON / "acceptance").rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mods = [node.module or ""] if node.level == 0 else ["daemon.acceptance"]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                if top in ("daemon", "sandbox"):
                    assert mod == "daemon.acceptance" or mod.startswith("daemon.acceptance."), (
                        f"{name} imports {mod}: the acceptance core imports nothing from "
                        "daemon outside itself"
                    )
                else:
                    assert top in _CORE_STDLIB, (
                        f"{name} imports {mod}: not on the core's list of pure modules"
                    )


# Modules through which held-out data can be read: the store and every table owner, the
# lineage (candidates carry their verdicts), the alpha ledger, the held-out stage and the
# pipeline that runs it, the runtime and the splits (held-out ids), the acceptance core.
_HELDOUT_REACHABLE = (
    "daemon.store",
    "daemon.evaluation.results",
    "daemon.evaluation.runtime",
    "daemon.evaluation.evaluator",
    "daemon.suites",
    "daemon.lineage",
    "daemon.gateway",
    "daemon.acceptance",
    "daemon.improve.alpha_ledger",
    "daemon.improve.heldout",
    "daemon.improve.pipeline",
    "daemon.improve.briefing",
    "daemon.live",
    "daemon.control",
)


def proposer_closure_violations(graph: dict[str, set[str]]) -> list[str]:
    closure = _reach(graph, {m for m in graph if m.startswith("daemon.improve.proposer")})
    return sorted(
        m for m in closure if any(m == b or m.startswith(b + ".") for b in _HELDOUT_REACHABLE)
    )


def test_the_proposer_cannot_import_anything_that_reaches_heldout_results() -> None:
    """The information rule, enforced by the import graph: nothing the proposer package
    imports, at any depth, can read held-out ids, results, verdicts or the alpha ledger."""
    graph = _graph()
    assert any(m.startswith("daemon.improve.proposer.") for m in graph)
    bad = proposer_closure_violations(graph)
    assert not bad, (
        f"daemon.improve.proposer reaches {bad}: the proposer may learn of held-out outcomes "
        "only what daemon.improve.briefing hands it"
    )
    # The packages on the way must not import anything themselves (their __init__ runs).
    for package in ("daemon", "daemon.improve", "daemon.evaluation"):
        assert not graph.get(package), (package, graph.get(package))


def test_tests_import_helpers_never_other_test_modules() -> None:
    """Shared test code lives in helper modules (tests/support/, tests/daemon_process.py, an
    area's non-test modules), so running or deleting one test module never changes another."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if name.startswith("tests.") and name.split(".")[-1].startswith("test_"):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


# A module-level name that names a type: CamelCase, not an ALL_CAPS constant (``Emit``,
# ``_Closed``; not ``MAX_LINE`` or ``log``).
_TYPE_NAME = re.compile(r"^_*[A-Z]\w*[a-z]\w*$")
# A type variable is a placeholder local to each generic definition, not a type of its own.
_TYPE_VARIABLES = {"TypeVar", "ParamSpec", "TypeVarTuple"}


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run at import, including those under a module-level ``if`` or ``try``
    (``if TYPE_CHECKING:`` aliases count)."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            found += _module_level(node.body) + _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            found += _module_level(node.body) + _module_level(node.orelse)
            found += _module_level(node.finalbody)
            for handler in node.handlers:
                found += _module_level(handler.body)
        else:
            found.append(node)
    return found


def _type_names(tree: ast.Module) -> set[str]:
    """The classes and type aliases ``tree`` defines at module level."""
    names: set[str] = set()
    for node in _module_level(tree.body):
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if ast.unparse(node.annotation).split(".")[-1] == "TypeAlias":
                names.add(node.target.id)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _TYPE_NAME.match(node.targets[0].id)
        ):
            value = node.value
            called = ast.unparse(value.func).split(".")[-1] if isinstance(value, ast.Call) else ""
            if called not in _TYPE_VARIABLES:
                names.add(node.targets[0].id)
    return names


def duplicate_type_names(root: Path, modules: list[Path]) -> dict[str, list[str]]:
    """Every class or type-alias name defined in more than one of ``modules``, with where."""
    where: dict[str, list[str]] = {}
    for path in modules:
        for name in _type_names(ast.parse(path.read_text())):
            where.setdefault(name, []).append(str(path.relative_to(root)))
    return {name: paths for name, paths in sorted(where.items()) if len(paths) > 1}


def test_each_class_and_type_alias_name_is_defined_once() -> None:
    """One name per concept: two things called ``Step`` (or two copies of one ``Emit``) make
    a reader guess which is meant. Private names count too."""
    offenders = duplicate_type_names(ROOT, _modules())
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
    found = duplicate_type_names(tmp_path, sorted(tmp_path.glob("*.py")))
    assert found == {"Emit": ["a.py", "b.py"], "Step": ["a.py", "b.py"]}
