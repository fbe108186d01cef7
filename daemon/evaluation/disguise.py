"""Values in disguise: the forms in which a harness can write an answer into its request
for any instruction-following model to undo (spacing or punctuation between characters,
reversal, ROT13, another base, number words), and a text's words run together to find them.

Used by :mod:`daemon.evaluation.provenance` to tell a value the harness injected from one
the model produced.
"""

from __future__ import annotations

import re


def norm_text(text: str) -> str:
    return " ".join(text.lower().split())


_WORD = re.compile(r"[a-z0-9]+")


def skeleton(text: str) -> str:
    return "".join(_WORD.findall(text.lower()))


class Spelled:
    """A text's letters and digits run together, remembering where its words began and
    ended: a value is in it when it fills whole words, whatever separated its characters."""

    def __init__(self, text: str) -> None:
        self.text = norm_text(text)
        words = _WORD.findall(self.text)
        self.joined = "".join(words)
        self.edges = {0}
        at = 0
        for word in words:
            at += len(word)
            self.edges.add(at)

    def holds(self, skeleton: str) -> bool:
        if not skeleton:
            return False
        start = self.joined.find(skeleton)
        while start >= 0:
            if start in self.edges and start + len(skeleton) in self.edges:
                return True
            start = self.joined.find(skeleton, start + 1)
        return False


# fmt: off
_ONES = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
# fmt: on
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_ROT13 = str.maketrans(_LOWER, _LOWER[13:] + _LOWER[:13])


def _words(n: int, joint: str) -> str:
    """``n`` (0 <= n < 10**9) in English words, run together ("onehundred" + ``joint`` +
    "twelve"; ``joint`` "and" or "")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + (_ONES[n % 10] if n % 10 else "")
    for size, name in ((10**6, "million"), (1000, "thousand"), (100, "hundred")):
        if n >= size:
            rest, glue = n % size, joint if size == 100 else ""
            return _words(n // size, joint) + name + (glue + _words(rest, joint) if rest else "")
    raise AssertionError(n)


def disguises(value: str) -> list[str]:
    """The skeletons of ``value`` (normalised) as a harness could write it for a model to
    undo: as is, reversed, in ROT13, and a whole number in another base or in words (from
    ten up: "one" and "two" are common words of instructions)."""
    plain = skeleton(value)
    forms = [plain, plain[::-1], plain.translate(_ROT13)]
    try:
        number = float(value)
    except ValueError:
        return forms
    if number.is_integer() and abs(number) >= 2:
        whole = abs(int(number))
        forms += [hex(whole), oct(whole), bin(whole)]
        if 10 <= whole < 10**9:
            forms += [_words(whole, "and"), _words(whole, "")]
    return forms
