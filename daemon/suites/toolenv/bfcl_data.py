"""BFCL v4 multi-turn as data: tasks, ground truth, and the tools each turn offers.

Pure data, standard library only: the daemon reads it to build tasks, the worker to run
them. Everything comes from the pinned bfcl-eval wheel through a ``read(member) -> bytes``
callable, so neither side ever imports ``bfcl_eval`` (its dependencies include torch).
What BFCL's own code does is reproduced where the harness can see it: the tool schemas
(``GORILLA_TO_OPENAPI``, the language hint), the miss_func reveal prompt, turn order.
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CATEGORIES: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
DATA = "bfcl_eval/data/"
# From bfcl_eval/constants/executable_backend_config.py (2026.3.23), the classes the four
# multi-turn categories use (the memory and web-search classes need network packages).
CLASS_MODULE: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
FUNC_DOC_FILE: dict[str, str] = {cls: f"{mod}.json" for cls, mod in CLASS_MODULE.items()}
STATELESS_CLASSES = frozenset({"MathAPI"})
# bfcl_eval/constants/default_prompts.py
REVEAL_PROMPT = "I have updated some more functions you can choose from. What about now?"
PYTHON_LANGUAGE_HINT = " Note that the provided function is in Python 3 syntax."
# bfcl_eval/constants/type_mappings.py GORILLA_TO_OPENAPI
GORILLA_TO_OPENAPI: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}

Read = Callable[[str], bytes]
GroundTruthCall = dict[str, Any]  # {"name": str, "arguments": {...}}


@dataclass(frozen=True)
class BfclTask:
    """One multi-turn entry joined with its ground truth (BFCL's call strings per turn)."""

    id: str
    category: str
    turns: tuple[tuple[Mapping[str, str], ...], ...]
    initial_config: Mapping[str, Any]
    involved_classes: tuple[str, ...]
    missed_function: Mapping[int, tuple[str, ...]]
    ground_truth: tuple[tuple[str, ...], ...]

    @property
    def long_context(self) -> bool:
        """BFCL's rule: ``"long_context" in id.rsplit("_", 1)[0]`` (or ``composite``)."""
        category = self.id.rsplit("_", 1)[0]
        return "long_context" in category or "composite" in category

    @property
    def num_turns(self) -> int:
        return len(self.turns)


def _jsonl(read: Read, member: str) -> list[dict[str, Any]]:
    text = read(member).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_tasks(read: Read, category: str) -> list[BfclTask]:
    """Every task of one category, in file order, with its ground truth."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL multi-turn category {category!r}")
    answers = {
        row["id"]: row["ground_truth"]
        for row in _jsonl(read, f"{DATA}possible_answer/BFCL_v4_{category}.json")
    }
    tasks = []
    for row in _jsonl(read, f"{DATA}BFCL_v4_{category}.json"):
        truth = answers.get(row["id"])
        if truth is None or len(truth) != len(row["question"]):
            raise ValueError(f"{row['id']}: ground truth missing or not one list per turn")
        tasks.append(
            BfclTask(
                id=row["id"],
                category=category,
                turns=tuple(tuple(turn) for turn in row["question"]),
                initial_config=row.get("initial_config", {}),
                involved_classes=tuple(row["involved_classes"]),
                missed_function={
                    int(k): tuple(v) for k, v in row.get("missed_function", {}).items()
                },
                ground_truth=tuple(tuple(turn) for turn in truth),
            )
        )
    return tasks


Docs = Mapping[str, list[dict[str, Any]]]  # class name -> its function docs


def load_func_docs(read: Read) -> dict[str, list[dict[str, Any]]]:
    """Every API class's function docs (read once; callers copy before changing them)."""
    return {
        cls: _jsonl(read, f"{DATA}multi_turn_func_doc/{name}")
        for cls, name in FUNC_DOC_FILE.items()
    }


def _cast_to_openai_type(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ``model_handler.utils._cast_to_openai_type``, so harnesses see BFCL's schemas."""
    for key, value in properties.items():
        if "type" not in value:
            value["type"] = "string"
        else:
            var_type = value["type"]
            if var_type == "float":
                value["format"] = "float"
                value["description"] += " This is a float type value."
            value["type"] = GORILLA_TO_OPENAPI.get(var_type, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_to_openai_type(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = GORILLA_TO_OPENAPI[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = GORILLA_TO_OPENAPI[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_to_openai_type(items["properties"])
        properties[key] = value
    return properties


def tool_spec(doc: Mapping[str, Any], *, language_hint: bool) -> dict[str, Any]:
    """A BFCL function doc as ``{"name", "description", "parameters"}`` (BFCL's FC form)."""
    doc = copy.deepcopy(dict(doc))
    params = doc["parameters"]
    params["type"] = "object"
    params["properties"] = _cast_to_openai_type(params.get("properties", {}))
    return {
        "name": doc["name"],
        "description": doc["description"] + (PYTHON_LANGUAGE_HINT if language_hint else ""),
        "parameters": params,
    }


def tools_per_turn(task: BfclTask, docs_by_class: Docs) -> list[list[dict[str, Any]]]:
    """The tools offered at each turn, as BFCL's ``populate_test_cases_with_predefined_functions``.

    miss_func: held-back docs are removed up front and added at their turn (and stay). BFCL
    appends the language hint before the reveal, so revealed docs lack it; we keep that.
    ``excluded_function`` is not used by bfcl-eval 2026.3.23 (still offered and callable).
    """
    docs = [doc for cls in task.involved_classes for doc in docs_by_class[cls]]
    held: dict[int, list[dict[str, Any]]] = {}
    for turn, names in task.missed_function.items():
        held[turn] = [d for d in docs if d["name"] in names]
        docs = [d for d in docs if d["name"] not in names]
    current = [tool_spec(d, language_hint=True) for d in docs]
    per_turn = []
    for turn in range(task.num_turns):
        current = current + [tool_spec(d, language_hint=False) for d in held.get(turn, [])]
        per_turn.append(list(current))
    return per_turn


def user_messages(task: BfclTask, turn: int) -> list[dict[str, str]]:
    """A turn's user message(s); a miss_func reveal turn gets BFCL's fixed FC prompt."""
    if turn in task.missed_function:
        if task.turns[turn]:
            raise ValueError(f"{task.id}: reveal turn {turn} has a user message")
        return [{"role": "user", "content": REVEAL_PROMPT}]
    return [{"role": m["role"], "content": m["content"]} for m in task.turns[turn]]


def parse_call(text: str, param_order: Mapping[str, list[str]]) -> GroundTruthCall:
    """A trusted ground-truth string like ``sort('a.pdf')`` as a call, without eval.

    Only a bare name with literal arguments is accepted; positional arguments take the
    names of the function's parameters in their documented order (the API's signature
    order: the ground-truth replay through the real API checks this for every call).
    """
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"unsupported ground-truth call {text!r}")
    name = node.func.id
    arguments: dict[str, Any] = {}
    names = param_order.get(name, [])
    if len(node.args) > len(names):
        raise ValueError(f"{text!r}: more positional arguments than {name} has parameters")
    for param, arg in zip(names, node.args, strict=False):
        arguments[param] = ast.literal_eval(arg)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ValueError(f"unsupported ground-truth call {text!r}")
        arguments[keyword.arg] = ast.literal_eval(keyword.value)
    return {"name": name, "arguments": arguments}


def ground_truth_calls(task: BfclTask, docs_by_class: Docs) -> list[list[GroundTruthCall]]:
    """The ground truth as the calls a perfect harness would make, turn by turn."""
    order = {
        d["name"]: list(d["parameters"].get("properties", {}))
        for cls in task.involved_classes
        for d in docs_by_class[cls]
    }
    return [[parse_call(text, order) for text in turn] for turn in task.ground_truth]
