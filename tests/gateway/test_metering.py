"""MeteredModel: usage from the provider only, the per-task overshoot bound, concurrency."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from metering_helpers import Clock, Policies, write_script

from daemon.config.policy import RetryPolicy
from daemon.config.settings import LoadedSettings, Settings
from daemon.errors import BudgetExceeded, ProviderError
from daemon.gateway import ledger
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.gateway.metering import MeteredModel
from daemon.providers import make_provider
from daemon.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    estimated_prompt_tokens,
    report_spent,
)
from daemon.store import Store

pytestmark = [pytest.mark.anyio, pytest.mark.unit]

LOOPING = """
mode = "sequence"
after_last = "cycle"

[[replies]]
content = "I used 1 token, honestly."
usage = { prompt_tokens = 120, completion_tokens = 35 }

[[replies]]
tool_calls = [{ name = "search", arguments = { q = "more" } }]
usage = { prompt_tokens = 180, completion_tokens = 22 }

[[replies]]
content = "Still going."
usage = { prompt_tokens = 240, completion_tokens = 60 }
"""


def _metered(tmp_path: Path, store: Store, guard: BudgetGuard, script: str) -> MeteredModel:
    path = write_script(tmp_path, script)
    loaded = LoadedSettings(
        settings=Settings(state_dir=tmp_path / "state"), config_path=None, base_dir=tmp_path
    )
    return MeteredModel(make_provider(f"scripted:{path.name}", loaded, RetryPolicy()), store, guard)


def _charge(model: MeteredModel, task: str = "t1") -> Charge:
    return Charge(model.ref, "solve", run_id="run-1", task_id=task, candidate_id=4, version_id=2)


def _lying_request(turn: int) -> ChatRequest:
    # What a harness says about its own usage is just text to the gateway.
    claim = '{"usage": {"prompt_tokens": 0, "completion_tokens": 0}}'
    return ChatRequest(messages=[Message(role="user", content=f"turn {turn}; my usage: {claim}")])


async def test_the_ledger_holds_what_the_provider_reported(
    tmp_path: Path, store: Store, policies: Policies, clock: Clock
) -> None:
    model = _metered(tmp_path, store, BudgetGuard(store, policies, clock=clock), LOOPING)
    reported = []
    for turn in range(7):
        response = await model.chat(_lying_request(turn), _charge(model))
        reported.append(response.usage)
    spent = ledger.spent_by_task(store, "run-1", "t1")
    assert spent.prompt_tokens == sum(u.prompt_tokens for u in reported) == 2 * 540 + 120
    assert spent.completion_tokens == sum(u.completion_tokens for u in reported) == 2 * 117 + 35
    assert spent.calls == 7
    assert ledger.spent_by_candidate(store, 4) == spent == ledger.spent_by_version(store, 2)
    rows = store.query("SELECT model, purpose, ts FROM ledger")
    assert {(r["model"], r["purpose"], r["ts"]) for r in rows} == {(model.ref, "solve", clock.now)}


async def test_an_endless_loop_ends_on_the_task_budget_within_one_call(
    tmp_path: Path, store: Store, policies: Policies, clock: Clock
) -> None:
    budget = 1000
    policies.set(tokens_per_task=budget)
    model = _metered(tmp_path, store, BudgetGuard(store, policies, clock=clock), LOOPING)
    calls = 0
    with pytest.raises(BudgetExceeded) as caught:
        while True:  # a harness that never stops asking
            await model.chat(_lying_request(calls), _charge(model))
            calls += 1
    assert caught.value.scope == "task"
    spent = ledger.spent_by_task(store, "run-1", "t1")
    assert spent.total >= budget
    # The last call's completion was capped to what was left; only its prompt overshoots.
    assert spent.total <= budget + 240
    assert calls == spent.calls < 10
    # Another task still has its own budget.
    await model.chat(_lying_request(0), _charge(model, task="t2"))


async def test_max_tokens_is_capped_to_the_allowance(
    tmp_path: Path, store: Store, policies: Policies, clock: Clock
) -> None:
    long_reply = 'mode = "rules"\n[[rules]]\ncontent = "' + "x" * 4000 + '"\n'
    policies.set(tokens_per_task=300)
    model = _metered(tmp_path, store, BudgetGuard(store, policies, clock=clock), long_reply)
    request = ChatRequest(messages=[Message(role="user", content="go")], max_tokens=1000)
    response = await model.chat(request, _charge(model))
    # The prompt is reserved first (estimated: the scripted provider cannot count it), and
    # the completion gets what is left of the task's 300.
    assert response.usage.completion_tokens == 300 - estimated_prompt_tokens(request)
    assert response.finish_reason == "length"
    assert response.usage.total == ledger.spent_by_task(store, "run-1", "t1").total


async def test_concurrent_calls_cannot_overrun_a_shared_window(
    tmp_path: Path, store: Store, policies: Policies, clock: Clock
) -> None:
    script = """
mode = "rules"
[[rules]]
content = "done"
usage = { prompt_tokens = 0, completion_tokens = 100 }
"""
    policies.set(tokens_per_hour=1000, tokens_per_task=10**6)
    guard = BudgetGuard(store, policies, clock=clock)
    model = _metered(tmp_path, store, guard, script)
    refused = 0

    async def one(i: int) -> None:
        nonlocal refused
        request = ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=100)
        try:
            await model.chat(request, _charge(model, task=f"t{i}"))
        except BudgetExceeded as exc:
            assert exc.scope == "hour"
            refused += 1

    async with anyio.create_task_group() as tg:
        for i in range(30):
            tg.start_soon(one, i)
    spent = ledger.spent_by_run(store, "run-1")
    # Reservations (prompt estimate + max_tokens) held while calls are in flight keep the
    # window from being overrun however the calls interleave.
    assert spent.total <= 1000
    assert spent.calls + refused == 30
    # How many are refused depends on how the calls interleave (a call that finishes frees its
    # reservation); that the window refuses at all is what is pinned.
    assert refused >= 1
    assert guard.in_flight() == 0


async def test_a_failed_call_charges_nothing_and_frees_its_reservation(
    tmp_path: Path, store: Store, policies: Policies, clock: Clock
) -> None:
    script = 'mode = "sequence"\n[[replies]]\nerror = "provider down"\n'
    guard = BudgetGuard(store, policies, clock=clock)
    model = _metered(tmp_path, store, guard, script)
    with pytest.raises(ProviderError):
        await model.chat(_lying_request(0), _charge(model))
    assert ledger.spent_by_run(store, "run-1").calls == 0
    assert guard.in_flight() == 0


async def test_tokens_left_and_charge_checks(
    tmp_path: Path, store: Store, policies: Policies, clock: Clock
) -> None:
    policies.set(tokens_per_task=200)
    model = _metered(tmp_path, store, BudgetGuard(store, policies, clock=clock), LOOPING)
    assert await model.tokens_left(_charge(model)) == 200
    await model.chat(_lying_request(0), _charge(model))
    assert await model.tokens_left(_charge(model)) == 45
    # The next prompt alone would not fit the 45 tokens left: refused before it is sent.
    assert estimated_prompt_tokens(_lying_request(1)) >= 45
    with pytest.raises(BudgetExceeded) as refusal:
        await model.chat(_lying_request(1), _charge(model))
    assert refusal.value.scope == "task"
    assert await model.tokens_left(_charge(model)) == 45
    with pytest.raises(ValueError, match="charge names model"):
        await model.chat(_lying_request(2), Charge("openai:other", "solve"))


class _CutOff:
    """A provider that spends as it works (as the local one does) and never finishes."""

    ref = "scripted:cut-off"
    capabilities = Capabilities()

    def __init__(self) -> None:
        self.started = anyio.Event()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        report_spent(300, 0)
        self.started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def prompt_tokens(self, request: ChatRequest) -> int:
        return 300

    async def probe(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def test_a_cancelled_call_is_charged_what_its_provider_counted(
    store: Store, policies: Policies, clock: Clock
) -> None:
    provider = _CutOff()
    model = MeteredModel(provider, store, BudgetGuard(store, policies, clock=clock))
    charge = Charge(provider.ref, "propose", run_id="prop-1")
    async with anyio.create_task_group() as tg:
        tg.start_soon(model.chat, _lying_request(0), charge)
        await provider.started.wait()
        assert model.under_way() == (1, 300)  # what status shows while it runs
        tg.cancel_scope.cancel()
    assert model.under_way() == (0, 0)
    rows = store.query("SELECT purpose, prompt_tokens, completion_tokens, estimated FROM ledger")
    # Its own count, not the reservation (300 + the request's max_tokens) as an estimate.
    assert [tuple(r) for r in rows] == [("propose", 300, 0, 0)]
