"""BFCL's AST checker for Python function calls, rewritten from its published rules.

Each function names the part of ``bfcl_eval/eval_checker/ast_eval/ast_checker.py``
(bfcl-eval 2026.3.23) whose rule it mirrors, including its quirks, so that a score here
is a BFCL score. Calls are BFCL-shaped: ``[{function_name: {param: value}}]``; a possible
answer gives, per parameter, the list of allowed values, where ``""`` marks a parameter
that may be left out.

Unlike BFCL's messages, ours never quote the possible answers: a verdict's detail may be
shown where the ground truth must not be (held-out tasks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

# PYTHON_TYPE_MAPPING and PYTHON_NESTED_TYPE_CHECK_LIST.
_PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_NESTED_TYPES = {"array", "tuple"}
_SHOWN_CHARS = 80

BfclCall = dict[str, dict[str, Any]]
Answer = dict[str, dict[str, list[Any]]]


@dataclass(frozen=True)
class CallCheckResult:
    valid: bool
    error_type: str = ""
    error: str = ""


_OK = CallCheckResult(True)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _fail(error_type: str, error: str) -> CallCheckResult:
    return CallCheckResult(False, error_type, error)


def standardize_string(text: str) -> str:
    """``standardize_string``: drop spaces and ``,./-_*^``, lowercase, ' becomes "."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def _standardized(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


def is_call_list(calls: Any) -> bool:
    """``is_function_calling_format_output``: a list of one-key dicts whose value is a dict."""
    return type(calls) is list and all(
        type(c) is dict and len(c) == 1 and type(next(iter(c.values()))) is dict for c in calls
    )


def is_empty_output(calls: Any) -> bool:
    """``is_empty_output``: what the irrelevance category counts as "no function call"."""
    if not is_call_list(calls):
        return True
    return len(calls) == 0 or (len(calls) == 1 and len(calls[0]) == 0)


def _answer_type(allowed: list[Any]) -> type | None:
    """``get_possible_answer_type``: the type of the first value that is not ``""``."""
    for value in allowed:
        if value != "":
            return type(value)
    return None


def _type_check(
    param: str, value: Any, allowed: list[Any], expected: type, nested: type | None
) -> tuple[CallCheckResult, bool]:
    """``type_checker``: (verdict, is_variable). Checks one level of nesting, like BFCL."""
    answer_type = _answer_type(allowed)
    # A possible answer of another type than the schema's is a variable name (a string).
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return _OK, is_variable
        items = cast("list[Any]", value)  # nested types exist only for lists
        for option in allowed:
            # BFCL accepts at the first option that is not a list (e.g. "" for optional).
            if type(option) is list and not all(
                _type_check(param, item, option, nested, None)[0].valid for item in items
            ):
                continue
            return _OK, is_variable
        return _fail(
            "type_error:nested",
            f"parameter {param!r}: an item of {_shown(value)} is not of type {nested.__name__}",
        ), False
    if answer_type is not None and type(value) is answer_type:
        return _OK, True
    return _fail(
        "type_error:simple",
        f"parameter {param!r}: expected type {expected.__name__}, got {type(value).__name__} "
        f"{_shown(value)}",
    ), False


def _string_check(param: str, value: str, allowed: list[Any]) -> CallCheckResult:
    """``string_checker``: equal after standardisation to one allowed string."""
    options = [standardize_string(a) for a in allowed if type(a) is str]
    if standardize_string(value) in options:
        return _OK
    return _fail("value_error:string", f"parameter {param!r}: {_shown(value)} is not allowed")


def _list_check(param: str, value: list[Any], allowed: list[Any]) -> CallCheckResult:
    """``list_checker``: equal, after standardising top-level strings, to one allowed list."""
    model = [_standardized(v) for v in value]
    # BFCL standardises each option by iterating it, so an optional "" becomes [].
    options = [
        [_standardized(v) for v in option] if type(option) in (list, str) else option
        for option in allowed
    ]
    if model in options:
        return _OK
    return _fail("value_error:list/tuple", f"parameter {param!r}: {_shown(value)} is not allowed")


def _dict_check(param: str, value: dict[str, Any], allowed: list[Any]) -> CallCheckResult:
    """``dict_checker``: every key allowed with an allowed value, every required key given."""
    verdict = _fail("dict_checker:unclear", f"parameter {param!r}: no allowed dictionary")
    for option in allowed:
        if option == "":
            continue
        if type(option) is not dict:
            continue
        verdict = _dict_matches(param, value, option)
        if verdict.valid:
            return _OK
    return verdict


def _as_list(choices: Any) -> list[Any]:
    return choices if type(choices) is list else [choices]


def _dict_matches(param: str, value: dict[str, Any], option: dict[str, Any]) -> CallCheckResult:
    for key, item in value.items():
        if key not in option:
            return _fail("value_error:dict_key", f"parameter {param!r}: unexpected key {key!r}")
        options = [_standardized(a) for a in _as_list(option[key])]
        if _standardized(item) not in options:
            return _fail(
                "value_error:dict_value",
                f"parameter {param!r}: key {key!r} has a value that is not allowed: {_shown(item)}",
            )
    for key, choices in option.items():
        if key not in value and "" not in _as_list(choices):
            return _fail("value_error:dict_key", f"parameter {param!r}: missing key {key!r}")
    return _OK


def _list_dict_check(param: str, value: list[Any], allowed: list[Any]) -> CallCheckResult:
    """``list_dict_checker``: same length as an allowed list, each dict matching in order."""
    verdict = _fail("list_dict_checker:unclear", f"parameter {param!r}: no allowed list")
    for option in allowed:
        if type(option) not in (list, str) or len(value) != len(option):
            verdict = _fail(
                "value_error:list_dict_count",
                f"parameter {param!r}: wrong number of dictionaries in the list",
            )
            continue
        for item, wanted in zip(value, option, strict=True):
            if type(item) is not dict:
                verdict = _fail(
                    "value_error:list_dict_item", f"parameter {param!r}: {_shown(item)} is no dict"
                )
                break
            verdict = _dict_check(param, item, [wanted])
            if not verdict.valid:
                break
        else:
            return _OK
    return verdict


def _param_check(
    param: str, value: Any, schema: dict[str, Any], allowed: list[Any]
) -> CallCheckResult:
    """One parameter's type and value, as in ``simple_function_checker`` for Python."""
    type_name = schema.get("type")
    expected = _PYTHON_TYPES.get(type_name) if isinstance(type_name, str) else None
    if expected is None:
        return _fail("type_error:schema", f"parameter {param!r}: unsupported type {type_name!r}")
    nested: type | None = None
    if type_name in _NESTED_TYPES:
        item_type = (schema.get("items") or {}).get("type")
        nested = _PYTHON_TYPES.get(item_type) if isinstance(item_type, str) else None
        if nested is None:
            return _fail(
                "type_error:schema", f"parameter {param!r}: unsupported item type {item_type!r}"
            )
    if type_name == "float" and type(value) is int:
        value = float(value)  # BFCL allows Python's int-to-float promotion
    verdict, is_variable = _type_check(param, value, allowed, expected, nested)
    if not verdict.valid:
        return verdict
    # A variable is compared as it is; only real values get the type-specific rules.
    if not is_variable:
        if expected is dict:
            return _dict_check(param, value, allowed)
        if expected is list and nested is dict:
            return _list_dict_check(param, value, allowed)
        if expected is str:
            return _string_check(param, value, allowed)
        if expected is list:
            return _list_check(param, value, allowed)
    if value not in allowed:
        return _fail("value_error:others", f"parameter {param!r}: {_shown(value)} is not allowed")
    return _OK


def check_call(function: dict[str, Any], call: BfclCall, answer: Answer) -> CallCheckResult:
    """``simple_function_checker``: one call against one function's possible answer."""
    allowed_by_param = next(iter(answer.values()))
    name = function["name"]
    if name not in call:
        return _fail(
            "simple_function_checker:wrong_func_name",
            f"expected a call of {name!r}, got {_shown(next(iter(call), None))}",
        )
    arguments = call[name]
    schema = function.get("parameters") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    for param in schema.get("required") or []:
        if param not in arguments:
            return _fail(
                "simple_function_checker:missing_required", f"missing required parameter {param!r}"
            )
    for param, value in arguments.items():
        if param not in properties or param not in allowed_by_param:
            return _fail(
                "simple_function_checker:unexpected_param", f"unexpected parameter {param!r}"
            )
        verdict = _param_check(param, value, properties[param], allowed_by_param[param])
        if not verdict.valid:
            return verdict
    for param, allowed in allowed_by_param.items():
        if param not in arguments and "" not in allowed:
            return _fail(
                "simple_function_checker:missing_optional",
                f"parameter {param!r} is needed here but was not given",
            )
    return _OK


def _find_function(functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """``find_description``."""
    for function in functions:
        if function["name"] == name:
            return function
    raise ValueError(f"possible answer names {name!r}, which is not among the task's functions")


def check_parallel(
    functions: list[dict[str, Any]], calls: list[BfclCall], answers: list[Answer]
) -> CallCheckResult:
    """``parallel_function_checker_no_order``: each expected call, in order, takes the first
    still-unmatched output call that passes it (greedy, as BFCL does)."""
    if len(calls) != len(answers):
        return _fail(
            "parallel_function_checker_no_order:wrong_count",
            f"expected {len(answers)} calls, got {len(calls)}",
        )
    unmatched = list(range(len(calls)))
    for position, answer in enumerate(answers):
        function = _find_function(functions, next(iter(answer)))
        match = next((i for i in unmatched if check_call(function, calls[i], answer).valid), None)
        if match is None:
            return _fail(
                "parallel_function_checker_no_order:cannot_find_match",
                f"no output call matches expected call {position} ({function['name']!r})",
            )
        unmatched.remove(match)
    return _OK


def check_calls(
    category: str, functions: list[dict[str, Any]], calls: Any, answers: list[Answer]
) -> CallCheckResult:
    """``ast_checker`` after the runner's format check, dispatching on the BFCL category."""
    if category == "irrelevance":
        if is_empty_output(calls):
            return _OK
        return _fail("irrelevance_error:decoder_success", "a function was called; none applies")
    if not is_call_list(calls):
        return _fail("ast_decoder:decoder_wrong_output_format", "output is not a list of calls")
    if "parallel" in category:
        return check_parallel(functions, calls, answers)
    if "multiple" in category:
        if len(calls) != len(answers):
            return _fail(
                "multiple_function_checker:wrong_count",
                f"expected {len(answers)} call(s), got {len(calls)}",
            )
        function = _find_function(functions, next(iter(answers[0])))
        return check_call(function, calls[0], answers[0])
    if len(calls) != 1:
        return _fail("simple_function_checker:wrong_count", f"expected 1 call, got {len(calls)}")
    return check_call(functions[0], calls[0], answers[0])
