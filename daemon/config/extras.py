"""The optional extras of ``pyproject.toml``, and a clear stop when one is missing.

``scripts/setup`` installs every extra; an install that left one out (``pip install -e .``)
still runs everything else, and code that needs a missing extra says which, and how to add
it, instead of failing deep inside with an ``ImportError``.
"""

from __future__ import annotations

import importlib.util
from typing import Literal

from daemon.errors import SetupError

Extra = Literal["toolenv", "report"]

# The import names each extra's packages provide (pyproject.toml lists the distributions).
EXTRAS: dict[Extra, tuple[str, ...]] = {
    "toolenv": ("mpmath", "yaml", "docstring_parser", "deepdiff", "email_validator"),
    "report": ("matplotlib",),
}


def missing(extra: Extra, modules: tuple[str, ...] | None = None) -> list[str]:
    """The modules of ``extra`` (or only ``modules`` of it) that cannot be imported."""
    return [m for m in modules or EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: Extra, needed_for: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`SetupError` naming the extra and the command that installs it when any
    of its modules (or only ``modules`` of it) is missing."""
    lacking = missing(extra, modules)
    if lacking:
        raise SetupError(
            f"{needed_for} needs the optional dependencies '{extra}' (missing: "
            f"{', '.join(lacking)}): install them with "
            f"\"pip install -c scripts/constraints.txt -e '.[{extra}]'\" in the harnessd "
            "checkout (scripts/setup installs every extra)"
        )
