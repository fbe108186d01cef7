"""Checkers of the example suite's ``python`` tasks (python.jsonl).

Each is ``fn(output, expected)`` and passes a task by returning True. They run on the
trusted side of a code check, in a container of their own: standard library only, this
file alone (no imports of sibling files), and the output arrives as plain data (a str,
number, list, dict, ... decoded afresh). For ``code`` tasks (``"function"`` in the check),
``output`` is the harness's function instead, each call crossing the boundary.
A checker should never exec or eval a data output: that would run harness-written code
next to the verdict; give the task a ``"function"`` and let the boundary run it.
"""

import re


def _word(output):
    """The reply as one lower-case word, without surrounding punctuation; None if not one."""
    if not isinstance(output, str):
        return None
    words = re.findall(r"[A-Za-z]+", output)
    return words[0].lower() if len(words) == 1 else None


def is_palindrome(output, expected):
    """One word that reads the same backwards (of ``expected`` letters, when given)."""
    word = _word(output)
    if word is None or len(word) < 2 or word != word[::-1]:
        return False
    return expected is None or len(word) == expected


def word_count(output, expected):
    """Exactly ``expected`` words."""
    return isinstance(output, str) and len(re.findall(r"[A-Za-z']+", output)) == expected


def at_most_words(output, expected):
    """At least one and at most ``expected`` words."""
    return isinstance(output, str) and 0 < len(re.findall(r"[A-Za-z']+", output)) <= expected


def starts_with(output, expected):
    """One word starting with the letter ``expected``."""
    word = _word(output)
    return word is not None and len(word) > 1 and word.startswith(expected)


def rhymes(output, expected):
    """One word (not the prompt's own) ending in ``expected``."""
    word = _word(output)
    return word is not None and word.endswith(expected) and len(word) > len(expected)


def distinct_items(output, expected):
    """Exactly ``expected`` different comma-separated items."""
    if not isinstance(output, str):
        return False
    items = [item.strip().strip(".").lower() for item in output.strip().split(",")]
    return len(items) == expected and all(items) and len(set(items)) == expected


def number_in(output, expected):
    """One whole number within ``min``..``max``, a multiple of ``multiple_of`` / odd."""
    if not isinstance(output, str):
        return False
    numbers = re.findall(r"-?\d+", output)
    if len(numbers) != 1:
        return False
    value = int(numbers[0])
    if not expected["min"] <= value <= expected["max"]:
        return False
    if "multiple_of" in expected and value % expected["multiple_of"]:
        return False
    return not expected.get("odd") or value % 2 == 1


def all_caps(output, expected):
    """Some letters, none of them lower case."""
    return isinstance(output, str) and any(c.isalpha() for c in output) and output == output.upper()


def passes_cases(function, expected):
    """Code tasks: ``function(*args) == out`` for every case of ``expected``."""
    for case in expected:
        try:
            result = function(*case["args"])
        except Exception:
            return False
        if result != case["out"] or (type(result) is bool and type(case["out"]) is not bool):
            return False
    return True
