#!/usr/bin/env python3
"""The embedded model's cost per request kind: tool calls (grammar-constrained) and JSON-schema
replies against plain chat of the same prompt, and what prompt-prefix reuse is worth.

For each of K real BFCL simple tasks, the same prompt text (the task's question with its
tool descriptions, as the local provider renders it) is sent as:

* ``plain``: plain chat, no grammar;
* ``tools``: the task's tool-call request (llama.cpp grammar for the calls);
* ``schema``: plain chat with a ``response_schema`` (grammar for one JSON object);
* ``plain, prefix hit``: the plain request again, straight after itself, so llama.cpp keeps
  the prompt's evaluated prefix (what consecutive calls of one task get);

variants interleaved task by task and round by round. The model must write the same number
of tokens in each (``max_tokens``, greedy), so the per-token figure compares like with like.
Printed per variant: median seconds per request and per generated token, as ratios to plain.

Usage: .venv/bin/python scripts/bench/local_provider.py [--tasks 6] [--rounds 2] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import anyio
from common import asset_cache, bench_settings, machine, median

from daemon.providers.base import ChatRequest, Message
from daemon.providers.local_llama import LocalProvider, to_chat_messages
from daemon.suites import load_suite
from daemon.suites.splits import split

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


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    ids = split(
        load_suite("bfcl:simple", asset_cache()).task_ids(),
        seed="bench",
        dev_size=2,
        heldout_size=args.tasks,
    ).heldout
    requests = _requests(ids, args.max_tokens)
    seconds: dict[str, list[float]] = defaultdict(list)
    per_token: dict[str, list[float]] = defaultdict(list)
    prompt_tokens: list[int] = []
    with bench_settings("") as (loaded, _holder, _root):
        provider = LocalProvider("local:smollm2-135m", None, loaded)
        await provider.load()
        await provider.chat(requests[0]["plain"])  # warm up

        async def timed(name: str, request: ChatRequest) -> None:
            start = time.perf_counter()
            reply = await provider.chat(request)
            took = time.perf_counter() - start
            seconds[name].append(took)
            per_token[name].append(took / max(reply.usage.completion_tokens, 1))
            if name == "plain":
                prompt_tokens.append(reply.usage.prompt_tokens)

        for _ in range(args.rounds):
            for variants in requests:
                for name in ("tools", "plain", "schema"):
                    await timed(name, variants[name])
                await timed("plain, prefix hit", variants["plain"])
    base, base_token = median(seconds["plain"]), median(per_token["plain"])
    print(
        f"{len(ids)} BFCL simple prompts (median {median([float(p) for p in prompt_tokens]):.0f} "
        f"prompt tokens), max_tokens {args.max_tokens}, {args.rounds} round(s)"
    )
    print(f"  {'variant':<20} {'s/request':>10} {'ratio':>7} {'ms/token':>9} {'ratio':>7}")
    for name in ("plain", "tools", "schema", "plain, prefix hit"):
        s, t = median(seconds[name]), median(per_token[name])
        print(f"  {name:<20} {s:>10.3f} {s / base:>6.2f}x {t * 1000:>9.1f} {t / base_token:>6.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    anyio.run(main, parser.parse_args())
