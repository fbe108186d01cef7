"""BFCL function docs as the tools an OpenAI-style model sees.

Mirrors BFCL's own conversion for function-calling models (``convert_to_tool`` with
``GORILLA_TO_OPENAPI`` and ``_func_doc_language_specific_pre_processing`` in bfcl_eval):
BFCL's type names become JSON Schema types, float properties are flagged in their
description, the Python-syntax note is added to the function description, and dots in
function names become underscores because provider APIs only accept ``[a-zA-Z0-9_-]``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from daemon.providers.base import ToolSpec

# BFCL's GORILLA_TO_OPENAPI, restricted to the types of its Python categories. BFCL maps
# "any" to "string" (its checker also wants a str for "any"), so we do too.
_JSON_TYPES = {
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
}
# Not JSON Schema; BFCL expresses optionality through "required" already.
_DROPPED_KEYS = {"optional"}
_PYTHON_NOTE = " Note that the provided function is in Python 3 syntax."
_FLOAT_NOTE = " This is a float type value."


def tool_name(bfcl_name: str) -> str:
    """The name a model sees: BFCL's underscore_to_dot rule for OpenAI-style APIs."""
    return re.sub(r"\.", "_", bfcl_name)


def _convert(node: dict[str, Any], *, is_property: bool) -> dict[str, Any]:
    out = {k: v for k, v in node.items() if k not in _DROPPED_KEYS}
    bfcl_type = node.get("type")
    # BFCL: a property without a type, or with one it does not know, becomes a string.
    out["type"] = _JSON_TYPES.get(bfcl_type, "string") if isinstance(bfcl_type, str) else "string"
    if is_property and bfcl_type == "float":
        out["format"] = "float"
        out["description"] = str(node.get("description", "")) + _FLOAT_NOTE
    if isinstance(node.get("properties"), dict):
        out["properties"] = {
            name: _convert(sub, is_property=True) for name, sub in node["properties"].items()
        }
    if isinstance(node.get("items"), dict):
        out["items"] = _convert(node["items"], is_property=False)
    return out


def to_tool(function: dict[str, Any]) -> ToolSpec:
    """One BFCL function doc as a ToolSpec with a valid JSON Schema for its arguments."""
    function = copy.deepcopy(function)
    parameters = _convert(function.get("parameters") or {}, is_property=False)
    parameters["type"] = "object"
    parameters.setdefault("properties", {})
    return ToolSpec(
        name=tool_name(function["name"]),
        description=str(function.get("description", "")) + _PYTHON_NOTE,
        parameters=parameters,
    )
