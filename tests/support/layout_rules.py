"""The layout rules as functions over a source tree, so a test can point them at the real
tree or at a planted copy (``tests/test_layout.py``).

Every import is read from the source (at any depth: function-level and ``TYPE_CHECKING``
imports count) and made absolute: a relative import is resolved against the importing
module's package, so ``from ..store import Store`` in ``daemon/acceptance/rule.py`` is
``daemon.store``. The rules hold whether or not the linter's ban on relative imports runs.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

PACKAGES = ("daemon", "sandbox")
ACCEPTANCE = "daemon.acceptance"
PROPOSER = "daemon.improve.proposer"
TOOLENV = "daemon.suites.toolenv"

# What the pure acceptance core may import: no IO, no clocks, no threads, no randomness (its
# functions are deterministic functions of their arguments). numpy is there for array
# arithmetic only (the conditional-power walk), which is as deterministic as math.
CORE_STDLIB = frozenset(
    {
        "numpy",
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
)

# Every module outside the proposer package that the proposer may reach through imports, at
# any depth (importing ``a.b`` runs ``a``'s ``__init__`` too). None of them can read held-out
# ids, results, verdicts or the alpha ledger: the patch model and static stage, the chat
# contract and the providers, the report types, the configuration, the task contract.
# Adding a module here is a claim that it cannot reach held-out data; everything the
# proposer learns of earlier candidates comes from daemon.improve.briefing, as arguments.
PROPOSER_MAY_REACH = frozenset(
    {
        "daemon",
        "daemon.errors",
        "daemon.pyast",
        "daemon.tasks",
        "daemon.improve",
        "daemon.evaluation",
        "daemon.evaluation.coverage",
        "daemon.evaluation.report",
        "daemon.config",
        "daemon.config.assets",
        "daemon.config.policy",
        "daemon.config.secrets",
        "daemon.config.settings",
        "daemon.config.validation",
        "daemon.patches",
        "daemon.patches.apply",
        "daemon.patches.diff",
        "daemon.patches.literals",
        "daemon.patches.measurable",
        "daemon.patches.model",
        "daemon.patches.operations",
        "daemon.patches.parse",
        "daemon.patches.static",
        "daemon.patches.targets",
        "daemon.patches.tree",
        "daemon.providers",
        "daemon.providers.anthropic_messages",
        "daemon.providers.base",
        "daemon.providers.http_errors",
        "daemon.providers.local_grammar",
        "daemon.providers.local_llama",
        "daemon.providers.openai_chat",
        "daemon.providers.scripted",
        "sandbox",
        "sandbox.guest",
        "sandbox.guest.harnessd_statements",
    }
)


def modules(root: Path) -> list[Path]:
    """The Python files of ``daemon/`` and ``sandbox/`` under ``root``."""
    return sorted(p for package in PACKAGES for p in (root / package).rglob("*.py"))


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def import_statements(path: Path, name: str) -> list[tuple[str, list[str]]]:
    """Each import in ``path`` (module ``name``) as (absolute module, names taken from it);
    ``import a.b`` is ``("a.b", [])``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return list(_statements(path.read_text(encoding="utf-8"), package))


@functools.cache
def _statements(source: str, package: str) -> tuple[tuple[str, list[str]], ...]:
    # Cached by text: a planted copy of the tree parses only the file that was changed.
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                up = node.level - 1  # ``from . import`` is the package itself
                if up >= len(parts):
                    module = "." * node.level + module  # beyond the top: left as written
                else:
                    base = ".".join(parts[: len(parts) - up])
                    module = f"{base}.{module}" if module else base
            found.append((module, [alias.name for alias in node.names]))
    return tuple(found)


def imported_modules(path: Path, name: str) -> set[str]:
    """Every absolute name ``path`` imports: each module, and ``module.name`` for each name
    taken from one (it may be a submodule)."""
    found: set[str] = set()
    for module, names in import_statements(path, name):
        found.add(module)
        found.update(f"{module}.{n}" for n in names)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``daemon``/``sandbox`` it imports."""
    paths = {module_name(root, p): p for p in modules(root)}
    return {
        name: {m for m in imported_modules(path, name) if m in paths and m != name}
        for name, path in paths.items()
    }


def reach(graph: dict[str, set[str]], start: set[str]) -> set[str]:
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


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among modules, or None (a package ``__init__`` importing its own
    submodules, or a module its own package, is not a cycle)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if _within(node, dep) or _within(dep, node):
                continue
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name)
            if cycle:
                return cycle
    return None


def sandbox_imports_of_daemon(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{name} imports {dep}"
        for name, deps in graph.items()
        if _within(name, "sandbox")
        for dep in deps
        if _within(dep, "daemon")
    )


def acceptance_core_violations(root: Path) -> list[str]:
    """What ``daemon.acceptance`` imports beyond itself and the pure standard library."""
    bad = []
    for path in modules(root):
        name = module_name(root, path)
        if not _within(name, ACCEPTANCE):
            continue
        for module, _ in import_statements(path, name):
            top = module.split(".")[0]
            if top in PACKAGES or top == "" or module.startswith("."):
                if not _within(module, ACCEPTANCE):
                    bad.append(f"{name} imports {module} (outside the acceptance core)")
            elif top not in CORE_STDLIB:
                bad.append(f"{name} imports {module} (not on the core's list of pure modules)")
    return bad


def proposer_violations(graph: dict[str, set[str]]) -> list[str]:
    """The modules the proposer package reaches that are not on its allow-list."""
    closure = reach(graph, {m for m in graph if _within(m, PROPOSER)})
    return sorted(m for m in closure if not _within(m, PROPOSER) and m not in PROPOSER_MAY_REACH)


def toolenv_violations(root: Path) -> list[str]:
    """What the tool-environment worker's own code imports from ``daemon`` or ``sandbox``
    outside its folder (the worker loads that folder without them)."""
    bad = []
    for path in modules(root):
        name = module_name(root, path)
        if not _within(name, TOOLENV):
            continue
        bad += [
            f"{name} imports {module}"
            for module, _ in import_statements(path, name)
            if module.split(".")[0] in PACKAGES and not _within(module, TOOLENV)
        ]
    return bad


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
