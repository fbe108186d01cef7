"""Grammars for the local provider: tool calls and structured output as llama.cpp GBNF.

A model as small as the embedded one rarely writes well-formed JSON on its own, so replies
are constrained by a grammar built from the request's tools or ``response_schema``. Any
schema llama.cpp's converter (or its grammar parser) refuses is relaxed with a warning,
never silently, and never handed to llama.cpp unchecked: a grammar its parser rejects would
crash the whole process.

How a grammar is applied is :class:`CheckFirstSampler`'s: each token is sampled as if
unconstrained and then checked against the grammar alone; the grammar is applied to the
whole vocabulary only when that token is not allowed (llama.cpp's own sampler does the
same). Greedy decoding gives exactly the tokens of the full pass at every step.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
from typing import Any

import llama_cpp
import numpy as np
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
            "tool_calls": {
                "type": "array",
                "items": {"anyOf": choices},
                # One call: the list closes after it (the model cannot repeat it to the end).
                **({} if request.parallel_tool_calls else {"maxItems": 1}),
            },
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


# llama_token_data as numpy sees it, to fill a whole vocabulary's worth in one assignment.
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
# Greedy decoding: when the best token is refused, the grammar is asked about this many of
# the next best ones together before it is applied to the whole vocabulary.
SHORTLIST = 64


class CheckFirstSampler:
    """llama-cpp-python's per-token sampler (what ``Llama.generate`` calls ``sample`` on),
    with the grammar checked after sampling instead of applied before it.

    The library applies the grammar to all 49k candidates at every generated token, which
    made a tool-call reply cost three times plain chat per token (56.8 vs 18.8 ms). Here the
    sampling ``chain`` (penalties, then greedy or the temperature samplers, without the
    grammar) picks a token from the raw logits and the grammar is asked about that one
    token; only when it refuses is the grammar applied to every candidate and the chain run
    again on what is left (llama.cpp's ``common_sampler_sample``, grammar not first). Every
    token taken is one the grammar allows, so the reply is as valid as before.

    ``greedy`` (temperature 0, no penalties: the chain is an argmax): the token is the full
    pass's own, the best token the grammar allows. When the best one is refused, the next
    ``SHORTLIST`` best are checked in one call and the best allowed of them is taken; only
    if none is allowed is the grammar applied to the whole vocabulary. At a temperature
    without top-k/top-p truncation the distribution is the full pass's too (taking t with
    probability p(t), else drawing from the allowed tokens renormalised, gives
    p(t) / P(allowed)); with truncation it differs slightly, as in llama.cpp.
    """

    def __init__(self, chain: Any, llama: Any, grammar: LlamaGrammar, *, greedy: bool) -> None:
        self._grammar: Any = None
        self._chain = chain  # llama_cpp._internals.LlamaSampler, freed by its own finaliser
        self._greedy = greedy
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._grammar:  # grammar_for only hands out grammars llama.cpp parsed
            raise RuntimeError("llama.cpp refused a grammar it accepted before")
        self._n_vocab = int(llama.n_vocab())
        assert ctypes.sizeof(llama_cpp.llama_token_data) == _TOKEN_DATA.itemsize
        self._cur = (llama_cpp.llama_token_data * self._n_vocab)()
        self._cur_p = ctypes.cast(self._cur, llama_cpp.llama_token_data_p)
        self._view = np.frombuffer(memoryview(self._cur).cast("B"), dtype=_TOKEN_DATA)
        self._ids = np.arange(self._n_vocab, dtype=np.int32)
        # Tokens sampled, how many of them the grammar refused as first sampled, and how many
        # needed the grammar over the whole vocabulary.
        self.tokens = 0
        self.refused = 0
        self.full_passes = 0

    def _logits(self, ctx: Any, idx: int) -> Any:
        logits = llama_cpp.llama_get_logits_ith(ctx, idx)
        return np.ctypeslib.as_array(logits, shape=(self._n_vocab,))

    def _apply(self, sampler: Any, ids: Any, logits: Any) -> Any:
        """``sampler`` applied to the candidates ``ids`` (with their ``logits``)."""
        n = len(ids)
        view = self._view[:n]
        view["id"] = ids
        view["logit"] = logits
        view["p"] = 0.0
        cur = llama_cpp.llama_token_data_array(data=self._cur_p, size=n, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(cur))
        return cur

    def _allowed(self, ids: Any) -> Any:
        """Which of ``ids`` the grammar allows next (a mask in their order)."""
        self._apply(self._grammar, ids, np.ones(len(ids), dtype=np.float32))
        return self._view["logit"][: len(ids)] != -np.inf

    def _chosen(self, cur: Any) -> int:
        return int(cur.data[cur.selected].id)

    def _full_pass(self, logits: Any) -> int:
        """The library's way: the grammar over every token, then the chain on what is left."""
        self.full_passes += 1
        self._apply(self._grammar, self._ids, logits)  # refused tokens' logits become -inf
        cur = llama_cpp.llama_token_data_array(
            data=self._cur_p, size=self._n_vocab, selected=-1, sorted=False
        )
        llama_cpp.llama_sampler_apply(self._chain.sampler, ctypes.byref(cur))
        return self._chosen(cur)

    def _greedy_token(self, logits: Any) -> int:
        best = int(np.argmax(logits))  # the first of the best, as llama.cpp's greedy picks
        if self._allowed(np.array([best], dtype=np.int32))[0]:
            return best
        self.refused += 1
        # The best allowed token is the first allowed one in order of logit, ties by id.
        short = np.argpartition(-logits, SHORTLIST)[:SHORTLIST]
        short = short[np.lexsort((short, -logits[short]))].astype(np.int32)
        allowed = self._allowed(short)
        if allowed.any():
            first = int(np.argmax(allowed))
            # A token outside the shortlist could tie with the shortlist's last logit and
            # come first by id; then only the full pass is exact.
            if logits[short[first]] > logits[short[-1]]:
                return int(short[first])
        return self._full_pass(logits)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The next token (``ctx`` is the library's LlamaContext), accepted by the grammar
        and the chain."""
        logits = self._logits(ctx.ctx, idx)
        if self._greedy:
            token = self._greedy_token(logits)
        else:
            token = self._chosen(self._apply(self._chain.sampler, self._ids, logits))
            if not self._allowed(np.array([token], dtype=np.int32))[0]:
                self.refused += 1
                token = self._full_pass(logits)
        self.tokens += 1
        llama_cpp.llama_sampler_accept(self._grammar, token)
        llama_cpp.llama_sampler_accept(self._chain.sampler, token)
        return token

    def close(self) -> None:
        if self._grammar:
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

    def __del__(self) -> None:
        if getattr(self, "_chain", None) is not None:
            self.close()
