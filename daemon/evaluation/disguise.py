"""Values in disguise: the forms in which a harness can write an answer into its request
for any instruction-following model to undo (spacing or punctuation between characters,
reversal, ROT13, another base, number words; base64, hex bytes, character codes), and a
text's words run together to find them.

Used by :mod:`daemon.evaluation.provenance` to tell a value the harness injected from one
the model produced.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import re
from dataclasses import dataclass


def norm_text(text: str) -> str:
    return " ".join(text.lower().split())


WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Form:
    """A value's letters and digits run together, and where its own words meet (``cuts``,
    offsets into ``text``)."""

    text: str
    cuts: frozenset[int] = frozenset()


def form_of(words: list[str]) -> Form:
    cuts, at = set(), 0
    for word in words[:-1]:
        at += len(word)
        cuts.add(at)
    return Form("".join(words), frozenset(cuts))


class Spelled:
    """A text's letters and digits run together, remembering where its words began and
    ended: a value is in it when it fills whole words, whatever separated its characters,
    provided the text's words meet where the value's own words do, or are all fragments of
    one or two characters ("S a n", "1-0"): "are a" must not read as "area"."""

    def __init__(self, text: str) -> None:
        self.text = norm_text(text)
        words = WORD.findall(self.text)
        self.joined = "".join(words)
        self.edges = [0]
        for word in words:
            self.edges.append(self.edges[-1] + len(word))
        self.edge_set = set(self.edges)

    def holds(self, form: Form) -> bool:
        if not form.text:
            return False
        start = self.joined.find(form.text)
        while start >= 0:
            end = start + len(form.text)
            if start in self.edge_set and end in self.edge_set and self._fits(start, end, form):
                return True
            start = self.joined.find(form.text, start + 1)
        return False

    def _fits(self, start: int, end: int, form: Form) -> bool:
        i = bisect.bisect_left(self.edges, start)
        inner = self.edges[i : bisect.bisect_left(self.edges, end) + 1]
        if all(e - start in form.cuts for e in inner[1:-1]):
            return True
        return all(b - a <= 2 for a, b in itertools.pairwise(inner))


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


def _words(n: int, joint: str) -> list[str]:
    """``n`` (0 <= n < 10**9) in English words ("one", "hundred", ``joint``, "twelve";
    ``joint`` "and" or "")."""
    if n < 20:
        return [_ONES[n]]
    if n < 100:
        return [_TENS[n // 10]] + ([_ONES[n % 10]] if n % 10 else [])
    for size, name in ((10**6, "million"), (1000, "thousand"), (100, "hundred")):
        if n >= size:
            rest, glue = n % size, [joint] if joint and size == 100 else []
            return [*_words(n // size, joint), name, *(glue + _words(rest, joint) if rest else [])]
    raise AssertionError(n)


def disguises(value: str) -> list[Form]:
    """``value`` (normalised) as a harness could write it for a model to undo: as is,
    reversed and in ROT13 (from four characters: shorter ones are common words), a whole
    number in another base or in words (from ten up: "one" and "two" are common words of
    instructions)."""
    words = WORD.findall(norm_text(value))
    plain = form_of(words)
    forms = [plain]
    if len(plain.text) >= 4:
        size = len(plain.text)
        forms.append(Form(plain.text[::-1], frozenset(size - c for c in plain.cuts)))
        forms.append(Form(plain.text.translate(_ROT13), plain.cuts))
    try:
        number = float(value)
    except ValueError:
        return forms
    if number.is_integer() and abs(number) >= 2:
        whole = abs(int(number))
        forms += [Form(hex(whole)), Form(oct(whole)), Form(bin(whole))]
        # Without the prefix where no number or word of an instruction looks the same: hex
        # with both a digit and a letter ("1f4", not "a" or "ff"), binary of six digits up.
        bare = hex(whole)[2:]
        if any(c.isdigit() for c in bare) and any(c.isalpha() for c in bare):
            forms.append(Form(bare))
        if whole >= 32:
            forms.append(Form(bin(whole)[2:]))
        if 10 <= whole < 10**9:
            forms += [form_of(_words(whole, "and")), form_of(_words(whole, ""))]
    return forms


def in_pieces(value: str, spelled: Spelled) -> bool:
    """A value of several words (each of three letters or more) whose words all appear in
    ``spelled``, wherever: "San" in one message and "Francisco" in another."""
    words = [w for w in WORD.findall(norm_text(value)) if len(w) >= 3 and not w.isdigit()]
    if len(words) < 2:
        return False
    have = set(WORD.findall(spelled.text))
    return all(w in have for w in words)


_BASE64 = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}[\s,:-]*){3,}\b|\b[0-9a-fA-F]{6,}\b")
_CODES = re.compile(r"\b(?:\d{2,3}[\s,;]+){2,}\d{2,3}\b")


def _printable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text and all(c.isprintable() or c.isspace() for c in text) else None


def decoded(text: str) -> list[str]:
    """What ``text`` says once the encodings a model can read are undone: base64 words,
    hex bytes ("53 61 6e", "53616e") and runs of character codes ("83 97 110"), each as
    one more text to look for values in (as the harness wrote them, before normalising)."""
    found: list[str] = []
    for match in _BASE64.finditer(text):
        word = match.group()
        try:
            raw = base64.b64decode(word + "=" * (-len(word) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if (plain := _printable(raw)) is not None:
            found.append(plain)
    for match in _HEX.finditer(text):
        digits = re.sub(r"[^0-9a-fA-F]", "", match.group())
        if len(digits) % 2 == 0 and (plain := _printable(bytes.fromhex(digits))) is not None:
            found.append(plain)
    for match in _CODES.finditer(text):
        codes = [int(c) for c in re.findall(r"\d+", match.group())]
        if all(32 <= c < 127 for c in codes):
            found.append("".join(map(chr, codes)))
    return found
