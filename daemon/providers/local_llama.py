"""``local:<name>``: a GGUF model run in-process by llama-cpp-python, in a worker thread.

``local:smollm2-135m`` is the embedded SmolLM2-135M-Instruct (from its pinned wheel); with
``[local] model_path`` set, ``local:<any name>`` runs that file instead. One ``Llama`` per
model file and context size per process, kept for the process's life, or a few of them
(``[local] instances``; two on a machine of two cores or more): each serves one call at a
time, and a call takes whichever is free. The held-out stage runs the parent's task beside
the candidate's, so two instances of one thread each answer both at once where one
instance would serve them in turn (``scripts/bench/model_threads.py``: 1.48x the requests
of one instance on two cores). Every instance loads the same file with the same settings
and threads, so greedy answers do not depend on which one served a call.

The context window follows the model: the length its GGUF says it was trained on
(``<arch>.context_length``; 8,192 for the embedded model), at most ``CONTEXT_CAP`` tokens,
unless ``[local] n_ctx`` sets it. So a policy whose prompts need the model's whole context
(``policies/tool_use.toml``) runs as shipped, and a model trained on 128k tokens does not
take a KV cache that size unasked.

Tool calls and structured output use llama.cpp's grammar support: a model this small
rarely writes a well-formed call on its own, and constrained every call is well-formed
(whether it is the right call is up to the model: 17 of 30 BFCL simple tasks in a trial):

* tools: they are described in the system prompt, and the reply must be
  ``{"tool_calls": [{"name": <one tool, as a const>, "arguments": <its schema>}, ...],
  "content": <text, optional>}`` (an empty list means no call; at most one call when the
  request sets ``parallel_tool_calls`` false);
* ``response_schema``: the reply must follow it (with tools, it is the ``content`` value).

The grammar is checked against each sampled token, not applied to the whole vocabulary
before it (``local_grammar.CheckFirstSampler``): same tokens at temperature 0, a fraction of
the cost (a tool call 0.97x plain chat per generated token instead of 1.44x).

A schema llama.cpp's converter rejects is relaxed, with a warning in the log, never
silently: a tool's arguments to any JSON object, a ``response_schema`` to any JSON object.
BFCL's informal type names (``dict``, ``float``, ``tuple``, ``any``) are read as their
JSON-schema meaning first. Greedy decoding (temperature 0) with the configured seed is
deterministic; a request's own ``seed`` replaces the configured one for that call. Usage
is llama.cpp's own token count of the prompt and the completion. A cancelled call stops
at the next generated token, or at the next chunk of the prompt while the prompt is being
read; what it spent until then is still charged. The caller waits for that at most
``CANCEL_WAIT_S``. The prompt is built with the GGUF's own chat template (ChatML when the
file has none).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import Llama
from llama_cpp._internals import LlamaModel
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
from llama_cpp.llama_grammar import LlamaGrammar

from daemon.config import assets
from daemon.config.settings import LoadedSettings, LocalSettings
from daemon.errors import ProviderConfigError, ProviderError, SetupError
from daemon.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    ToolCall,
    Usage,
    report_spent,
)
from daemon.providers.local_grammar import CheckFirstSampler, grammar_for, reply_schema

log = logging.getLogger("harnessd.providers.local")

EMBEDDED_NAME = "smollm2-135m"
_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_LOCK_POLL_S = 0.05
# Prompt tokens evaluated between two checks for cancellation. Measured with the embedded
# model on a busy 2-core machine, 2300 tokens into a prompt: 0.4-0.6 s per 32-token chunk
# (0.8-1.0 s per 64) at 52-78 tokens/s, within noise of one 2300-token evaluation (75/s).
PREFILL_CHUNK = 32
# How long a cancelled call waits for its thread to reach that check before it leaves it
# behind (the thread still stops there, and frees the model; the tokens of the chunk it
# was reading are then the only ones not charged).
CANCEL_WAIT_S = 0.5
# The context a model gets without [local] n_ctx: its trained length, at most this. The KV
# cache grows with the context (an 8B model's is about 2 GiB at 16,384 tokens).
CONTEXT_CAP = 16384
# For a GGUF that does not say how long a context it was trained on.
UNSTATED_CONTEXT = 4096


class _Llama(Llama):
    """``Llama`` whose generations check each sampled token against the grammar rather
    than apply the grammar to the whole vocabulary first (:class:`CheckFirstSampler`).

    ``generate`` builds its sampler with ``_init_sampler`` at every call and only calls
    ``sample`` on it; that is the one seam the pinned llama-cpp-python has for it.
    ``check_first`` off gives the library's own sampler back (set per call by the provider).
    """

    check_first = True

    def _init_sampler(self, *args: Any, **kw: Any) -> Any:
        grammar = kw.get("grammar")
        if grammar is None or args or not self.check_first:  # generate passes keywords only
            return super()._init_sampler(*args, **kw)
        chain = super()._init_sampler(**{**kw, "grammar": None})
        # Whether the chain is an argmax.
        greedy = (
            kw.get("temp") == 0.0
            and kw.get("repeat_penalty", 1.0) == 1.0
            and kw.get("frequency_penalty", 0.0) == 0.0
            and kw.get("presence_penalty", 0.0) == 0.0
            and kw.get("logits_processor") is None
        )
        return CheckFirstSampler(chain, self, grammar, greedy=greedy)


@dataclass
class _LoadedModel:
    llama: Any  # llama_cpp.Llama (untyped library)
    formatter: Jinja2ChatFormatter
    eos: str
    lock: threading.Lock


# (file, context, instances) -> the instances, loaded once per process.
_models: dict[tuple[Path, int, int], list[_LoadedModel]] = {}
_models_lock = threading.Lock()
_trained: dict[Path, int | None] = {}


def trained_context(path: Path) -> int | None:
    """The context length the GGUF at ``path`` says its model was trained on
    (``<arch>.context_length``), or None when it does not say. Reads the file's metadata and
    vocabulary, not its weights (a fraction of a second); the answer is kept per file."""
    with _models_lock:
        if path in _trained:
            return _trained[path]
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        # The loader ``Llama`` itself uses: ``Llama(vocab_only=True)`` would also make a
        # context, and say on stderr that it exceeds the (unloaded) training length.
        try:
            model: Any = LlamaModel(path_model=str(path), params=params, verbose=False)
        except (ValueError, OSError) as exc:
            raise ProviderConfigError(
                f"local model {path} cannot be read ({exc}); check [local] model_path"
            ) from None
        try:
            metadata: dict[str, str] = model.metadata()
        finally:
            model.close()
        stated = metadata.get(f"{metadata.get('general.architecture', '')}.context_length", "")
        found = _trained[path] = int(stated) if stated.isdigit() and int(stated) > 0 else None
        return found


def context_size(path: Path, cfg: LocalSettings) -> int:
    """The context the model at ``path`` runs with: ``[local] n_ctx`` when set, else its
    trained length up to ``CONTEXT_CAP`` (``UNSTATED_CONTEXT`` when the file does not say)."""
    if cfg.n_ctx is not None:
        return cfg.n_ctx
    trained = trained_context(path)
    return UNSTATED_CONTEXT if trained is None else min(trained, CONTEXT_CAP)


def instances(cfg: LocalSettings) -> int:
    """How many instances of a local model to run: ``[local] instances``, else two where the
    machine has two cores or more (one where it has one)."""
    if cfg.instances is not None:
        return cfg.instances
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _threads(cfg: LocalSettings, count: int) -> tuple[int | None, int | None]:
    """(generation, prompt) threads of each instance: ``[local] n_threads`` when set
    (generation only, as llama-cpp-python takes it); else the machine's cores shared out among
    the instances, for reading the prompt too, so that instances working at once do not
    oversubscribe the cores (llama.cpp's threads spin while they wait)."""
    if cfg.n_threads is not None:
        return cfg.n_threads, None
    each = max(1, (os.cpu_count() or 1) // count)
    return each, each


def _open_model(path: Path, cfg: LocalSettings) -> list[_LoadedModel]:
    n_ctx = context_size(path, cfg)
    count = instances(cfg)
    with _models_lock:
        found = _models.get((path, n_ctx, count))
        if found is not None:
            return found
        pool = [_load_one(path, n_ctx, cfg, count) for _ in range(count)]
        _models[path, n_ctx, count] = pool
        return pool


def _load_one(path: Path, n_ctx: int, cfg: LocalSettings, count: int) -> _LoadedModel:
    generating, reading = _threads(cfg, count)
    try:
        llama = _Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=generating,
            n_threads_batch=reading,
            seed=cfg.seed,
            verbose=False,
        )
    except (ValueError, OSError) as exc:
        raise ProviderConfigError(
            f"local model {path} cannot be loaded ({exc}); check [local] model_path"
        ) from None
    eos_id, bos_id = llama.token_eos(), llama.token_bos()
    eos = llama.detokenize([eos_id], special=True).decode() if eos_id >= 0 else ""
    bos = llama.detokenize([bos_id], special=True).decode() if bos_id >= 0 else ""
    template = llama.metadata.get("tokenizer.chat_template") or _CHATML
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
    return _LoadedModel(llama, formatter, eos, threading.Lock())


def _take(pool: list[_LoadedModel]) -> _LoadedModel:
    """A free instance of ``pool``, locked for the caller (who releases ``lock``); waits,
    checking for the caller's cancellation, while all are busy (another provider on the same
    file may hold them)."""
    while True:
        for model in pool:
            if model.lock.acquire(blocking=False):
                return model
        if pool[0].lock.acquire(timeout=_LOCK_POLL_S):
            return pool[0]
        anyio.from_thread.check_cancelled()


def _prefill(llama: Any, tokens: list[int]) -> None:
    """Evaluate the prompt, all but its last token, a chunk at a time, checking between
    chunks whether the caller was cancelled (and raising its cancellation there).

    llama.cpp cannot be interrupted inside one evaluation, and a long prompt is one long
    evaluation: measured on a busy 2-core machine, ~74 s for 2700 tokens, all of it deaf
    to a stop. Between two chunks nothing of llama.cpp is on the stack, so raising there is
    safe. ``create_completion`` then finds the prompt in the KV cache (its own prefix
    reuse) and evaluates only the last token before sampling. What was evaluated is
    reported to the call's meter first, so a cancelled call is still charged for it.
    """
    head = tokens[:-1]
    done = Llama.longest_token_prefix(llama._input_ids.tolist(), head)  # already in the cache
    llama.n_tokens = done  # eval() drops whatever the cache holds past this point
    for start in range(done, len(head), PREFILL_CHUNK):
        report_spent(start, 0)
        anyio.from_thread.check_cancelled()
        llama.eval(head[start : start + PREFILL_CHUNK])
    report_spent(len(head), 0)


def _tools_prompt(request: ChatRequest) -> str:
    # Worded as SmolLM2-135M handles best: on 30 BFCL simple tasks this wording gave 17
    # right calls, a longer one with a "no call" instruction 9 to 13. The grammar still
    # allows an empty list with "content" for a reply without a call.
    described = json.dumps([t.model_dump() for t in request.tools], ensure_ascii=False)
    return (
        "You are a helpful assistant with access to functions. Reply in JSON "
        '{"tool_calls": [{"name": ..., "arguments": {...}}]}.\nFunctions:\n' + described
    )


def _calls_json(message: Message) -> str:
    calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    body: dict[str, Any] = {"tool_calls": calls}
    if message.content:
        body["content"] = message.content
    return json.dumps(body, ensure_ascii=False)


def to_chat_messages(request: ChatRequest) -> list[dict[str, str]]:
    """Plain-text chat turns for the model's template; adjacent turns of one role merged."""
    names = {c.id: c.name for m in request.messages for c in m.tool_calls}
    turns: list[dict[str, str]] = []
    tools_told = not request.tools
    if not tools_told and (not request.messages or request.messages[0].role != "system"):
        turns.append({"role": "system", "content": _tools_prompt(request)})
        tools_told = True
    for message in request.messages:
        role, text = message.role, message.content or ""
        if role == "system" and not tools_told:
            text = f"{text}\n\n{_tools_prompt(request)}" if text else _tools_prompt(request)
            tools_told = True
        elif role == "assistant" and message.tool_calls:
            text = _calls_json(message)
        elif role == "tool":
            name = message.name or names.get(message.tool_call_id or "", "the function")
            role, text = "user", f"Result of {name}: {text}"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})
    return turns


def _parse_calls(raw: Any, request: ChatRequest) -> list[ToolCall] | None:
    """The calls in a decoded reply, or None when they are not the shape the grammar asks."""
    if not isinstance(raw, list):
        return None
    calls = []
    for index, call in enumerate(raw):
        if not (
            isinstance(call, dict)
            and isinstance(call.get("name"), str)
            and isinstance(call.get("arguments"), dict)
        ):
            return None
        # Deterministic ids, unique within one conversation.
        call_id = f"call_{len(request.messages)}_{index}"
        calls.append(ToolCall(id=call_id, name=call["name"], arguments=call["arguments"]))
    return calls


def parse_reply(request: ChatRequest, text: str, finish: str, model: str) -> ChatResponse:
    """Split the generated text into content and tool calls (as constrained by the grammar).

    Text that is not the expected shape (cut off by ``max_tokens``, or from a relaxed
    grammar) is handed back as content, with no calls.
    """
    content: str | None = text
    calls: list[ToolCall] = []
    if request.tools:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        parsed = _parse_calls(data.get("tool_calls"), request) if isinstance(data, dict) else None
        if isinstance(data, dict) and parsed is not None:
            calls = parsed
            raw = data.get("content")
            if raw is None:
                content = None
            elif request.response_schema is not None or not isinstance(raw, str):
                content = json.dumps(raw, ensure_ascii=False)
            else:
                content = raw
    return ChatResponse(
        content=content,
        tool_calls=calls,
        usage=Usage(prompt_tokens=0, completion_tokens=0),  # the caller puts llama.cpp's counts
        model=model,
        finish_reason="tool_calls" if calls else finish,
    )


class LocalProvider:
    """A local GGUF model; calls are serialised and run in a worker thread."""

    def __init__(self, ref: str, path: Path | None, settings: LoadedSettings) -> None:
        self.ref = ref
        self._path = path
        self._settings = settings
        self._cfg = settings.settings.local
        # The window the model will run with, so the proposer can fit its prompt before the
        # first call: read from the file when it is on disk already (construction runs in a
        # worker thread), else known once the model is loaded.
        file = path or assets.embedded_model_file(settings.cache_dir)
        known = self._cfg.n_ctx is not None or file.is_file()
        self.capabilities = Capabilities(
            structured_edits=True, context_tokens=context_size(file, self._cfg) if known else None
        )
        # Callers queue here, not in worker threads: a waiting call holds no thread and can
        # be cancelled. One call per instance; each instance's own lock also serialises refs
        # that share one file.
        self._turn = anyio.CapacityLimiter(instances(self._cfg))
        # Tokens generated so far by this provider (for progress, benchmarks and tests that
        # must act while a generation is under way rather than after a guessed delay).
        self.generated_tokens = 0
        # Of the tokens generated under a grammar, how many were refused as first sampled
        # (and then chosen from a shortlist or a full pass) and how many the grammar had to
        # be applied to the whole vocabulary for: the rest cost one token's check. For the
        # benchmark and the test that the fast path is taken.
        self.grammar_tokens = 0
        self.grammar_refused = 0
        self.full_grammar_passes = 0
        # False: the grammar applied to the whole vocabulary at every token, as the library
        # does (the reference the benchmark and the tests compare the check-first path with).
        self.grammar_check_first = True

    def _model_path(self) -> Path:
        if self._path is not None:
            return self._path
        try:
            return assets.embedded_model(self._settings.cache_dir)
        except SetupError as exc:
            raise ProviderConfigError(f"{self.ref}: the embedded model is missing: {exc}") from None

    def _open(self) -> list[_LoadedModel]:
        pool = _open_model(self._model_path(), self._cfg)
        if self.capabilities.context_tokens is None:
            self.capabilities = replace(self.capabilities, context_tokens=pool[0].llama.n_ctx())
        return pool

    async def load(self) -> None:
        """Load the model now rather than on the first call (e.g. at daemon start)."""
        await anyio.to_thread.run_sync(self._open, limiter=self._turn)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        ended = threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                self._chat_blocking, request, ended, limiter=self._turn, abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            # The thread stops at its next prompt chunk or token. Wait for that a moment, so
            # what it spent is metered exactly and the model is free, but no longer: one
            # chunk can take seconds on a busy machine, and a stop must not wait on it.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(ended.wait, CANCEL_WAIT_S)
            raise

    async def prompt_tokens(self, request: ChatRequest) -> int:
        """Exact: the request rendered with the model's chat template, tokenized."""
        return await anyio.to_thread.run_sync(self._count_blocking, request, limiter=self._turn)

    def _count_blocking(self, request: ChatRequest) -> int:
        model = self._open()[0]  # the template and vocabulary only, the same in each
        messages: Any = to_chat_messages(request)
        prompt_text = model.formatter(messages=messages).prompt
        return len(model.llama.tokenize(prompt_text.encode("utf-8"), add_bos=False, special=True))

    def _chat_blocking(self, request: ChatRequest, ended: threading.Event) -> ChatResponse:
        try:
            pool = self._open()
            model = _take(pool)
            try:
                grammar = grammar_for(reply_schema(request, self.ref), self.ref, model.llama)
                messages: Any = to_chat_messages(request)  # the library's TypedDicts
                prompt_text = model.formatter(messages=messages).prompt
                return self._generate(model, request, prompt_text, grammar)
            finally:
                model.lock.release()
        finally:
            ended.set()

    def _generate(
        self,
        model: _LoadedModel,
        request: ChatRequest,
        prompt_text: str,
        grammar: LlamaGrammar | None,
    ) -> ChatResponse:
        llama = model.llama
        tokens = llama.tokenize(prompt_text.encode("utf-8"), add_bos=False, special=True)
        room = llama.n_ctx() - len(tokens)
        if room <= 0:
            raise ProviderError(
                f"{self.ref}: the prompt has {len(tokens)} tokens but the context holds "
                f"{llama.n_ctx()}; shorten the conversation or raise [local] n_ctx",
                kind="bad_request",
            )
        _prefill(llama, tokens)
        cancelled = False

        def stop_if_cancelled(ids: npt.NDArray[np.intc], _logits: npt.NDArray[np.single]) -> bool:
            # Stop the generation between tokens, never raise out of it: an exception thrown
            # through llama.cpp's decode loop leaves the context half-updated and the next
            # call on the same model crashes the process.
            nonlocal cancelled
            self.generated_tokens += 1
            report_spent(len(tokens), max(0, len(ids) - len(tokens)))
            try:
                anyio.from_thread.check_cancelled()
            except BaseException:
                cancelled = True
                return True
            return False

        llama.check_first = self.grammar_check_first
        completion = llama.create_completion(
            prompt=tokens,
            max_tokens=min(request.max_tokens, room),
            temperature=request.temperature,
            seed=self._cfg.seed if request.seed is None else request.seed,
            stop=[model.eos] if model.eos else [],
            grammar=grammar,
            stopping_criteria=llama_cpp.StoppingCriteriaList([stop_if_cancelled]),
        )
        sampler = getattr(llama, "_sampler", None)
        if isinstance(sampler, CheckFirstSampler):
            self.grammar_tokens += sampler.tokens
            self.grammar_refused += sampler.refused
            self.full_grammar_passes += sampler.full_passes
        usage = completion["usage"]
        report_spent(usage["prompt_tokens"], usage["completion_tokens"])
        if cancelled:
            anyio.from_thread.check_cancelled()  # re-raises the caller's cancellation
        choice = completion["choices"][0]
        response = parse_reply(request, choice["text"], choice["finish_reason"] or "stop", self.ref)
        return response.model_copy(
            update={
                "usage": Usage(
                    prompt_tokens=usage["prompt_tokens"],
                    completion_tokens=usage["completion_tokens"],
                )
            }
        )

    async def probe(self) -> None:
        """Always answers: the model runs in this process."""

    async def aclose(self) -> None:
        """Nothing to close: the model stays loaded for the process (shared by every ref)."""


def local_model_path(ref: str, name: str, settings: LoadedSettings) -> Path | None:
    """The explicit model file for ``local:<name>``, or None for the embedded model."""
    configured = settings.settings.local.model_path
    if configured is None:
        if name != EMBEDDED_NAME:
            raise ProviderConfigError(
                f"{ref}: unknown local model; the embedded one is 'local:{EMBEDDED_NAME}', or "
                "set [local] model_path in the settings to run your own GGUF file"
            )
        return None
    path = settings.resolve(configured)
    if not path.is_file():
        raise ProviderConfigError(
            f"{ref}: [local] model_path {path} is not a file; fix the path in the settings"
        )
    return path
