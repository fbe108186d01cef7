"""New names for functions and parameters: same meaning, another surface.

A name is split into its words (``calculate_triangle_area``, ``getUserInfo``,
``math.factorial``). A function's leading verb takes a plain synonym where it has one
(``get`` -> ``fetch``, ``calculate`` -> ``compute``), otherwise the name gets a neutral
suffix (``final_velocity`` -> ``final_velocity_tool``); a parameter gets a neutral suffix
(``location`` -> ``location_value``). Words keep their order and their sense: the copy reads
as the original does to a model (a weak one is thrown by clever synonyms), while a table keyed
on the exact public name finds nothing. The result never equals a name the task already uses.
"""

from __future__ import annotations

import keyword
import random
import re

VERBS: dict[str, tuple[str, ...]] = {
    "get": ("fetch", "retrieve"),
    "fetch": ("get", "retrieve"),
    "retrieve": ("get", "fetch"),
    "calculate": ("compute",),
    "calc": ("compute",),
    "compute": ("calculate",),
    "find": ("search", "locate"),
    "search": ("find",),
    "locate": ("find",),
    "lookup": ("find",),
    "check": ("verify",),
    "verify": ("check",),
    "create": ("make",),
    "make": ("create",),
    "generate": ("produce", "create"),
    "convert": ("transform",),
    "predict": ("forecast",),
    "forecast": ("predict",),
    "estimate": ("approximate",),
    "analyze": ("examine",),
    "update": ("modify",),
    "delete": ("remove",),
    "remove": ("delete",),
    "send": ("dispatch",),
    "book": ("reserve",),
    "reserve": ("book",),
    "count": ("tally",),
    "list": ("enumerate",),
    "show": ("display",),
    "solve": ("resolve",),
    "plot": ("draw",),
    "add": ("append",),
    "set": ("assign",),
    "determine": ("work_out",),
    "identify": ("recognize",),
}
"""A function's leading verb and plain synonyms that keep its sense."""

FUNCTION_SUFFIXES = ("tool", "fn", "api")
PARAM_SUFFIXES = ("value", "input", "arg")

_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def words(name: str) -> list[str]:
    """The lower-case words of an identifier (snake_case, camelCase, dotted)."""
    return [w.lower() for w in _WORDS.findall(name)]


def _candidate(parts: list[str], rng: random.Random, param: bool) -> str:
    if not param and parts[0] in VERBS and rng.random() < 0.75:
        return "_".join([rng.choice(VERBS[parts[0]]), *parts[1:]])
    suffixes = [x for x in (PARAM_SUFFIXES if param else FUNCTION_SUFFIXES) if x not in parts]
    return "_".join([*parts, rng.choice(suffixes)])


def new_name(old: str, rng: random.Random, avoid: set[str], *, param: bool = False) -> str:
    """A new identifier for ``old`` (a function's, or a parameter's with ``param``): not
    ``old``, not a Python keyword, and none of ``avoid`` (names the task uses or already
    gave out)."""
    parts = words(old) or ["value"]
    lowered = old.lower().replace(".", "_")
    for _ in range(64):
        name = _candidate(parts, rng, param)
        if (
            name.isidentifier()
            and not keyword.iskeyword(name)
            and name not in avoid
            and name != lowered
        ):
            return name
    # Many siblings with the same words: a numbered name is still new.
    base, n = _candidate(parts, rng, param), 2
    while f"{base}_{n}" in avoid:
        n += 1
    return f"{base}_{n}"
