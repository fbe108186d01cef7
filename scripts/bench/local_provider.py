#!/usr/bin/env python3
"""The embedded model's cost per request kind: tool calls (grammar-constrained) and JSON-schema
replies against plain chat of the same prompt, and what reading the prompt costs.

For each of K real BFCL simple tasks, the same prompt text (the task's question with its
tool descriptions, as the local provider renders it) is sent as:

* ``plain``: plain chat, no grammar;
* ``tools``: the task's tool-call request (llama.cpp grammar for the calls, applied the
  provider's way: each sampled token checked, see ``local_grammar.CheckFirstSampler``);
* ``tools, full pass``: the same with the grammar applied to the whole vocabulary at every
  token, as llama-cpp-python does (the provider before its check-first sampler);
* ``schema`` and ``schema, full pass``: plain chat with a ``response_schema`` (grammar for
  one JSON object), both ways;
* ``plain, prompt read``: plain chat with the prompt not in llama.cpp's prefix cache.

The variants of a task share their prompt text. An untimed one-token call reads it first, so
every variant but the last finds it in the prefix cache and its time is decoding alone (before
this, the variant measured first for a task, ``tools``, read the prompt and the others did
not, which put the prompt's cost into the tool-call figure only); before ``plain, prompt
read`` an untimed call on another prompt empties the cache. Variants interleaved task by task
and round by round; greedy, at most ``max_tokens`` tokens each. Printed per variant: median
seconds per request and per generated token, as ratios to plain, and for the check-first
variants the share of tokens whose sampled choice the grammar refused (then the best allowed
of a shortlist is taken) and the share that needed a full pass. The machine's load is printed
before and after (the figures mean little above a load of 1 on a 2-core machine).

Usage: .venv/bin/python scripts/bench/local_provider.py [--tasks 6] [--rounds 2] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

import anyio
from common import asset_cache, bench_settings, bfcl_simple_tasks, machine, median

from daemon.providers.base import ChatRequest, Message
from daemon.providers.local_llama import LocalProvider, to_chat_messages
from daemon.suites import load_suite

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer", "confidence"],
}


def _requests(task_ids: list[str], max_tokens: int) -> list[dict[str, ChatRequest]]:
    suite = load_suite("bfcl:simple", asset_cache())
    out = []
    for task_id in task_ids:
        task = suite.task(task_id)
        tools = ChatRequest(messages=task.prompt, tools=task.tools, max_tokens=max_tokens)
        turns = [Message(role=t["role"], content=t["content"]) for t in to_chat_messages(tools)]  # type: ignore[arg-type]
        plain = ChatRequest(messages=turns, max_tokens=max_tokens)
        schema = plain.model_copy(update={"response_schema": SCHEMA})
        out.append({"plain": plain, "tools": tools, "schema": schema})
    return out


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    print(f"before: {_load()}")
    ids = bfcl_simple_tasks(args.tasks)
    requests = _requests(ids, args.max_tokens)
    seconds: dict[str, list[float]] = defaultdict(list)
    per_token: dict[str, list[float]] = defaultdict(list)
    prompt_tokens: list[int] = []
    refused: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # refused, full, tokens
    with bench_settings("") as (loaded, _holder, _root):
        provider = LocalProvider("local:smollm2-135m", None, loaded)
        await provider.load()
        await provider.chat(requests[0]["plain"])  # warm up

        async def timed(name: str, request: ChatRequest) -> None:
            provider.grammar_check_first = not name.endswith("full pass")
            counts = refused[name]
            counts[0] -= provider.grammar_refused
            counts[1] -= provider.full_grammar_passes
            counts[2] -= provider.grammar_tokens
            start = time.perf_counter()
            reply = await provider.chat(request)
            took = time.perf_counter() - start
            counts[0] += provider.grammar_refused
            counts[1] += provider.full_grammar_passes
            counts[2] += provider.grammar_tokens
            seconds[name].append(took)
            per_token[name].append(took / max(reply.usage.completion_tokens, 1))
            if name == "plain":
                prompt_tokens.append(reply.usage.prompt_tokens)

        other = ChatRequest(messages=[Message(role="user", content="Hi.")], max_tokens=1)
        for _ in range(args.rounds):
            for variants in requests:
                await provider.chat(variants["plain"].model_copy(update={"max_tokens": 1}))
                for name in ("tools", "tools, full pass", "plain", "schema", "schema, full pass"):
                    await timed(name, variants[name.removesuffix(", full pass")])
                await provider.chat(other)
                await timed("plain, prompt read", variants["plain"])
    base, base_token = median(seconds["plain"]), median(per_token["plain"])
    print(
        f"{len(ids)} BFCL simple prompts (median {median([float(p) for p in prompt_tokens]):.0f} "
        f"prompt tokens), max_tokens {args.max_tokens}, {args.rounds} round(s)"
    )
    head = f"  {'variant':<20} {'s/request':>10} {'ratio':>7} {'ms/token':>9} {'ratio':>7}"
    print(f"{head} {'refused':>8} {'full':>5}")
    names = ("plain", "tools", "tools, full pass", "schema", "schema, full pass")
    for name in (*names, "plain, prompt read"):
        s, t = median(seconds[name]), median(per_token[name])
        no, full, tokens = refused[name]
        share = f"{no / tokens:>8.0%} {full / tokens:>5.0%}" if tokens else ""
        row = f"  {name:<20} {s:>10.3f} {s / base:>6.2f}x {t * 1000:>9.1f} {t / base_token:>6.2f}x"
        print(f"{row} {share}".rstrip())
    print(f"after: {_load()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    anyio.run(main, parser.parse_args())
