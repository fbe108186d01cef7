"""The BFCL verifier against BFCL's own data and rules (bfcl-eval 2026.3.23's ast_checker)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from daemon.suites.bfcl import BfclSuite, concrete
from daemon.suites.bfcl_checker import Answer, check_calls

pytestmark = pytest.mark.unit

WRONG = "__wrong__"


async def _passes(suite: BfclSuite, task_id: str, output: Any) -> bool:
    result = await suite.check(task_id, output, checker=_NO_CHECKER)
    return result.passed


class _NoChecker:
    """BFCL never runs code; any use of the code checker is a bug the test should see."""

    async def check_code(self, check: Any) -> Any:
        raise AssertionError("the BFCL check must not run code")


_NO_CHECKER = _NoChecker()


def _declared(suite: BfclSuite, task_id: str, tool: str) -> dict[str, Any]:
    for spec in suite.task(task_id).tools:
        if spec.name == tool:
            return spec.parameters
    raise AssertionError(f"{task_id} has no tool {tool}")


@pytest.mark.anyio
async def test_every_ground_truth_passes_its_own_check(bfcl: BfclSuite) -> None:
    failures = [t for t in bfcl.task_ids() if not await _passes(bfcl, t, bfcl.reference_output(t))]
    assert failures == []


@pytest.mark.anyio
async def test_every_allowed_value_passes(bfcl: BfclSuite) -> None:
    checked, failures = 0, []
    for task_id in bfcl.task_ids():
        reference = bfcl.reference_output(task_id)
        for index, call in enumerate(bfcl.expected(task_id)):
            schema = _declared(bfcl, task_id, call["name"])
            for param, allowed in call["arguments"].items():
                if param not in schema["properties"]:
                    continue  # a data quirk: BFCL's checker rejects undeclared parameters
                for value in allowed:
                    if value == "" and param in schema.get("required", []):
                        continue  # BFCL checks required parameters before allowed values
                    output = copy.deepcopy(reference)
                    if value == "":
                        output[index]["arguments"].pop(param, None)
                    else:
                        output[index]["arguments"][param] = concrete(value)
                    checked += 1
                    if not await _passes(bfcl, task_id, output):
                        failures.append((task_id, param, value))
    assert failures == []
    assert checked > 6000


def _perturbations(suite: BfclSuite, task_id: str) -> list[tuple[str, Any]]:
    reference = suite.reference_output(task_id)
    cases: list[tuple[str, Any]] = [("no call", []), ("one call too many", reference * 2)]
    for index, call in enumerate(reference):
        schema = _declared(suite, task_id, call["name"])
        renamed = copy.deepcopy(reference)
        renamed[index]["name"] = call["name"] + "_x"
        cases.append((f"call {index} renamed", renamed))
        extra = copy.deepcopy(reference)
        extra[index]["arguments"]["zz_unexpected"] = 1
        cases.append((f"call {index} unexpected argument", extra))
        for param in call["arguments"]:
            wrong = copy.deepcopy(reference)
            wrong[index]["arguments"][param] = WRONG
            cases.append((f"call {index} {param} wrong", wrong))
            if param in schema.get("required", []):
                dropped = copy.deepcopy(reference)
                del dropped[index]["arguments"][param]
                cases.append((f"call {index} {param} missing", dropped))
    if len(reference) > 1:
        cases.append(("a call missing", reference[1:]))
    return cases


@pytest.mark.anyio
async def test_perturbed_answers_fail(bfcl: BfclSuite) -> None:
    passed = []
    count = 0
    for task_id in bfcl.task_ids():
        if task_id.startswith("irrelevance"):
            continue
        for what, output in _perturbations(bfcl, task_id):
            count += 1
            if await _passes(bfcl, task_id, output):
                passed.append((task_id, what))
    assert passed == []
    assert count > 5000


@pytest.mark.anyio
async def test_irrelevance_passes_only_without_a_call(bfcl: BfclSuite) -> None:
    for task_id in [t for t in bfcl.task_ids() if t.startswith("irrelevance")]:
        tool = bfcl.task(task_id).tools[0].name
        assert bfcl.expected(task_id) == []
        assert await _passes(bfcl, task_id, [])
        # BFCL counts anything that does not decode as calls (e.g. text) as "no call".
        assert await _passes(bfcl, task_id, "I cannot help with that.")
        assert not await _passes(bfcl, task_id, [{"name": tool, "arguments": {}}])


# BFCL matches parallel calls greedily: each expected call, in order, takes the first output
# call that fits. In parallel_178 the first expected call allows "Microsoft" or "Apple", so
# some orders let it take a call a later expected call needed: BFCL fails those, and so do we.
GREEDY_QUIRK = "parallel_178"


@pytest.mark.anyio
async def test_parallel_calls_match_in_any_order(bfcl: BfclSuite) -> None:
    reordered = 0
    for task_id in bfcl.task_ids():
        reference = bfcl.reference_output(task_id)
        if task_id.startswith("parallel") and len(reference) > 1 and task_id != GREEDY_QUIRK:
            assert await _passes(bfcl, task_id, list(reversed(reference))), task_id
            assert await _passes(bfcl, task_id, reference[1:] + reference[:1]), task_id
            reordered += 1
    assert reordered == 399


@pytest.mark.anyio
async def test_parallel_matching_is_greedy_like_bfcl(bfcl: BfclSuite) -> None:
    reference = bfcl.reference_output(GREEDY_QUIRK)
    assert [c["arguments"]["company_name"] for c in reference] == [
        "Microsoft",
        "Microsoft",
        "Apple",
        "Apple",
    ]
    assert await _passes(bfcl, GREEDY_QUIRK, reference)
    assert not await _passes(bfcl, GREEDY_QUIRK, list(reversed(reference)))


@pytest.mark.anyio
async def test_dotted_and_underscored_names_both_count(bfcl: BfclSuite) -> None:
    # The harness sees "math_factorial"; BFCL's data says "math.factorial".
    assert [t.name for t in bfcl.task("simple_python_1").tools] == ["math_factorial"]
    assert await _passes(
        bfcl, "simple_python_1", [{"name": "math_factorial", "arguments": {"number": 5}}]
    )
    assert await _passes(
        bfcl, "simple_python_1", [{"name": "math.factorial", "arguments": {"number": 5}}]
    )
    assert not await _passes(
        bfcl, "simple_python_1", [{"name": "math", "arguments": {"number": 5}}]
    )


@pytest.mark.anyio
async def test_malformed_outputs_fail(bfcl: BfclSuite) -> None:
    good = bfcl.reference_output("simple_python_0")[0]
    for output in (
        None,
        "calculate_triangle_area(base=10, height=5)",
        {"name": good["name"], "arguments": good["arguments"]},
        [{"arguments": good["arguments"]}],
        [{"name": good["name"], "arguments": '{"base": 10, "height": 5}'}],
        [[good["name"], good["arguments"]]],
    ):
        assert not await _passes(bfcl, "simple_python_0", output), output
    # Extra keys in a call (the model's call id, say) are ignored.
    assert await _passes(bfcl, "simple_python_0", [{**good, "id": "call_1"}])
    # BFCL's own shape, {function: arguments}, is judged the same way.
    assert await _passes(bfcl, "simple_python_0", [{good["name"]: good["arguments"]}])
    assert not await _passes(bfcl, "simple_python_0", [{good["name"]: {"base": 10}}])
    assert not await _passes(bfcl, "irrelevance_0", [{"determine_body_mass_index": {}}])


@pytest.mark.anyio
async def test_details_never_quote_the_ground_truth(bfcl: BfclSuite) -> None:
    assert bfcl.expected("multiple_2") == [
        {"name": "country_info_capital", "arguments": {"country": ["Brazil"]}}
    ]
    output = [{"name": "country_info_capital", "arguments": {"country": "Chile"}}]
    result = await bfcl.check("multiple_2", output, checker=_NO_CHECKER)
    assert not result.passed
    assert "Chile" in result.detail and "Brazil" not in result.detail
    assert result.expected is None


# Synthetic cases, one per BFCL rule, on a function shaped like BFCL's data.
FUNCTION: dict[str, Any] = {
    "name": "geo.route",
    "description": "Plan a route.",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string", "description": "City."},
            "km": {"type": "float", "description": "Distance."},
            "stops": {"type": "integer", "description": "Stops."},
            "avoid": {"type": "array", "items": {"type": "string"}, "description": "Avoid."},
            "point": {"type": "tuple", "items": {"type": "float"}, "description": "Start."},
            "options": {
                "type": "dict",
                "properties": {"fast": {"type": "boolean"}, "tolls": {"type": "boolean"}},
                "description": "Options.",
            },
            "legs": {
                "type": "array",
                "items": {"type": "dict", "properties": {"to": {"type": "string"}}},
                "description": "Legs.",
            },
            "count": {"type": "integer", "description": "How many."},
            "fast": {"type": "boolean", "description": "Fast."},
        },
        "required": ["city", "km"],
    },
}
ANSWER: Answer = {
    "geo.route": {
        "city": ["New York, NY", "NYC"],
        "km": [12.0],
        "stops": ["", 2],
        "avoid": [["Highways", "tolls"], ""],
        "point": ["", [40.7, -74.0]],
        "options": ["", {"fast": [True], "tolls": ["", False]}],
        "legs": ["", [{"to": ["Boston"]}, {"to": ["Albany, NY"]}]],
        "count": ["", "n_items"],
        "fast": ["", True],
    }
}
BASE: dict[str, Any] = {"city": "NYC", "km": 12.0}


def _simple(arguments: dict[str, Any], name: str = "geo.route") -> bool:
    return check_calls("simple_python", [FUNCTION], [{name: arguments}], [ANSWER]).valid


@pytest.mark.parametrize(
    ("arguments", "valid"),
    [
        (BASE, True),
        ({"city": "NYC"}, False),  # required parameter missing
        ({**BASE, "colour": "red"}, False),  # undeclared parameter
        # Strings: case, spaces and ,./-_*^ do not matter; words do.
        ({**BASE, "city": "new york ny"}, True),
        ({**BASE, "city": "New-York/NY."}, True),
        ({**BASE, "city": "New Jersey"}, False),
        # An int is fine where a float is expected, not the other way round; bool is no int.
        ({"city": "NYC", "km": 12}, True),
        ({"city": "NYC", "km": 12.5}, False),
        ({**BASE, "stops": 2}, True),
        ({**BASE, "stops": 2.0}, False),
        ({**BASE, "stops": True}, False),
        ({**BASE, "km": "12.0"}, False),
        # Lists: order matters, strings inside are standardised.
        ({**BASE, "avoid": ["highways", "Tolls"]}, True),
        ({**BASE, "avoid": ["tolls", "highways"]}, False),
        ({**BASE, "avoid": []}, True),  # the optional "" stands for an empty list too
        ({**BASE, "point": [40.7, -74.0]}, True),
        ({**BASE, "point": [40.7]}, False),
        # Dicts: each key's value among its allowed ones; optional keys may be left out.
        ({**BASE, "options": {"fast": True}}, True),
        ({**BASE, "options": {"fast": True, "tolls": False}}, True),
        ({**BASE, "options": {"fast": False}}, False),
        ({**BASE, "options": {"tolls": False}}, False),
        ({**BASE, "options": {"fast": True, "ferry": True}}, False),
        # Lists of dicts: same length and order, each dict matching.
        ({**BASE, "legs": [{"to": "boston"}, {"to": "Albany NY"}]}, True),
        ({**BASE, "legs": [{"to": "Albany, NY"}, {"to": "Boston"}]}, False),
        ({**BASE, "legs": [{"to": "Boston"}]}, False),
        # A string answer for a non-string parameter is a variable name, compared exactly.
        ({**BASE, "count": "n_items"}, True),
        ({**BASE, "count": "N_items"}, False),
        ({**BASE, "count": 3}, False),
        ({**BASE, "fast": True}, True),
        ({**BASE, "fast": False}, False),
    ],
)
def test_bfcl_value_rules(arguments: dict[str, Any], valid: bool) -> None:
    assert _simple(arguments) is valid


def test_optional_parameter_must_be_given_when_not_marked_optional() -> None:
    answer: Answer = {"geo.route": {**ANSWER["geo.route"], "stops": [3]}}
    call = [{"geo.route": BASE}]
    assert not check_calls("simple_python", [FUNCTION], call, [answer]).valid
    assert check_calls(
        "simple_python", [FUNCTION], [{"geo.route": {**BASE, "stops": 3}}], [answer]
    ).valid


def test_multiple_needs_the_right_function_among_several() -> None:
    other = {**FUNCTION, "name": "geo.other"}
    functions = [other, FUNCTION]
    assert check_calls("multiple", functions, [{"geo.route": BASE}], [ANSWER]).valid
    assert not check_calls("multiple", functions, [{"geo.other": BASE}], [ANSWER]).valid
    two = [{"geo.route": BASE}, {"geo.route": BASE}]
    assert not check_calls("multiple", functions, two, [ANSWER]).valid


def test_parallel_is_order_insensitive_and_counts_calls() -> None:
    boston: Answer = {"geo.route": {**ANSWER["geo.route"], "city": ["Boston"]}}
    answers = [ANSWER, boston]
    ny, bo = {"geo.route": BASE}, {"geo.route": {"city": "boston", "km": 12}}
    assert check_calls("parallel", [FUNCTION], [ny, bo], answers).valid
    assert check_calls("parallel", [FUNCTION], [bo, ny], answers).valid
    assert not check_calls("parallel", [FUNCTION], [ny, ny], answers).valid
    assert not check_calls("parallel", [FUNCTION], [ny], answers).valid
    assert not check_calls("parallel", [FUNCTION], [ny, bo, ny], answers).valid
