#!/usr/bin/env python3
"""How the embedded model's throughput depends on its threads: the same BFCL prompts,
greedy, through three arrangements of the same GGUF file, in one run.

* ``1 thread``: one llama.cpp instance with ``n_threads=1``, the requests one after another.
  This is what ``[local] n_threads`` unset gives on a 2-core machine: llama-cpp-python's
  default is half the cores for generation (``n_threads_batch``, used to read the prompt,
  defaults to all of them);
* ``all cores``: one instance with ``n_threads`` = the machine's cores, one after another;
* ``2 instances x 1 thread``: two instances of one thread each, two requests at a time (the
  daemon's held-out stage runs the parent's task beside the candidate's, but its one model
  serves them one at a time).

Each arrangement answers the same requests; they are interleaved round by round. Printed:
seconds per request (wall time of the round over its requests) and the throughput ratio to
``1 thread``, with the load average and the CPU time the hypervisor stole during the run
(both slow the model; the figures mean little above a load of 1 on a 2-core machine).

Usage: .venv/bin/python scripts/bench/model_threads.py [--tasks 6] [--rounds 2] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

import llama_cpp
from common import (
    asset_cache,
    bfcl_simple_tasks,
    cpu_times,
    load_average,
    machine,
    median,
    steal_percent,
)

from daemon.config import assets
from daemon.providers.base import ChatRequest
from daemon.providers.local_llama import to_chat_messages
from daemon.suites import load_suite


def _messages(task_ids: list[str]) -> list[list[dict[str, Any]]]:
    """Each task's prompt with its tool descriptions, as the local provider renders it."""
    suite = load_suite("bfcl:simple", asset_cache())
    out = []
    for task_id in task_ids:
        task = suite.task(task_id)
        out.append(to_chat_messages(ChatRequest(messages=task.prompt, tools=task.tools)))
    return out


def _answer(llama: llama_cpp.Llama, messages: list[dict[str, Any]], max_tokens: int) -> None:
    llama.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0)  # type: ignore[arg-type]


def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    cores = os.cpu_count() or 1
    prompts = _messages(bfcl_simple_tasks(args.tasks))
    path = str(assets.embedded_model(asset_cache()))

    def load(threads: int) -> llama_cpp.Llama:
        return llama_cpp.Llama(
            model_path=path, n_ctx=4096, n_threads=threads, seed=0, verbose=False
        )

    single, wide, pair = load(1), load(cores), (load(1), load(1))
    for llama in (single, wide, *pair):
        _answer(llama, prompts[0], 1)  # warm up

    def serial(llama: llama_cpp.Llama) -> float:
        start = time.perf_counter()
        for messages in prompts:
            _answer(llama, messages, args.max_tokens)
        return (time.perf_counter() - start) / len(prompts)

    def two_at_a_time() -> float:
        halves = [prompts[0::2], prompts[1::2]]

        def work(llama: llama_cpp.Llama, mine: list[list[dict[str, Any]]]) -> None:
            for messages in mine:
                _answer(llama, messages, args.max_tokens)

        threads = [
            threading.Thread(target=work, args=(llama, mine))
            for llama, mine in zip(pair, halves, strict=True)
        ]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return (time.perf_counter() - start) / len(prompts)

    arrangements = {
        "1 thread": lambda: serial(single),
        f"all cores ({cores} threads)": lambda: serial(wide),
        "2 instances x 1 thread": two_at_a_time,
    }
    seconds: dict[str, list[float]] = {name: [] for name in arrangements}
    print(f"before: load {load_average()}")
    cpu_before = cpu_times()
    for _ in range(args.rounds):
        for name, measure in arrangements.items():
            seconds[name].append(measure())
    steal = steal_percent(cpu_before, cpu_times())
    print(
        f"{len(prompts)} BFCL simple prompts, max_tokens {args.max_tokens}, greedy, "
        f"{args.rounds} round(s)"
    )
    base = median(seconds["1 thread"])
    print(f"  {'arrangement':<26} {'s/request':>10} {'throughput':>11}")
    for name, values in seconds.items():
        s = median(values)
        print(f"  {name:<26} {s:>10.3f} {base / s:>10.2f}x")
    print(f"after: load {load_average()}; CPU steal during the run {steal}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    main(parser.parse_args())
