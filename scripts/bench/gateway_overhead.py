#!/usr/bin/env python3
"""Per-call cost of the model gateway, with the scripted provider so the model costs ~nothing.

Three ways to make the same chat call, measured side by side in one run and interleaved
round by round, so machine noise hits each alike:

* ``direct``: ``provider.chat(request)``, the scripted provider alone (the floor);
* ``metered``: ``MeteredModel.chat``: budget check, provider, ledger row (the bookkeeping);
* ``gateway``: the guest runtime's own client (``sandbox/guest/harnessd_guest.py``) in a
  worker thread, over the per-run Unix socket, through ``serve_gateway`` and the metered
  model: what a harness in a container pays per call, minus the container boundary.

Usage: .venv/bin/python scripts/bench/gateway_overhead.py [--rounds 5] [--calls 200]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType

import anyio
import anyio.to_thread

from daemon.config.policy import BudgetPolicy, RetryPolicy
from daemon.config.settings import LoadedSettings, Settings
from daemon.evaluation.solve_handler import SolveHandler
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.gateway.metering import MeteredModel
from daemon.gateway.session import serve_gateway
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, Message, Provider, ToolSpec
from daemon.store import Store
from daemon.tasks import Task

GUEST = Path(__file__).resolve().parent.parent / "sandbox" / "guest" / "harnessd_guest.py"
SCRIPT = """
mode = "rules"
[[rules]]
tool_calls = [{ name = "triangle_area", arguments = { base = 10, height = 5 } }]
usage = { prompt_tokens = 180, completion_tokens = 24 }
"""
TOOL = ToolSpec(
    name="triangle_area",
    description="Area of a triangle.",
    parameters={
        "type": "object",
        "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
        "required": ["base", "height"],
    },
)
REQUEST = ChatRequest(
    messages=[
        Message(role="system", content="You call functions."),
        Message(role="user", content="Area of a triangle with base 10 and height 5?"),
    ],
    tools=[TOOL],
    max_tokens=256,
)
BIG = 10**12  # budgets that never refuse: this measures cost, not limits


def _guest_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harnessd_guest", GUEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _client_calls(guest: ModuleType, socket_path: Path, calls: int) -> list[float]:
    """A guest client in this worker thread: per-call round trips, in seconds."""
    gateway = guest.Gateway.connect(str(socket_path))
    model = guest.Model(gateway)
    args = REQUEST.model_dump(mode="json")
    times = []
    try:
        gateway.request("hello", {})
        for _ in range(calls):
            start = time.perf_counter()
            model.chat(args["messages"], tools=args["tools"], max_tokens=args["max_tokens"])
            times.append(time.perf_counter() - start)
    finally:
        gateway._sock.close()
    return times


async def _timed(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return times


async def bench(rounds: int, calls: int) -> dict[str, list[float]]:
    guest = _guest_module()
    with tempfile.TemporaryDirectory(prefix="hd-bench-") as tmp:
        base = Path(tmp)
        (base / "replies.toml").write_text(SCRIPT)
        loaded = LoadedSettings(
            settings=Settings(state_dir=base / "state"), config_path=None, base_dir=base
        )
        provider: Provider = make_provider("scripted:replies.toml", loaded, RetryPolicy())
        store = Store(base / "state.db")
        policy = BudgetPolicy(
            tokens_per_task=BIG, tokens_per_eval=BIG, tokens_per_hour=BIG, tokens_per_day=BIG
        )
        model = MeteredModel(provider, store, BudgetGuard(store, lambda: policy))
        charge = Charge(provider.ref, "solve", run_id="bench", task_id="t")
        task = Task(id="t", suite="bench", kind="function_call", prompt=REQUEST.messages)
        results: dict[str, list[float]] = {"direct": [], "metered": [], "gateway": []}
        try:
            for _ in range(rounds):
                results["direct"] += await _timed(lambda: provider.chat(REQUEST), calls)
                results["metered"] += await _timed(lambda: model.chat(REQUEST, charge), calls)
                sock = base / "gw.sock"
                async with serve_gateway(sock, task, SolveHandler(model, charge)):
                    results["gateway"] += await anyio.to_thread.run_sync(
                        _client_calls, guest, sock, calls
                    )
        finally:
            store.close()
            await provider.aclose()
    return results


def _report(results: dict[str, list[float]]) -> None:
    floor = statistics.median(results["direct"])
    print(f"{'variant':<10}{'calls':>7}{'median µs':>12}{'p90 µs':>10}{'over direct µs':>16}")
    for name, times in results.items():
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        extra = (median - floor) * 1e6
        print(f"{name:<10}{len(times):>7}{median * 1e6:>12.0f}{p90 * 1e6:>10.0f}{extra:>16.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="calls per variant per round")
    args = parser.parse_args()
    _report(anyio.run(bench, args.rounds, args.calls))


if __name__ == "__main__":
    main()
