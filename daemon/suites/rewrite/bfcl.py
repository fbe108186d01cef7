"""A counterfactual copy of one BFCL task: new numbers, strings, names and order.

The copy is built from plain data (the question's messages, the function documents, the
possible answers, as BFCL's files hold them) so BFCL's own checker judges it unchanged:

* **numbers** the question writes in digits and the possible answer holds are replaced by
  others of the same shape, in the question and the answers alike; a number the tools'
  documents also mention (a range, a default, an example) stays, its meaning may hang on it;
* **strings** a parameter must take exactly (one allowed value, written in the question) are
  swapped with a value the same parameter takes in another task of the suite, when one of the
  same shape exists (:class:`StringPool`);
* **names**: every function and each of its top-level parameters is renamed, in the tools,
  the question (where it names them as identifiers) and the answers;
* **order**: the tools are shuffled, each tool's parameters, and each enum's options (a
  table that says "the last option" for a task's wording points elsewhere on its copy).
"""

from __future__ import annotations

import copy
import random
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from daemon.suites.rewrite.names import new_name, words
from daemon.suites.rewrite.numbers import new_value, numbers_in, written

Json = Any


@dataclass(frozen=True)
class Surfaces:
    """Which surfaces a copy rewrites (all, in use; fewer only to measure what each costs a
    model: ``scripts/bench/counterfactual.py --keep``)."""

    numbers: bool = True
    strings: bool = True
    function_names: bool = True
    param_names: bool = True
    tool_order: bool = True
    param_order: bool = True
    enum_order: bool = True


SURFACES = Surfaces()
"""What every copy rewrites."""


@dataclass(frozen=True)
class Copy:
    question: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    answers: list[dict[str, Any]]
    numbers: dict[float, float] = field(default_factory=dict)  # old -> new
    strings: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # functions and parameters


def _leaves(value: Json) -> Iterable[Json]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _numeric(value: Json) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _string_options(allowed: Json) -> list[str]:
    """The allowed strings of one parameter (``""``, "may be left out", aside), or none if
    any allowed value is not a string."""
    if not isinstance(allowed, list):
        return []
    options = [a for a in allowed if a != ""]
    if not options or not all(isinstance(a, str) and a.strip() for a in options):
        return []
    return options


def _stated_strings(answers: list[dict[str, Any]], text: str) -> list[tuple[str, str]]:
    """(parameter, value) for each top-level parameter that must take a string the question
    writes: the longest of its allowed forms found verbatim in the question."""
    found = []
    for call in answers:
        for params in call.values():
            for param, allowed in params.items():
                written = [o for o in _string_options(allowed) if _phrase(o).search(text)]
                if written:
                    found.append((param, max(written, key=len)))
    return found


def _text(question: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in question)


def _docs(functions: list[dict[str, Any]]) -> str:
    """Everything the tools' documents say, as one text (descriptions, enums, defaults)."""
    return " ".join(str(leaf) for leaf in _leaves(functions))


def _phrase(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)", re.IGNORECASE)


def _shape(value: str) -> tuple[int, bool, bool, bool]:
    return (
        len(value.split()),
        "," in value,
        value[:1].isupper(),
        any(c.isdigit() for c in value),
    )


def _kind(param: str) -> str:
    """What a parameter names, by its last word (``start_location``, ``city_location``:
    a location), for a pool wider than one parameter name."""
    found = words(param)
    return "*" + (found[-1] if found else param)


class StringPool:
    """The strings each parameter name takes, exactly and as written in the question, across
    a suite's tasks: where a copy's replacement strings come from."""

    def __init__(self, tasks: Iterable[tuple[list[dict[str, Any]], list[dict[str, Any]]]]):
        pool: dict[str, set[str]] = defaultdict(set)
        for question, answers in tasks:
            for param, value in _stated_strings(answers, _text(question)):
                pool[param].add(value)
                pool[_kind(param)].add(value)
        self._pool = {p: sorted(v) for p, v in pool.items()}

    def replacement(self, param: str, value: str, rng: random.Random, avoid: str) -> str | None:
        same = [v for v in self._pool.get(param, []) if v.lower() != value.lower()]
        options = [
            v
            for v in same or self._pool.get(_kind(param), [])
            if v.lower() != value.lower()
            and _shape(v) == _shape(value)
            and not _phrase(v).search(avoid)
        ]
        return rng.choice(options) if options else None


def _map_numbers(value: Json, numbers: dict[float, float]) -> Json:
    if isinstance(value, dict):
        return {k: _map_numbers(v, numbers) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_numbers(v, numbers) for v in value]
    if _numeric(value) and float(value) in numbers:
        new = numbers[float(value)]
        return int(new) if isinstance(value, int) and new.is_integer() else float(new)
    return value


def _number_mapping(
    text: str, answers: list[dict[str, Any]], functions: list[dict[str, Any]], rng: random.Random
) -> dict[float, float]:
    """Old value -> new for each number the question writes that the answer holds."""
    answer_numbers = {float(v) for v in _leaves(answers) if _numeric(v)}
    answer_strings = [v for v in _leaves(answers) if isinstance(v, str)]
    documented = {w.value for w in numbers_in(_docs(functions))}
    documented |= {float(v) for v in _leaves(functions) if _numeric(v)}
    found = numbers_in(text)
    in_question = {w.value for w in found}
    mapping: dict[float, float] = {}
    for w in found:
        if w.value in mapping or w.value not in answer_numbers or w.value in documented:
            continue
        if any(w.text in s for s in answer_strings):
            continue
        new = new_value(w, rng, avoid=answer_numbers | in_question | set(mapping.values()))
        if new is not None:
            mapping[w.value] = new
    return mapping


def _identifier(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(name) + r"(?![\w])")


def _rename_in(text: str, renames: dict[str, str]) -> str:
    # Longest first, so ``math.factorial`` goes before ``factorial``.
    for old in sorted(renames, key=len, reverse=True):
        text = _identifier(old).sub(renames[old], text)
    return text


def _rename_docs(value: Json, renames: dict[str, str]) -> Json:
    """Descriptions say a parameter's or function's name: they follow the rename (enums and
    defaults are values, and stay)."""
    if isinstance(value, dict):
        return {
            k: _rename_in(v, renames)
            if k == "description" and isinstance(v, str)
            else _rename_docs(v, renames)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rename_docs(v, renames) for v in value]
    return value


def rewrite(
    question: list[dict[str, Any]],
    functions: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    rng: random.Random,
    pool: StringPool,
    surfaces: Surfaces | None = None,
) -> Copy:
    """The copy of one task (inputs are not changed); ``surfaces``: default :data:`SURFACES`."""
    keep = surfaces or SURFACES
    question = copy.deepcopy(question)
    functions = copy.deepcopy(functions)
    answers = copy.deepcopy(answers)
    # Numbers: the question's messages are rewritten one by one with one mapping.
    numbers = _number_mapping(_text(question), answers, functions, rng) if keep.numbers else {}
    for message in question:
        content = str(message.get("content") or "")
        message["content"] = _apply_numbers(content, numbers)
    answers = _map_numbers(answers, numbers)

    # Strings a parameter must take exactly.
    strings: dict[str, str] = {}
    docs = _docs(functions)
    enum_params = {
        p
        for f in functions
        for p, spec in ((f.get("parameters") or {}).get("properties") or {}).items()
        if isinstance(spec, dict) and "enum" in spec
    }
    text = _text(question)
    every = [o for leaf in _leaves(answers) if isinstance(leaf, str) for o in [leaf] if o]
    for param, value in _stated_strings(answers, text):
        if value in strings or param in enum_params or _phrase(value).search(docs):
            continue
        # A value inside another (``York`` in ``New York``) cannot be swapped alone.
        others = {o.lower() for o in every} - {value.lower()}
        if any(
            value.lower() in o or o in value.lower()
            for o in others
            if o not in _forms(answers, value)
        ):
            continue
        # A value right beside another the answer holds ("Sydney, Australia", "Louvre in Paris")
        # is read with it: swapped alone, the question would stop making sense.
        if _beside_another(value, every, text):
            continue
        new = pool.replacement(param, value, rng, avoid=text) if keep.strings else None
        if new is not None:
            strings[value] = new
    for message in question:
        content = str(message.get("content") or "")
        for old, new in strings.items():
            content = _phrase(old).sub(new.replace("\\", "\\\\"), content)
        message["content"] = content
    answers = _swap_strings(answers, strings)

    # Names: functions, then each function's parameters.
    used = {f["name"] for f in functions} | {f["name"].replace(".", "_") for f in functions}
    names: dict[str, str] = {}
    param_names: dict[str, dict[str, str]] = {}
    for f in functions:
        new = new_name(f["name"], rng, used | set(names.values()))
        names[f["name"]] = new if keep.function_names else f["name"]
        props = (f.get("parameters") or {}).get("properties") or {}
        taken = set(props)
        mine: dict[str, str] = {}
        for param in props:
            new = new_name(param, rng, taken | set(mine.values()), param=True)
            mine[param] = new if keep.param_names else param
        param_names[f["name"]] = mine
    renames = dict(names)
    renames |= {old.replace(".", "_"): new for old, new in names.items() if "." in old}
    for mine in param_names.values():
        # Only parameters written as identifiers (``max_results``) are renamed in prose:
        # a plain word (``base``) in a question is the question's word.
        renames |= {old: new for old, new in mine.items() if "_" in old}
    for message in question:
        message["content"] = _rename_in(str(message.get("content") or ""), renames)

    rewritten = []
    for f in functions:
        mine = param_names[f["name"]]
        params = f.get("parameters") or {}
        props = params.get("properties") or {}
        order = list(props)
        while keep.param_order and len(order) > 1 and order == list(props):  # always another
            rng.shuffle(order)
        new_params = dict(params)
        new_params["properties"] = {
            mine[p]: _shuffled_enum(_rename_docs(props[p], renames), rng, keep.enum_order)
            for p in order
        }
        if "required" in params:
            required = set(params["required"])
            new_params["required"] = [mine.get(p, p) for p in order if p in required]
        rewritten.append(
            {
                **f,
                "name": names[f["name"]],
                "description": _rename_in(str(f.get("description") or ""), renames),
                "parameters": new_params,
            }
        )
    if keep.tool_order:
        rng.shuffle(rewritten)
    new_answers = [
        {
            names.get(fname, fname): {
                param_names.get(fname, {}).get(p, p): allowed for p, allowed in params.items()
            }
            for fname, params in call.items()
        }
        for call in answers
    ]
    flat = dict(names)
    for mine in param_names.values():
        flat |= mine
    return Copy(question, rewritten, new_answers, numbers, strings, flat)


def _shuffled_enum(spec: Json, rng: random.Random, shuffle: bool) -> Json:
    """``spec`` with each enum in it (its own, its items', its properties') listing its
    options in another order: always another, where two options differ (by ``repr``: ``1``
    and ``1.0`` compare equal but are two options). The allowed answers name values, not
    positions, so they stand."""
    if not shuffle or not isinstance(spec, dict):
        return spec
    out = dict(spec)
    options = spec.get("enum")
    if isinstance(options, list) and len(set(map(repr, options))) >= 2:
        order = list(options)
        while list(map(repr, order)) == list(map(repr, options)):
            rng.shuffle(order)
        out["enum"] = order
    if isinstance(spec.get("items"), dict):
        out["items"] = _shuffled_enum(spec["items"], rng, shuffle)
    if isinstance(spec.get("properties"), dict):
        out["properties"] = {
            k: _shuffled_enum(v, rng, shuffle) for k, v in spec["properties"].items()
        }
    return out


def _apply_numbers(text: str, numbers: dict[float, float]) -> str:
    out, last = [], 0
    for w in numbers_in(text):
        if w.value in numbers:
            out += [text[last : w.start], written(numbers[w.value], w)]
            last = w.end
    return "".join(out) + text[last:]


def _beside_another(value: str, every: list[str], text: str) -> bool:
    """Whether the question writes another of the answer's strings at most one word from
    ``value``."""
    lowered = text.lower()
    spans = [(m.start(), m.end()) for m in _phrase(value).finditer(text)]
    for other in {o.lower() for o in every} - {value.lower()}:
        for m in _phrase(other).finditer(lowered):
            for start, end in spans:
                gap = lowered[end : m.start()] if m.start() >= end else lowered[m.end() : start]
                if len(gap.split()) <= 1 and (m.start() >= end or m.end() <= start):
                    return True
    return False


def _forms(answers: list[dict[str, Any]], value: str) -> set[str]:
    """Every allowed form (lower case) of the parameters that ``value`` is one form of."""
    forms: set[str] = set()
    for call in answers:
        for params in call.values():
            for allowed in params.values():
                options = _string_options(allowed)
                if value in options:
                    forms |= {o.lower() for o in options}
    return forms


def _swap_strings(answers: list[dict[str, Any]], strings: dict[str, str]) -> list[dict[str, Any]]:
    """Each parameter one of whose forms was swapped takes the new string alone (and may
    still be left out if it could)."""
    out = []
    for call in answers:
        new_call = {}
        for fname, params in call.items():
            new_params = {}
            for param, allowed in params.items():
                options = _string_options(allowed)
                hit = next((strings[o] for o in options if o in strings), None)
                if hit is not None:
                    allowed = [hit, ""] if "" in allowed else [hit]
                new_params[param] = allowed
            new_call[fname] = new_params
        out.append(new_call)
    return out
