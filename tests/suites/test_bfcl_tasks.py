"""BFCL tasks as a harness sees them: the question, and the functions as JSON Schema tools."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from daemon.suites.bfcl import BfclSuite

pytestmark = pytest.mark.unit

JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_categories_hold_bfcl_v4_counts(bfcl: BfclSuite) -> None:
    counts = Counter(task_id.rsplit("_", 1)[0] for task_id in bfcl.task_ids())
    assert counts == {
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "irrelevance": 240,
    }
    assert bfcl.task_ids()[0] == "simple_python_0"
    assert "Apache-2.0" in bfcl.license


def _check_schema(node: dict[str, Any], where: str) -> None:
    assert node.get("type") in JSON_TYPES, where
    assert "optional" not in node, where
    if node["type"] == "object":
        properties = node.get("properties", {})
        assert isinstance(properties, dict), where
        required = node.get("required", [])
        # JSON Schema allows required keys without declared properties (BFCL's parallel_29).
        assert isinstance(required, list) and all(isinstance(r, str) for r in required), where
        for name, sub in properties.items():
            _check_schema(sub, f"{where}.{name}")
    if "items" in node:
        assert node["type"] == "array", where
        _check_schema(node["items"], f"{where}[]")


def test_every_tool_is_a_json_schema_function(bfcl: BfclSuite) -> None:
    for task_id in bfcl.task_ids():
        task = bfcl.task(task_id)
        assert task.kind == "function_call" and task.suite == "bfcl" and task.meta == {}
        assert task.tools, task_id
        for tool in task.tools:
            assert TOOL_NAME.match(tool.name), tool.name
            assert tool.description.endswith(
                "Note that the provided function is in Python 3 syntax."
            )
            assert tool.parameters["type"] == "object"
            _check_schema(tool.parameters, f"{task_id}:{tool.name}")


def test_types_are_converted_as_bfcl_does_for_openai_style_models(bfcl: BfclSuite) -> None:
    (distance,) = bfcl.task("simple_python_83").tools
    coord = distance.parameters["properties"]["coord1"]
    assert coord["type"] == "array" and coord["items"] == {"type": "number"}  # tuple of float
    (forest,) = bfcl.task("simple_python_109").tools
    assert forest.name == "random_forest_train"
    assert forest.parameters["properties"]["data"]["type"] == "string"  # BFCL's "any"
    radius = bfcl.task("multiple_0").tools[1].parameters["properties"]["radius"]
    assert radius["type"] == "number" and radius["format"] == "float"
    assert radius["description"].endswith("This is a float type value.")
    (waste,) = bfcl.task("parallel_29").tools
    population = waste.parameters["properties"]["population"]
    assert population["type"] == "object"  # BFCL's "dict"
    assert population["required"] == ["adults", "children", "singles"]
    (boardgame,) = bfcl.task("irrelevance_196").tools
    actions = boardgame.parameters["properties"]["player_actions"]
    assert actions["items"]["type"] == "object"  # an array of BFCL "dict"s, converted inside
    assert actions["items"]["properties"]["player_id"] == {
        "type": "integer",
        "description": "Unique identifier for each player.",
    }
    scores = boardgame.parameters["properties"]["initial_scores"]
    assert scores["type"] == "object" and scores["properties"]["score"]["type"] == "integer"


def test_prompt_is_the_question_and_carries_no_answer(bfcl: BfclSuite) -> None:
    task = bfcl.task("simple_python_0")
    assert [m.role for m in task.prompt] == ["user"]
    assert task.prompt[0].content == (
        "Find the area of a triangle with a base of 10 units and height of 5 units."
    )
    for task_id in bfcl.task_ids():
        dumped = bfcl.task(task_id).model_dump()
        assert set(dumped) == {"id", "suite", "kind", "prompt", "tools", "meta"}
        assert "ground_truth" not in json.dumps(dumped)


def test_tasks_are_built_once(bfcl: BfclSuite) -> None:
    assert bfcl.task("multiple_7") is bfcl.task("multiple_7")
