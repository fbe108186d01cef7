"""Statement identities for harness coverage: one line number per statement.

Line coverage cannot tell apart two statements on one line (``a = 1; b = f()``) or a
one-line function's body from its ``def`` (``def f(): return 1``), so the guest compiles
every harness file from an AST in which each statement, with all of its own expressions,
carries one line number of its own: the statement's real first line for the first
statement that starts on that line, and a virtual number past the end of the file for the
others. A line event then names exactly one statement. The host computes the same numbering
from the same source (this module is imported by both; stdlib only) and maps executed
lines back to statements.

Statements that compile to nothing even when they run (docstrings, ``global`` and
``nonlocal``, annotations without a value inside a function) are not counted: they can
never produce a line event, so counting them would call them dead whatever happens.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# Virtual numbers start well past any real line so they can never collide with one.
VIRTUAL_BASE = 1_000_000


@dataclass(frozen=True)
class Statement:
    """One countable statement: its line number in the compiled code (``line``) and the
    real source lines its own text spans (``first``..``last``, nested bodies excluded)."""

    line: int
    first: int
    last: int
    kind: str

    def own_lines(self) -> range:
        return range(self.first, self.last + 1)


def _own_nodes(
    stmt: ast.stmt | ast.excepthandler | ast.expr, lambdas: list[ast.Lambda]
) -> list[ast.AST]:
    """The statement (or except-clause, or lambda body) and every node of its own, stopping
    at nested statements and except-clauses, which get numbers of their own, and at the
    bodies of lambdas, which are collected into ``lambdas`` to be numbered apart (a lambda
    body runs when the lambda is called, not when the statement that makes it runs)."""
    found: list[ast.AST] = [stmt]
    pending: list[ast.AST] = [stmt]
    while pending:
        node = pending.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt | ast.excepthandler):
                continue
            if isinstance(node, ast.Lambda) and child is node.body:
                lambdas.append(node)
                continue
            if isinstance(child, ast.match_case):
                pending.append(child.pattern)
                if child.guard is not None:
                    pending.append(child.guard)
                found.extend([child.pattern] + ([child.guard] if child.guard else []))
                continue
            found.append(child)
            pending.append(child)
    return found


def _own_last_line(stmt: ast.stmt | ast.excepthandler | ast.expr, nodes: list[ast.AST]) -> int:
    last = stmt.lineno
    for node in nodes:
        end = getattr(node, "end_lineno", None)
        if node is not stmt and isinstance(end, int):
            last = max(last, end)
    if not isinstance(stmt, COMPOUND_STATEMENTS):
        last = max(last, stmt.end_lineno or stmt.lineno)
    return last


# Statements whose body is other statements (their own line ends where their header does).
# The host's patch reading uses the same list.
COMPOUND_STATEMENTS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Match,
    ast.TryStar,
)


def _is_docstring(stmt: ast.stmt, parent: ast.AST, index: int) -> bool:
    body_owner = isinstance(
        parent, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    )
    return (
        body_owner
        and index == 0
        and isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _countable(stmt: ast.stmt, parent: ast.AST, index: int, in_function: bool) -> bool:
    if isinstance(stmt, ast.Global | ast.Nonlocal):
        return False
    if _is_docstring(stmt, parent, index):
        return False
    return not (isinstance(stmt, ast.AnnAssign) and stmt.value is None and in_function)


def _walk(tree: ast.Module) -> list[tuple[ast.stmt | ast.excepthandler, bool]]:
    """Every statement and except-clause with whether it counts, in source order.

    An except-clause's type test runs whenever an exception reaches its ``try``, matching
    or not, so it needs a number of its own or ``except E: handle()`` on one line would
    mark ``handle()`` as run; it is not counted (it is not a statement)."""
    out: list[tuple[ast.stmt | ast.excepthandler, bool]] = []

    def visit(parent: ast.AST, in_function: bool) -> None:
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            items = getattr(parent, field, None)
            if not isinstance(items, list):
                continue
            for index, item in enumerate(items):
                if isinstance(item, ast.stmt):
                    out.append((item, _countable(item, parent, index, in_function)))
                    inner = in_function or isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    if isinstance(item, ast.ClassDef):
                        inner = False
                    visit(item, inner)
                elif isinstance(item, ast.excepthandler):
                    out.append((item, False))
                    visit(item, in_function)
                elif isinstance(item, ast.match_case):
                    visit(item, in_function)

    visit(tree, False)
    out.sort(key=lambda pair: (pair[0].lineno, pair[0].col_offset))
    return out


def _renumber(nodes: list[ast.AST], line: int) -> None:
    for node in nodes:
        if hasattr(node, "lineno"):
            node.lineno = line
            node.end_lineno = line  # type: ignore[attr-defined]
            # One line: columns must not run backwards, and carets need not be exact.
            node.col_offset = 0  # type: ignore[attr-defined]
            node.end_col_offset = 1  # type: ignore[attr-defined]


def number(tree: ast.Module) -> list[Statement]:
    """Give every statement of ``tree`` its own line number, in place; returns the
    countable statements (lambda bodies among them, as kind ``Lambda``). Every node of a
    statement's own ends up on that one line."""
    taken: set[int] = set()
    virtual = VIRTUAL_BASE
    counted: list[Statement] = []

    def allot(first: int) -> int:
        nonlocal virtual
        if first in taken:
            virtual += 1
            return virtual
        taken.add(first)
        return first

    for stmt, counts in _walk(tree):
        lambdas: list[ast.Lambda] = []
        nodes = _own_nodes(stmt, lambdas)
        first, last = stmt.lineno, _own_last_line(stmt, nodes)  # before renumbering
        line = allot(first)
        _renumber(nodes, line)
        if counts:
            counted.append(Statement(line, first, last, type(stmt).__name__))
        while lambdas:
            body = lambdas.pop(0).body
            first, inner = body.lineno, _own_nodes(body, lambdas)
            last = _own_last_line(body, inner)
            line = allot(first)
            _renumber(inner, line)
            counted.append(Statement(line, first, last, "Lambda"))
    return counted


def parse_numbered(source: str, filename: str) -> tuple[ast.Module, list[Statement]]:
    """Parse ``source`` and number its statements (raises SyntaxError like ``compile``)."""
    tree = ast.parse(source, filename, "exec")
    return tree, number(tree)
