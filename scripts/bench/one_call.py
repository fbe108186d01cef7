#!/usr/bin/env python3
"""One call per reply against the seed's ask, on the embedded model: time, tokens, solved.

For N real BFCL simple tasks (the same ones in every run), each task's request is sent as
the seed sends it (the task's messages and tools, ``max_tokens`` 512) and again with
``parallel_tool_calls`` false (what the component ``one_call_per_reply`` asks for),
interleaved task by task, greedy. Before each timed request an untimed one-token call on
another prompt empties llama.cpp's prefix cache, so both ways read the task's prompt (as
every task of an evaluation does) and the second is not served the first one's. Each
reply's calls are checked by the suite's own verifier: as they came (the seed returns them
all) and, for the seed's ask, cut to the first (what the component ``first_call_only``
makes of them). Printed: seconds, completion
tokens and replies cut off by ``max_tokens`` for each way of asking, and the solved counts;
the machine's load before and after, and CPU steal over the run.

Usage: .venv/bin/python scripts/bench/one_call.py [--tasks 60]
"""

from __future__ import annotations

import argparse
import time

import anyio
from common import asset_cache, bench_settings, bfcl_simple_tasks, cpu_times, load_average

from daemon.providers.base import ChatRequest, ChatResponse, Message
from daemon.providers.local_llama import LocalProvider
from daemon.suites import load_suite


def _calls(reply: ChatResponse) -> list[dict[str, object]]:
    return [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls]


async def main(args: argparse.Namespace) -> None:
    print(f"before: load {load_average()}")
    steal0, total0 = cpu_times()
    suite = load_suite("bfcl:simple", asset_cache())
    ids = bfcl_simple_tasks(args.tasks)
    seconds = {"seed": 0.0, "one": 0.0}
    tokens = {"seed": 0, "one": 0}
    cut = {"seed": 0, "one": 0}
    solved = {"seed": 0, "seed, first call": 0, "one": 0}
    with bench_settings("") as (loaded, _holder, _root):
        provider = LocalProvider("local:smollm2-135m", None, loaded)
        await provider.load()
        other = ChatRequest(messages=[Message(role="user", content="Hi.")], max_tokens=1)
        for task_id in ids:
            task = suite.task(task_id)
            seed = ChatRequest(messages=task.prompt, tools=task.tools, max_tokens=512)
            for name, request in (
                ("seed", seed),
                ("one", seed.model_copy(update={"parallel_tool_calls": False})),
            ):
                await provider.chat(other)
                start = time.perf_counter()
                reply = await provider.chat(request)
                seconds[name] += time.perf_counter() - start
                tokens[name] += reply.usage.completion_tokens
                cut[name] += reply.finish_reason == "length"
                calls = _calls(reply)
                solved[name] += (await suite.check(task_id, calls, None)).passed  # type: ignore[arg-type]
                if name == "seed":
                    first = await suite.check(task_id, calls[:1], None)  # type: ignore[arg-type]
                    solved["seed, first call"] += first.passed
    steal1, total1 = cpu_times()
    steal = (steal1 - steal0) / (total1 - total0) if total1 > total0 else 0.0
    print(f"{len(ids)} BFCL simple tasks, max_tokens 512, greedy")
    print(f"  {'asked':<28} {'s':>7} {'completion tokens':>18} {'cut off':>8} {'solved':>7}")
    for name, label in (("seed", "as the seed asks"), ("one", "parallel_tool_calls false")):
        print(
            f"  {label:<28} {seconds[name]:>7.1f} {tokens[name]:>18} {cut[name]:>8} "
            f"{solved[name]:>7}"
        )
    first = solved["seed, first call"]
    print(f"  {'as the seed asks, first call':<28} {'':>7} {'':>18} {'':>8} {first:>7}")
    print(
        f"ratios (one call / seed): time {seconds['one'] / seconds['seed']:.2f}, "
        f"completion tokens {tokens['one'] / max(tokens['seed'], 1):.2f}"
    )
    print(f"after: load {load_average()}; CPU steal over the run {steal:.0%}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=60)
    anyio.run(main, parser.parse_args())
