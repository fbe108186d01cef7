"""Start-up guard: make sure ``daemon`` and ``sandbox`` are this project's packages.

Both names are common. python-daemon installs a top-level ``daemon`` package; if it sits
earlier on ``sys.path`` (or was installed over ours), our entry points would import the
wrong code. The guard finds both by name, checks the marker each of our packages carries
and that they come from the same project root, and explains the fix otherwise.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from daemon.errors import SetupError

_NAMES = ("daemon", "sandbox")


def import_problems() -> list[str]:
    """Descriptions of every import name that does not resolve to this project."""
    problems: list[str] = []
    roots: dict[str, Path] = {}
    for name in _NAMES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            problems.append(f"'{name}' cannot be imported ({exc})")
            continue
        origin = getattr(module, "__file__", None)
        if not getattr(module, "HARNESSD_PACKAGE", False) or origin is None:
            where = origin or "a namespace package"
            problems.append(
                f"import name '{name}' resolves to {where}, which is not harnessd's "
                f"(python-daemon also installs a top-level 'daemon'): run harnessd from "
                f"the project's .venv, or 'pip uninstall python-daemon' in this environment"
            )
            continue
        roots[name] = Path(origin).resolve().parent.parent
    if len(set(roots.values())) > 1:
        detail = ", ".join(f"{n} from {r}" for n, r in sorted(roots.items()))
        problems.append(f"'daemon' and 'sandbox' come from different installs ({detail})")
    return problems


def check_import_names() -> None:
    problems = import_problems()
    if problems:
        raise SetupError("; ".join(problems))


if __name__ == "__main__":  # pragma: no cover - manual diagnosis
    for line in import_problems() or ["ok"]:
        print(line, file=sys.stderr)
