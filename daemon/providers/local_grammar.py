"""Grammars for the local provider: tool calls and structured output as llama.cpp GBNF.

A model as small as the embedded one rarely writes well-formed JSON on its own, so replies
are constrained by a grammar built from the request's tools or ``response_schema``. Any
schema llama.cpp's converter (or its grammar parser) refuses is relaxed with a warning,
never silently, and never handed to llama.cpp unchecked: a grammar its parser rejects would
crash the whole process.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
from typing import Any

import llama_cpp
from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar, json_schema_to_gbnf

from daemon.providers.base import ChatRequest

log = logging.getLogger("harnessd.providers.local")

_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def normalise_schema(schema: Any) -> Any:
    """``schema`` with BFCL's informal type names turned into JSON-schema ones."""
    if isinstance(schema, list):
        return [normalise_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: normalise_schema(value) for key, value in schema.items()}
    kind = out.get("type")
    if kind == "any":
        del out["type"]
    elif isinstance(kind, str) and kind in _BFCL_TYPES:
        out["type"] = _BFCL_TYPES[kind]
    return out


@functools.lru_cache(maxsize=512)
def _gbnf(schema_json: str) -> str | Exception:
    """llama.cpp's grammar for a JSON schema, or why it has none (cached: tasks repeat tools).

    Key order matters: the grammar writes properties in the schema's order, and the model
    does better with "name" before "arguments", so schemas are never re-sorted.
    """
    try:
        return str(json_schema_to_gbnf(schema_json))
    except Exception as exc:  # the converter signals with assertions and KeyErrors alike
        return exc


@functools.lru_cache(maxsize=512)
def _warn_once(message: str) -> None:
    log.warning("%s", message)


def _convertible(schema: dict[str, Any], what: str, ref: str) -> dict[str, Any]:
    """``schema`` if llama.cpp can turn it into a grammar, else any JSON object (logged once)."""
    found = _gbnf(json.dumps(schema))
    if isinstance(found, Exception):
        _warn_once(
            f"{ref}: {what} cannot be turned into a grammar ({found}); relaxed to any JSON object"
        )
        return {"type": "object"}
    return schema


def reply_schema(request: ChatRequest, ref: str) -> dict[str, Any] | None:
    """The JSON schema the reply must follow, or None for free text."""
    content = None
    if request.response_schema is not None:
        content = _convertible(
            bounded(normalise_schema(request.response_schema)), "response_schema", ref
        )
    if not request.tools:
        return content
    choices = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool.name},
                "arguments": _convertible(
                    bounded(normalise_schema(tool.parameters)),
                    f"tool {tool.name!r} parameters",
                    ref,
                ),
            },
            "required": ["name", "arguments"],
        }
        for tool in request.tools
    ]
    return {
        "type": "object",
        "properties": {
            "tool_calls": {"type": "array", "items": {"anyOf": choices}},
            "content": content if content is not None else {"type": "string"},
        },
        "required": ["tool_calls"],
    }


# Bounded repetitions (maxLength, maxItems, ...) above this are dropped before conversion:
# llama.cpp expands each bound into nested rules, and large ones make grammars it refuses
# (or that take very long to build). Schemas come from harnesses, so they are untrusted.
MAX_REPEAT = 256
_BOUNDS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
# A grammar longer than this is not handed to llama.cpp at all.
MAX_GBNF_CHARS = 200_000


def bounded(schema: Any) -> Any:
    """``schema`` without repetition bounds over MAX_REPEAT (a relaxation, never stricter)."""
    if isinstance(schema, list):
        return [bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: bounded(value)
        for key, value in schema.items()
        if not (key in _BOUNDS and isinstance(value, int) and value > MAX_REPEAT)
    }


@functools.lru_cache(maxsize=512)
def _parses(vocab: int, gbnf: str) -> bool:
    """Whether llama.cpp accepts ``gbnf``. Checked before every first use: llama-cpp-python
    puts a grammar llama.cpp rejects into the sampler chain as a null pointer and the
    process then dies, so a harness's ``response_schema`` could take the daemon down."""
    if len(gbnf) > MAX_GBNF_CHARS:
        return False
    sampler = llama_cpp.llama_sampler_init_grammar(
        ctypes.c_void_p(vocab), gbnf.encode("utf-8"), b"root"
    )
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def grammar_for(schema: dict[str, Any] | None, ref: str, llama: Any) -> LlamaGrammar | None:
    if schema is None:
        return None
    found = _gbnf(json.dumps(bounded(schema)))
    if isinstance(found, Exception):
        _warn_once(f"{ref}: reply grammar failed ({found}); relaxed to any JSON object")
        found = JSON_GBNF
    elif not _parses(_vocab_address(llama), found):
        _warn_once(f"{ref}: llama.cpp refused the reply grammar; relaxed to any JSON object")
        found = JSON_GBNF
    return LlamaGrammar.from_string(found, verbose=False)


def _vocab_address(llama: Any) -> int:
    vocab = llama._model.vocab
    return int(ctypes.cast(vocab, ctypes.c_void_p).value or 0)
