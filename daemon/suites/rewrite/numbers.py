"""New numbers for a question: the same kind of number, another value.

Only numbers written in digits are rewritten (``10``, ``3.5``, ``2,000``); a new value keeps
the original's shape: as many digits, the same decimals, thousands separators, a year stays
a plausible year. Zero and one stay as they are: they often carry meaning beyond their value
("1 call", "0-indexed").
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

NUMBER = re.compile(r"(?<![\w./:-])(\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(\.\d+)?(?![\w]|[.:/-]\d)")
"""A number in digits standing alone: not part of a word (``H2O``, ``v2``), a date or time
(``2023-05-01``, ``10:30``), a version (``1.2.3``) or a fraction (``3/4``); in a list
(``[22,33,42]``) each on its own, thousands grouped (``1,250``) as one."""


@dataclass(frozen=True)
class Written:
    """One number as the question writes it."""

    start: int
    end: int
    text: str
    value: float
    decimals: int
    grouped: bool  # thousands separators

    @property
    def integral(self) -> bool:
        return self.decimals == 0


def numbers_in(text: str) -> list[Written]:
    found = []
    for m in NUMBER.finditer(text):
        whole, frac = m.group(1), m.group(2) or ""
        decimals = len(frac) - 1 if frac else 0
        value = float(whole.replace(",", "") + frac)
        found.append(Written(m.start(), m.end(), m.group(0), value, decimals, "," in whole))
    return found


def _format(value: float, like: Written) -> str:
    if like.integral:
        return f"{int(value):,}" if like.grouped else str(int(value))
    return f"{value:,.{like.decimals}f}" if like.grouped else f"{value:.{like.decimals}f}"


def new_value(like: Written, rng: random.Random, avoid: set[float]) -> float | None:
    """Another number of ``like``'s shape, none of ``avoid``; None if there is none (0, 1)."""
    value = like.value
    if value in (0.0, 1.0):
        return None
    whole = int(abs(value))
    digits = len(str(whole))
    for _ in range(200):
        if like.integral and digits == 4 and 1800 <= whole <= 2100:
            lo, hi = max(1800, whole - 40), min(2100, whole + 40)
            candidate = float(rng.randint(lo, hi))
        elif like.integral:
            lo = 2 if digits == 1 else 10 ** (digits - 1)
            candidate = float(rng.randint(lo, 10**digits - 1))
        else:
            scale = 10**like.decimals
            lo = 0 if digits == 1 else 10 ** (digits - 1)
            # Below one stays below one (a probability, a significance level, a rate).
            hi = 1 if whole == 0 else 10**digits
            units = rng.randint(max(1, lo * scale), hi * scale - 1)
            if units % scale == 0:  # keep it visibly a decimal, as the original is
                units += rng.randint(1, scale - 1) if scale > 1 else 0
            candidate = units / scale
        if candidate not in avoid and candidate != value and candidate not in (0.0, 1.0):
            return candidate
    return None


def written(value: float, like: Written) -> str:
    """``value`` written in ``like``'s shape."""
    return _format(value, like)
