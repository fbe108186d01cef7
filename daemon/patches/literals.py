"""The static screen for data a patch smuggles in: memorised answers travel as data.

BFCL simple's 400 answers compress to about 20 KB and HumanEval's 164 solutions to 16 KB,
both well under a patch's size limit. Whatever the encoding (a JSON-like table, base64 or
hex text, zlib bytes, a data file, comments read back through ``__file__``), the data has to
sit in the patch as string or bytes literals, numbers, comments, names or a data file. So the
screen measures, per changed file, how many bytes of those the patch adds (the candidate's
payload minus the parent's), and the longest run of encoded-looking text in any one of them:
base64/hex alphabet or unprintable characters without a space (prose and code have spaces
every few characters; bytes literals count in full). Names (of variables, attributes,
functions, classes, arguments, keywords, imports; readable back through ``vars()`` or
``dir()``) count once each: a table in names needs one new name per entry, ordinary code
adds a few dozen. A new file's path counts too (data in file names, read by listing the
directory). Harness code is parsed, never run.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from dataclasses import dataclass

from daemon import pyast

_ENCODED = re.compile(r"[A-Za-z0-9+/=_\-]+|[^\x20-\x7e\s]+")


@dataclass(frozen=True)
class Payload:
    """The data in one file: bytes of literals, comments and numbers; its longest encoded run;
    the names it uses (counted as data once each, beyond the parent's)."""

    size: int
    longest_run: int
    where: str  # e.g. "line 12 (a string literal)"
    names: frozenset[str] = frozenset()


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.keyword):
        return node.arg
    if isinstance(node, ast.alias):
        return node.asname or node.name
    return None


def _longest_run(text: str) -> int:
    return max((len(m.group()) for m in _ENCODED.finditer(text)), default=0)


def _python_payload(source: str) -> Payload:
    size, longest, where = 0, 0, ""

    def note(length: int, run: int, line: int, kind: str) -> None:
        nonlocal size, longest, where
        size += length
        if run > longest:
            longest, where = run, f"line {line} ({kind})"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = pyast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if (name := _name(node)) is not None:
            names.add(name)
            run = _longest_run(name)
            if run > longest:
                longest, where = run, f"line {getattr(node, 'lineno', 0)} (a name)"
        if not isinstance(node, ast.Constant):
            continue
        value, line = node.value, getattr(node, "lineno", 0)
        if isinstance(value, bytes):
            note(len(value), len(value), line, "a bytes literal")
        elif isinstance(value, str):
            note(len(value.encode("utf-8")), _longest_run(value), line, "a string literal")
        elif isinstance(value, int | float | complex) and not isinstance(value, bool):
            digits = len(repr(value))
            note(digits, digits, line, "a number")
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                note(
                    len(tok.string.encode("utf-8")),
                    _longest_run(tok.string),
                    tok.start[0],
                    "a comment",
                )
    except (tokenize.TokenError, SyntaxError):
        pass  # the compile check reports broken files
    return Payload(size, longest, where, frozenset(names))


def payload(path: str, data: bytes) -> Payload:
    """The data ``path`` holds. Python files by their literals, numbers and comments; any other
    file is data throughout."""
    if path.endswith(".py"):
        try:
            return _python_payload(data.decode("utf-8"))
        except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            pass  # the compile check rejects it with the reason
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Payload(len(data), len(data), "binary content")
    return Payload(len(data), _longest_run(text), "its content")


@dataclass(frozen=True)
class AddedData:
    added_bytes: int
    worst_file: str
    longest_run: int
    run_file: str
    run_where: str


def screen(before: dict[str, bytes], after: dict[str, bytes]) -> AddedData:
    """What the change from ``before`` to ``after`` (changed files only) adds in data."""
    added, worst, worst_added = 0, "", -1
    run, run_file, run_where = 0, "", ""
    for path, data in sorted(after.items()):
        new = payload(path, data)
        old = payload(path, before[path]) if path in before else Payload(0, 0, "")
        named = sum(len(n.encode("utf-8")) for n in new.names - old.names)
        grown = max(0, new.size - old.size) + named + (0 if path in before else len(path))
        added += grown
        if grown > worst_added:
            worst, worst_added = path, grown
        if new.longest_run > max(run, old.longest_run):
            run, run_file, run_where = new.longest_run, path, new.where
    return AddedData(added, worst, run, run_file, run_where)
