"""The static stage's checks that a patch keeps its code where the dead-code gate sees it.

The dead-code gate counts the Python statements a patch adds and which of them ran. Two
ways to put code beyond its count are refused here, before anything runs:

* **Carriage returns** in a ``.py`` file. Python ends a line at a lone ``\\r``; diffs do not,
  so one added diff line could hold many statements (and shift every later statement).
  Harness files use ``\\n`` line endings.
* **Code in data files** (``.txt``, ``.md``, ``.json``, ``.toml``) that the harness could
  read and ``exec``: a data file that parses as Python and holds a call, a definition, an
  import or a control-flow statement is code and belongs in a ``.py`` file. JSON and TOML
  values, prompts and prose do not parse that way.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Mapping

from daemon import pyast
from daemon.patches.model import PatchRejected
from sandbox.guest.harnessd_statements import COMPOUND_STATEMENTS

# A call, a definition, an import or any control-flow statement.
_CODE_NODES = (ast.Call, ast.Lambda, ast.Import, ast.ImportFrom, *COMPOUND_STATEMENTS)


def _is_code(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = pyast.parse(data.decode("utf-8"))
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return False
    return any(isinstance(node, _CODE_NODES) for node in ast.walk(tree))


def check_measurable(files: Mapping[str, bytes], changed: tuple[str, ...]) -> None:
    """Raise PatchRejected if a changed file hides code from the dead-code count."""
    for path in changed:
        data = files.get(path)
        if data is None:
            continue  # deleted
        if path.endswith(".py"):
            if b"\r" in data:
                raise PatchRejected(
                    f"{path}: contains a carriage return; harness files use \\n line endings"
                )
        elif _is_code(data):
            raise PatchRejected(
                f"{path}: holds Python code (calls, definitions or control flow); code goes in "
                ".py files, where the dead-code gate measures whether it runs"
            )
