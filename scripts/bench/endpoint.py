#!/usr/bin/env python3
"""What the OpenAI-compatible endpoint costs over ``harnessctl ask`` and over a bare
provider call, on the embedded model, as ratios within one run.

A real ``harnessd serve`` (loop off, endpoint on, the default policy: the seed on
``local:smollm2-135m``) answers the same questions three ways, interleaved round by round
in a rotating order:

* ``bare``: the provider alone, in this process: ``provider.chat`` with the request the
  seed makes for a question (one user message, ``max_tokens`` 512);
* ``ask``: the control socket's ``ask`` verb, what ``harnessctl ask`` sends (a fresh
  sandbox, the seed, the gateway, the ledger);
* ``endpoint``: the ``openai`` SDK's ``chat.completions.create`` to the endpoint (HTTP,
  auth, translation, then the same live-harness path as ``ask``).

The model is deterministic (temperature 0, fixed seed), so each question costs the model
the same on every path; what differs is the daemon's own work. Prints ``uptime``'s load
before and after, the median wall per path and the ratios.

Usage: .venv/bin/python scripts/bench/endpoint.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import openai
from common import ROOT, asset_cache, machine, median

from daemon.config.policy import RetryPolicy
from daemon.config.settings import load_settings
from daemon.control.client import ControlClient
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, Message

QUESTIONS = [
    "What is 2 + 3? Answer with the number only.",
    "Name the capital of France in one word.",
    "Is water wet? Answer yes or no.",
]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _start(root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    state = root / "state"
    policy = root / "policy.toml"
    policy.write_text("[loop]\nenabled = false\n")
    config = root / "harnessd.toml"
    config.write_text(
        f'state_dir = "{state}"\ncache_dir = "{asset_cache()}"\npolicy = "{policy}"\n'
        f'harnesses_dir = "{root / "harnesses"}"\nseed = "{ROOT / "seeds" / "minimal"}"\n'
        'log_format = "json"\n\n[endpoint]\nenabled = true\nport = 0\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSD_")}
    with (root / "daemon.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "--config", str(config), "serve"],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            cwd=ROOT,
        )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"harnessd exited {proc.returncode}: {(root / 'daemon.log').read_text()}")
        try:
            with ControlClient(state / "control.sock", timeout=10) as c:
                c.call("status")
            return proc, config
        except Exception:
            time.sleep(0.3)
    proc.kill()
    sys.exit("harnessd did not come up")


async def _timed(fn: Callable[[str], Awaitable[Any]], q: str) -> float:
    start = time.perf_counter()
    await fn(q)
    return time.perf_counter() - start


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    print(f"uptime before: {uptime()}")
    with tempfile.TemporaryDirectory(prefix="harnessd-bench-") as tmp:
        root = Path(tmp)
        proc, config = _start(root)
        try:
            loaded = load_settings(config)
            socket = loaded.state_dir / "control.sock"
            with ControlClient(socket, timeout=600) as c:
                url = c.call("status")["endpoint"]["url"]
            token = (loaded.state_dir / "endpoint.token").read_text().strip()
            client = openai.OpenAI(base_url=url, api_key=token, max_retries=0, timeout=600)
            provider = make_provider("local:smollm2-135m", loaded, RetryPolicy())

            tokens: dict[str, list[int]] = {"bare": [], "ask": [], "endpoint": []}

            async def bare(q: str) -> None:
                request = ChatRequest(messages=[Message(role="user", content=q)], max_tokens=512)
                response = await provider.chat(request)
                tokens["bare"].append(response.usage.completion_tokens)

            def ask_blocking(q: str) -> None:
                with ControlClient(socket, timeout=600) as c:
                    answer = c.call("ask", text=q)
                assert answer["error"] is None, answer
                tokens["ask"].append(int(answer["completion_tokens"]))

            async def ask(q: str) -> None:
                await anyio.to_thread.run_sync(ask_blocking, q)

            def endpoint_blocking(q: str) -> None:
                completion = client.chat.completions.create(
                    model="harnessd", messages=[{"role": "user", "content": q}]
                )
                assert completion.choices[0].message.content is not None
                assert completion.usage is not None
                tokens["endpoint"].append(completion.usage.completion_tokens)

            async def endpoint(q: str) -> None:
                await anyio.to_thread.run_sync(endpoint_blocking, q)

            paths = {"bare": bare, "ask": ask, "endpoint": endpoint}
            for fn in paths.values():  # warm: the model loaded, the image cached
                await fn("warm up")
            walls: dict[str, list[float]] = {name: [] for name in paths}
            order = list(paths)
            for r in range(args.rounds):
                for q in QUESTIONS:
                    for name in order:
                        walls[name].append(await _timed(paths[name], q))
                order = order[1:] + order[:1]  # rotate: no path always first after a pause
                print(f"  round {r + 1}/{args.rounds} done", flush=True)
            client.close()
            await provider.aclose()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    print(f"uptime after:  {uptime()}")
    # The model's own work per path (the warm-up included): equal when the paths are fair.
    print("completion tokens per path (total):", {k: sum(v) for k, v in tokens.items()})
    n = len(walls["bare"])
    med = {name: median(v) for name, v in walls.items()}
    print(f"{n} requests per path ({args.rounds} rounds x {len(QUESTIONS)} questions), medians:")
    for name in paths:
        v = sorted(walls[name])
        q1, q3 = v[len(v) // 4], v[(3 * len(v)) // 4]
        print(
            f"  {name:<9} median {med[name]:7.3f} s  {med[name] / med['bare']:5.2f}x bare"
            f"   (min {v[0]:.3f} s, quartiles {q1:.3f}-{q3:.3f} s)"
        )
    low = {name: min(v) for name, v in walls.items()}
    print(
        "best of each (least disturbed by other load): "
        f"endpoint / ask {low['endpoint'] / low['ask']:.3f}x, "
        f"endpoint / bare {low['endpoint'] / low['bare']:.2f}x, "
        f"ask / bare {low['ask'] / low['bare']:.2f}x"
    )
    print(
        f"endpoint / ask: {med['endpoint'] / med['ask']:.3f}x "
        f"(+{(med['endpoint'] - med['ask']) * 1000:.0f} ms); "
        f"endpoint / bare: {med['endpoint'] / med['bare']:.2f}x; "
        f"ask / bare: {med['ask'] / med['bare']:.2f}x"
    )
    # Paired per request (the same question in the same round), which cancels most of a
    # shared machine's drift between rounds.
    paired = sorted(e / a for e, a in zip(walls["endpoint"], walls["ask"], strict=True))
    print(
        f"endpoint / ask per request: median {median(paired):.3f}x, "
        f"range {paired[0]:.2f}x-{paired[-1]:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    anyio.run(main, parser.parse_args())
