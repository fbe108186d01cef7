"""The gateway issue's acceptance checks, end to end over a real per-run socket (no Docker).

A harness is played by the guest runtime's own client (``sandbox/guest/harnessd_guest.py``)
in a worker thread; the host side is ``serve_gateway`` with a handler over ``MeteredModel``,
as the evaluator wires it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.to_thread
import pytest
from metering_helpers import Clock, Policies, write_script

from daemon.config import secrets
from daemon.config.policy import RetryPolicy
from daemon.config.settings import LoadedSettings, OpenAISettings, Settings
from daemon.evaluation.solve_handler import SolveHandler
from daemon.gateway import ledger
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.gateway.metering import MeteredModel
from daemon.gateway.session import serve_gateway
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, Message, estimated_prompt_tokens
from daemon.store import Store
from daemon.tasks import Task
from tests.providers.fake_llm_apis import Reply, openai_completion, openai_error, serve

pytestmark = [pytest.mark.anyio, pytest.mark.unit]

GUEST = Path(__file__).resolve().parents[2] / "sandbox" / "guest" / "harnessd_guest.py"
TASK = Task(id="t1", suite="test", kind="answer", prompt=[Message(role="user", content="Go.")])
CYCLE = """
mode = "sequence"
after_last = "cycle"
[[replies]]
content = "one"
usage = { prompt_tokens = 150, completion_tokens = 40 }
[[replies]]
content = "two"
usage = { prompt_tokens = 260, completion_tokens = 75 }
"""


@pytest.fixture(scope="module")
def guest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harnessd_guest_under_test", GUEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def socket_path() -> Iterator[Path]:
    # Unix socket paths are short (107 bytes); pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="hd-meter-", dir="/tmp") as folder:
        yield Path(folder) / "gw.sock"


def _hi_request() -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=300)


def _settings(tmp_path: Path, **kw: Any) -> LoadedSettings:
    settings = Settings(state_dir=tmp_path / "state", **kw)
    return LoadedSettings(settings=settings, config_path=None, base_dir=tmp_path)


def _model(tmp_path: Path, store: Store, guard: BudgetGuard) -> tuple[MeteredModel, Charge]:
    write_script(tmp_path, CYCLE)
    provider = make_provider("scripted:replies.toml", _settings(tmp_path), RetryPolicy())
    model = MeteredModel(provider, store, guard)
    return model, Charge(provider.ref, "solve", run_id="run-1", task_id="t1")


def _harness(guest: ModuleType, path: Path, calls: int | None) -> dict[str, Any]:
    """A guest that chats ``calls`` times (None: until refused), claims usage, submits."""
    gateway = guest.Gateway.connect(str(path))
    try:
        hello = gateway.request("hello", {})
        seal = guest.harnessd_seal.make_sealer(bytes.fromhex(hello["key"]))
        model = guest.Model(gateway)
        seen: list[dict[str, Any]] = []
        refused = None
        while calls is None or len(seen) < calls:
            try:
                seen.append(model.chat([{"role": "user", "content": "more"}], max_tokens=100))
            except guest.BudgetExhausted as exc:
                refused = exc.message
                break
        lie = {"usage_claimed": {"prompt_tokens": 1, "completion_tokens": 1}}
        payload, mac = seal({"output": lie, "claimed_success": True})
        gateway.request("submit", {"payload": payload, "mac": mac})
        return {"replies": seen, "refused": refused}
    finally:
        gateway._sock.close()


async def test_token_totals_are_what_the_provider_returned(
    tmp_path: Path,
    store: Store,
    policies: Policies,
    clock: Clock,
    guest: ModuleType,
    socket_path: Path,
) -> None:
    model, charge = _model(tmp_path, store, BudgetGuard(store, policies, clock=clock))
    async with serve_gateway(socket_path, TASK, SolveHandler(model, charge)) as record:
        seen = await anyio.to_thread.run_sync(_harness, guest, socket_path, 5)
    usage = [r["usage"] for r in seen["replies"]]
    spent = ledger.spent_by_task(store, "run-1", "t1")
    assert spent.prompt_tokens == sum(u["prompt_tokens"] for u in usage) == 3 * 150 + 2 * 260
    assert spent.completion_tokens == sum(u["completion_tokens"] for u in usage) == 3 * 40 + 2 * 75
    assert record.model_calls == 5 and record.submission is not None


async def test_an_endless_loop_ends_with_budget_within_one_call(
    tmp_path: Path,
    store: Store,
    policies: Policies,
    clock: Clock,
    guest: ModuleType,
    socket_path: Path,
) -> None:
    budget = 2000
    policies.set(tokens_per_task=budget)
    model, charge = _model(tmp_path, store, BudgetGuard(store, policies, clock=clock))
    async with serve_gateway(socket_path, TASK, SolveHandler(model, charge)) as record:
        seen = await anyio.to_thread.run_sync(_harness, guest, socket_path, None)
    assert seen["refused"] and "'task'" in seen["refused"]
    assert record.budget_refused
    spent = ledger.spent_by_task(store, "run-1", "t1").total
    # At most the budget plus one call's prompt (its completion was capped to what was left).
    assert budget <= spent <= budget + 260


async def test_a_provider_error_reaching_the_container_carries_no_key(
    tmp_path: Path,
    store: Store,
    policies: Policies,
    clock: Clock,
    guest: ModuleType,
    socket_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-live-0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c"
    monkeypatch.setenv("HD_METER_TEST_KEY", key)
    echo = openai_error(
        401, "invalid_request_error", f"Incorrect API key: {key}", "invalid_api_key"
    )
    with serve([echo]) as api:
        openai = OpenAISettings(api_key_env="HD_METER_TEST_KEY", base_url=api.url + "/v1")
        provider = make_provider("openai:gpt-x", _settings(tmp_path, openai=openai), RetryPolicy())
        model = MeteredModel(provider, store, BudgetGuard(store, policies, clock=clock))
        charge = Charge(provider.ref, "solve", run_id="run-1", task_id="t1")

        def harness() -> str:
            gateway = guest.Gateway.connect(str(socket_path))
            try:
                gateway.request("hello", {})
                try:
                    guest.Model(gateway).chat([{"role": "user", "content": "hi"}])
                except guest.ModelError as exc:
                    return str(exc)
                return "no error"
            finally:
                gateway._sock.close()

        try:
            async with serve_gateway(socket_path, TASK, SolveHandler(model, charge)) as record:
                seen_by_guest = await anyio.to_thread.run_sync(harness)
        finally:
            await provider.aclose()
    assert seen_by_guest.startswith("provider:") and "401" in seen_by_guest
    assert "HD_METER_TEST_KEY" in seen_by_guest  # says where the key came from...
    assert key not in seen_by_guest  # ...never what it is
    assert key not in json.dumps(record.transcript)
    assert secrets.redact(key) == secrets.REDACTED


async def test_a_huge_prompt_is_refused_before_it_is_sent(
    tmp_path: Path,
    store: Store,
    policies: Policies,
    clock: Clock,
    guest: ModuleType,
    socket_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 0.9 MB prompt against a 4,000-token task budget never reaches the provider (it
    was once sent and charged 225,004 tokens)."""
    monkeypatch.setenv("HD_METER_TEST_KEY", "sk-test")
    policies.set(tokens_per_task=4000)
    reply = openai_completion(content="ok", prompt_tokens=225_000, completion_tokens=4)
    with serve([Reply(200, reply)]) as api:
        openai = OpenAISettings(api_key_env="HD_METER_TEST_KEY", base_url=api.url + "/v1")
        provider = make_provider("openai:gpt-x", _settings(tmp_path, openai=openai), RetryPolicy())
        model = MeteredModel(provider, store, BudgetGuard(store, policies, clock=clock))
        charge = Charge(provider.ref, "solve", run_id="run-1", task_id="t1")

        def harness() -> str:
            gateway = guest.Gateway.connect(str(socket_path))
            try:
                gateway.request("hello", {})
                try:
                    guest.Model(gateway).chat([{"role": "user", "content": "x" * 900_000}])
                except guest.BudgetExhausted as exc:
                    return exc.message
                return "sent"
            finally:
                gateway._sock.close()

        try:
            async with serve_gateway(socket_path, TASK, SolveHandler(model, charge)) as record:
                seen = await anyio.to_thread.run_sync(harness)
        finally:
            await provider.aclose()
    assert "'task'" in seen and record.budget_refused
    assert api.received == []
    assert ledger.spent_by_task(store, "run-1", "t1").total == 0


async def test_a_call_abandoned_when_its_harness_exits_is_charged(
    tmp_path: Path,
    store: Store,
    policies: Policies,
    clock: Clock,
    guest: ModuleType,
    socket_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The provider bills a request it has started even when nobody waits for the answer:
    the reservation (prompt estimate + max_tokens) is charged, marked as an estimate."""
    monkeypatch.setenv("HD_METER_TEST_KEY", "sk-test")
    slow = Reply(
        200, openai_completion(content="late", prompt_tokens=9, completion_tokens=9), delay_s=30
    )
    with serve([slow]) as api:
        openai = OpenAISettings(api_key_env="HD_METER_TEST_KEY", base_url=api.url + "/v1")
        provider = make_provider("openai:gpt-x", _settings(tmp_path, openai=openai), RetryPolicy())
        model = MeteredModel(provider, store, BudgetGuard(store, policies, clock=clock))
        charge = Charge(provider.ref, "solve", run_id="run-1", task_id="t1")
        gateway = None

        def harness() -> None:
            nonlocal gateway
            gateway = guest.Gateway.connect(str(socket_path))
            gateway.request("hello", {})
            with contextlib.suppress(guest.GatewayError):
                guest.Model(gateway).chat([{"role": "user", "content": "hi"}], max_tokens=300)

        try:
            async with anyio.create_task_group() as tg:
                async with serve_gateway(socket_path, TASK, SolveHandler(model, charge)):
                    tg.start_soon(anyio.to_thread.run_sync, harness)
                    with anyio.fail_after(20):
                        while not api.received:  # noqa: ASYNC110 - the fake API is a thread
                            await anyio.sleep(0.02)
                # The run is over (as when its container exits): the call is abandoned.
                assert gateway is not None
                gateway._sock.close()
        finally:
            await provider.aclose()
    rows = store.query("SELECT prompt_tokens, completion_tokens, estimated FROM ledger")
    assert [tuple(r) for r in rows] == [(estimated_prompt_tokens(_hi_request()), 300, 1)]
