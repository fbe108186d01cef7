"""The ``bfcl`` suite: BFCL v4 single-turn Python function calling, checked by BFCL's rules.

Data: the question and possible-answer files of the pinned ``bfcl-eval`` wheel, read as
data (the package itself is never imported: it pulls in torch). A harness gets the question
and the functions as tools; it answers with ``[{"name": ..., "arguments": {...}}]``, or
``[]`` when no function applies (the ``irrelevance`` category).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from daemon.config.assets import WHEELS, read_member
from daemon.errors import AssetError
from daemon.providers.base import Message
from daemon.suites.base import CheckResult, CodeChecker, lookup
from daemon.suites.bfcl_checker import Answer, check_calls
from daemon.suites.bfcl_schema import to_tool, tool_name
from daemon.suites.generated.calls import generate_call
from daemon.suites.rewrite.bfcl import StringPool, rewrite
from daemon.tasks import Task

# Our category name -> BFCL's test category (also the data file's name).
CATEGORIES: dict[str, str] = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
}
# The categories a generated task can stand in for: one call expected, from one function
# (simple) or from one of several (multiple).
GENERATABLE = {"simple_python": (0, 0), "multiple": (1, 3)}
_PACKAGE = "bfcl-eval"
_QUESTIONS = "bfcl_eval/data/BFCL_v4_{}.json"
_ANSWERS = "bfcl_eval/data/possible_answer/BFCL_v4_{}.json"


@dataclass(frozen=True)
class _Entry:
    id: str
    bfcl_category: str
    question: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    answers: list[Answer]  # empty for irrelevance: the right answer is no call


def _read_jsonl(cache_dir: Path, member: str) -> list[dict[str, Any]]:
    text = read_member(cache_dir, _PACKAGE, member).decode("utf-8")
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise AssetError(f"{member} in the {_PACKAGE} wheel is not JSON lines: {exc}") from None


def _load_entries(cache_dir: Path, bfcl_category: str) -> list[_Entry]:
    questions = _read_jsonl(cache_dir, _QUESTIONS.format(bfcl_category))
    answers: dict[str, list[Answer]] = {}
    if bfcl_category != "irrelevance":
        for row in _read_jsonl(cache_dir, _ANSWERS.format(bfcl_category)):
            answers[row["id"]] = row["ground_truth"]
    entries = []
    for row in questions:
        if bfcl_category != "irrelevance" and row["id"] not in answers:
            raise AssetError(f"{_PACKAGE}: {row['id']} has no possible answer")
        entries.append(
            _Entry(
                id=row["id"],
                bfcl_category=bfcl_category,
                question=row["question"][0],  # single-turn: the first and only turn
                functions=row["function"],
                answers=answers.get(row["id"], []),
            )
        )
    return entries


def _first_allowed(allowed: Any) -> tuple[bool, Any]:
    """The first allowed value that is not the "may be omitted" marker, if any."""
    for value in allowed if type(allowed) is list else [allowed]:
        if value != "":
            return True, value
    return False, None


def concrete(value: Any) -> Any:
    """A possible-answer value made concrete: dicts hold allowed values per key."""
    if type(value) is dict:
        picked = {key: _first_allowed(allowed) for key, allowed in value.items()}
        return {key: concrete(v) for key, (present, v) in picked.items() if present}
    if type(value) is list:
        return [concrete(v) if type(v) is dict else v for v in value]
    return value


def _declared_params(functions: list[dict[str, Any]], name: str) -> set[str]:
    for function in functions:
        if function["name"] == name:
            return set((function.get("parameters") or {}).get("properties") or {})
    return set()


def as_bfcl_calls(functions: list[dict[str, Any]], output: Any) -> Any:
    """Our ``[{"name", "arguments"}]`` as BFCL's ``[{name: arguments}]``; None if malformed.

    A call already in BFCL's own shape (one key, the function name) is taken as it is.
    The harness sees underscored names (BFCL's rule for OpenAI-style APIs); BFCL's own
    dotted names are accepted as well, as BFCL does for models that keep the dots.
    """
    if type(output) is not list:
        return None
    bfcl_names = {tool_name(f["name"]): f["name"] for f in functions}
    calls = []
    for item in output:
        if type(item) is not dict:
            return None
        if "name" in item and "arguments" in item:
            name, arguments = item["name"], item["arguments"]
        elif len(item) == 1:
            ((name, arguments),) = item.items()
        else:
            return None
        if type(name) is not str or type(arguments) is not dict:
            return None
        calls.append({bfcl_names.get(name, name): arguments})
    return calls


class BfclSuite:
    """A selection of BFCL categories; ids are BFCL's (``simple_python_0``, ``multiple_3``)."""

    license = WHEELS[_PACKAGE].license

    def __init__(
        self,
        categories: Sequence[str],
        entries: Sequence[_Entry],
        generated: frozenset[str] = frozenset(),
    ) -> None:
        self.categories = tuple(categories)
        self.name = "bfcl:" + ",".join(self.categories)
        self._entries = {entry.id: entry for entry in entries}
        self._tasks: dict[str, Task] = {}
        # The ids whose task was generated (:meth:`with_generated`), not a public one.
        self.generated = generated

    @classmethod
    def load(cls, categories: Sequence[str], cache_dir: Path) -> BfclSuite:
        """Read the categories' data from the pinned wheel (fetched once into cache_dir)."""
        entries = [e for c in categories for e in _load_entries(cache_dir, CATEGORIES[c])]
        return cls(categories, entries)

    def counterfactual(self, task_ids: Collection[str], seed: str) -> BfclSuite:
        """The suite with ``task_ids`` replaced by their counterfactual copies made from
        ``seed`` (:mod:`daemon.suites.rewrite.bfcl`); the other tasks as they are."""
        entries = list(self._entries.values())
        pool = StringPool((e.question, e.answers) for e in entries)
        wanted = set(task_ids)
        copies = []
        for entry in entries:
            if entry.id in wanted:
                digest = hashlib.sha256(f"{seed}\0{entry.id}".encode()).digest()
                made = rewrite(
                    entry.question, entry.functions, entry.answers, random.Random(digest), pool
                )
                entry = replace(
                    entry, question=made.question, functions=made.functions, answers=made.answers
                )
            copies.append(entry)
        return BfclSuite(self.categories, copies, self.generated)

    def generatable(self, task_ids: Collection[str]) -> list[str]:
        """Those of ``task_ids`` a generated task can stand in for (one call expected)."""
        return [t for t in task_ids if self._entry(t).bfcl_category in GENERATABLE]

    def with_generated(self, task_ids: Collection[str], seed: str) -> BfclSuite:
        """The suite with ``task_ids`` (each :meth:`generatable`) holding tasks generated
        from ``seed`` (:mod:`daemon.suites.generated.calls`) under the same ids: same
        category, a new function (with distractors in ``multiple``), question and answer."""
        wanted = set(task_ids)
        entries = []
        for entry in self._entries.values():
            if entry.id in wanted:
                low, high = GENERATABLE[entry.bfcl_category]
                pick = random.Random(hashlib.sha256(f"{seed}\0n\0{entry.id}".encode()).digest())
                made = generate_call(seed, entry.id, distractors=pick.randint(low, high))
                entry = replace(
                    entry, question=made.question, functions=made.functions, answers=made.answers
                )
            entries.append(entry)
        return BfclSuite(self.categories, entries, self.generated | frozenset(wanted))

    def _entry(self, task_id: str) -> _Entry:
        return lookup(self._entries, self.name, task_id)

    def task_ids(self) -> list[str]:
        return list(self._entries)

    def task(self, task_id: str) -> Task:
        cached = self._tasks.get(task_id)
        if cached is None:
            entry = self._entry(task_id)
            cached = Task(
                id=entry.id,
                suite="bfcl",
                kind="function_call",
                prompt=[Message(role=m["role"], content=m["content"]) for m in entry.question],
                tools=[to_tool(f) for f in entry.functions],
            )
            self._tasks[task_id] = cached
        return cached

    def expected(self, task_id: str) -> list[dict[str, Any]]:
        """BFCL's possible answer as calls: each argument lists its allowed values, and ``""``
        among them means the argument may be left out. ``[]``: no function should be called."""
        entry = self._entry(task_id)
        return [
            {"name": tool_name(name), "arguments": allowed}
            for answer in entry.answers
            for name, allowed in answer.items()
        ]

    def reference_output(self, task_id: str) -> list[dict[str, Any]]:
        """Calls built from the first allowed value of every argument the function has.

        A few possible answers list an optional argument the function does not declare;
        BFCL's checker would reject it, so it is left out.
        """
        entry = self._entry(task_id)
        calls = []
        for answer in entry.answers:
            for name, allowed_by_param in answer.items():
                declared = _declared_params(entry.functions, name)
                arguments = {}
                for param, allowed in allowed_by_param.items():
                    present, value = _first_allowed(allowed)
                    if present and (param in declared or "" not in allowed):
                        arguments[param] = concrete(value)
                calls.append({"name": tool_name(name), "arguments": arguments})
        return calls

    async def check(self, task_id: str, output: Any, checker: CodeChecker) -> CheckResult:
        entry = self._entry(task_id)
        calls = as_bfcl_calls(entry.functions, output)
        verdict = check_calls(entry.bfcl_category, entry.functions, calls, entry.answers)
        detail = "ok" if verdict.valid else f"{verdict.error_type}: {verdict.error}"
        return CheckResult(passed=verdict.valid, detail=detail)
