#!/usr/bin/env python3
"""What the OpenAI-compatible endpoint costs over ``harnessctl ask``, and both over the
model call they make, on ONE model instance (the daemon's), as ratios within one run.

A real ``harnessd serve`` (loop off, endpoint and ``[metrics]`` on, the default policy: the
seed on ``local:smollm2-135m``) answers the same questions two ways, round by round, the
paths' order rotating each round and no request right after one with the same prompt
(llama.cpp would reuse that prompt's cache, favouring whichever path came second):

* ``ask``: the control socket's ``ask`` verb, what ``harnessctl ask`` sends (a fresh
  sandbox, the seed, the gateway, the ledger), without the ``harnessctl`` process start;
* ``endpoint``: the ``openai`` SDK's ``chat.completions.create`` to the endpoint (HTTP,
  auth, translation, then the same live-harness path as ``ask``).

The third figure, ``model``, is the direct call of the same provider: for every one of
those requests, the daemon's own provider call, timed by its gateway around
``provider.chat`` and read from its metrics (``harnessd_model_call_seconds`` with purpose
``solve``, scraped before and after each request, outside the timing). It is the same
model instance answering the same request with the same tokens, with no harness, sandbox,
control socket or HTTP around it. A bare call made from this process would need a model
instance of its own (the earlier version of this benchmark did that, and so compared two
models, not the endpoint's cost); a daemon verb that calls the model bare would exist only
for the benchmark.

The model is deterministic (temperature 0, fixed seed), so each question costs the model
the same on both paths; what differs is the daemon's own work. Prints the load average and
the CPU time stolen by the hypervisor before and after (both slow the model as much as the
daemon; the figures mean little above a load of 1.5 on two cores), the medians per path,
and the ratios: by medians, best against best, and paired per request.

Usage: .venv/bin/python scripts/bench/endpoint.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
import openai
from common import ROOT, asset_cache, cpu_times, load_average, machine, median, steal_percent
from prometheus_client.parser import text_string_to_metric_families

from daemon.control.client import ControlClient

QUESTIONS = [
    "What is 2 + 3? Answer with the number only.",
    "Name the capital of France in one word.",
    "Is water wet? Answer yes or no.",
]
MODEL = "local:smollm2-135m"


@dataclass
class Timed:
    """One request: its wall seconds, the daemon's provider seconds within it, its calls
    and the completion tokens it reported."""

    wall: float
    model: float
    calls: int
    tokens: int


def _start(root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    state = root / "state"
    policy = root / "policy.toml"
    policy.write_text("[loop]\nenabled = false\n")
    config = root / "harnessd.toml"
    config.write_text(
        f'state_dir = "{state}"\ncache_dir = "{asset_cache()}"\npolicy = "{policy}"\n'
        f'harnesses_dir = "{root / "harnesses"}"\nseed = "{ROOT / "seeds" / "minimal"}"\n'
        'log_format = "json"\n\n[endpoint]\nenabled = true\nport = 0\n\n'
        "[metrics]\nenabled = true\nport = 0\n"
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
            return proc, state
        except Exception:
            time.sleep(0.3)
    proc.kill()
    sys.exit("harnessd did not come up")


class ModelClock:
    """The daemon's provider seconds and calls so far (its metrics)."""

    def __init__(self, url: str) -> None:
        self.http = httpx2.Client(base_url=url, timeout=60)

    def read(self) -> tuple[float, int]:
        text = self.http.get("/metrics").raise_for_status().text
        found = {"sum": 0.0, "count": 0.0}
        for family in text_string_to_metric_families(text):
            if family.name != "harnessd_model_call_seconds":
                continue
            for s in family.samples:
                if s.labels.get("model") == MODEL and s.labels.get("purpose") == "solve":
                    for key in found:
                        if s.name.endswith("_" + key):
                            found[key] = s.value
        return found["sum"], int(found["count"])

    def timed(self, request: Callable[[str], int], question: str) -> Timed:
        model_before, calls_before = self.read()
        start = time.perf_counter()
        tokens = request(question)
        wall = time.perf_counter() - start
        model_after, calls_after = self.read()
        return Timed(wall, model_after - model_before, calls_after - calls_before, tokens)


def _spread(values: list[float]) -> str:
    v = sorted(values)
    return f"min {v[0]:.3f} s, quartiles {v[len(v) // 4]:.3f}-{v[(3 * len(v)) // 4]:.3f} s"


def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    print(f"load before: {load_average()}", flush=True)
    cpu_before = cpu_times()
    with tempfile.TemporaryDirectory(prefix="harnessd-bench-") as tmp:
        proc, state = _start(Path(tmp))
        try:
            with ControlClient(state / "control.sock", timeout=600) as c:
                status = c.call("status")
            token = (state / "endpoint.token").read_text().strip()
            client = openai.OpenAI(
                base_url=status["endpoint"]["url"], api_key=token, max_retries=0, timeout=600
            )
            clock = ModelClock(status["metrics"]["url"])

            def ask(q: str) -> int:
                with ControlClient(state / "control.sock", timeout=600) as c:
                    answer = c.call("ask", text=q)
                assert answer["error"] is None, answer
                return int(answer["completion_tokens"])

            def endpoint(q: str) -> int:
                completion = client.chat.completions.create(
                    model="harnessd", messages=[{"role": "user", "content": q}]
                )
                assert completion.choices[0].message.content is not None
                assert completion.usage is not None
                return completion.usage.completion_tokens

            paths = {"ask": ask, "endpoint": endpoint}
            for fn in paths.values():  # warm: the model loaded, the image cached
                fn("warm up")
            runs: dict[str, list[Timed]] = {name: [] for name in paths}
            order = list(paths)
            for r in range(args.rounds):
                # Each path asks every question in turn, so no request follows one with the
                # same prompt: llama.cpp reuses the cached prefix of the prompt before, and
                # a repeat would be answered faster on whichever path came second. The
                # order of the paths rotates each round (an even number of rounds: each
                # goes first as often).
                for name in order:
                    for q in QUESTIONS:
                        runs[name].append(clock.timed(paths[name], q))
                order = order[1:] + order[:1]
                print(f"  round {r + 1}/{args.rounds} done", flush=True)
            client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    print(f"load after: {load_average()}")
    print(f"CPU steal over the run: {steal_percent(cpu_before, cpu_times())}")
    calls = {name: sum(t.calls for t in v) for name, v in runs.items()}
    tokens = {name: sum(t.tokens for t in v) for name, v in runs.items()}
    print(f"model calls per path: {calls}; completion tokens per path: {tokens}")
    walls = {name: [t.wall for t in v] for name, v in runs.items()}
    walls["model"] = [t.model for v in runs.values() for t in v]
    med = {name: median(v) for name, v in walls.items()}
    n = len(runs["ask"])
    print(f"{n} requests per path ({args.rounds} rounds x {len(QUESTIONS)} questions), medians:")
    for name, values in walls.items():
        print(
            f"  {name:<9} median {med[name]:7.3f} s  {med[name] / med['model']:5.2f}x model"
            f"   ({_spread(values)})"
        )
    print(
        f"endpoint / ask: {med['endpoint'] / med['ask']:.3f}x "
        f"({(med['endpoint'] - med['ask']) * 1000:+.0f} ms); "
        f"endpoint / model: {med['endpoint'] / med['model']:.2f}x; "
        f"ask / model: {med['ask'] / med['model']:.2f}x"
    )
    low = {name: min(v) for name, v in walls.items()}
    print(
        "best of each (least disturbed by other load): "
        f"endpoint / ask {low['endpoint'] / low['ask']:.3f}x, "
        f"endpoint / model {low['endpoint'] / low['model']:.2f}x, "
        f"ask / model {low['ask'] / low['model']:.2f}x"
    )
    # Paired per request: endpoint against ask on the same question in the same round, and
    # each request beyond its own model call.
    paired = sorted(e.wall / a.wall for e, a in zip(runs["endpoint"], runs["ask"], strict=True))
    print(
        f"endpoint / ask per request: median {median(paired):.3f}x, "
        f"range {paired[0]:.2f}x-{paired[-1]:.2f}x"
    )
    for name, v in runs.items():
        own = [t.wall - t.model for t in v]
        print(
            f"{name} beyond its own model call: median {median(own) * 1000:.0f} ms "
            f"({_spread(own)}); its model calls: median {median([t.model for t in v]):.3f} s"
        )
    # What the endpoint adds over ask, free of the model's own variation: each request's
    # time beyond its model call, paired by question and round.
    extra = sorted(
        (e.wall - e.model) - (a.wall - a.model)
        for e, a in zip(runs["endpoint"], runs["ask"], strict=True)
    )
    print(
        "endpoint beyond ask, each beyond its own model call, paired: median "
        f"{median(extra) * 1000:+.0f} ms (range {extra[0] * 1000:+.0f} to "
        f"{extra[-1] * 1000:+.0f} ms)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="an even number")
    main(parser.parse_args())
