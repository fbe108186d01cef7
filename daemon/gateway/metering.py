"""Metered model calls: the budget check, the provider call, and the ledger row, in that order.

This is the one path by which harness, proposer and judge calls reach a model. The ledger
row is made from the usage in the provider's response; nothing a harness reports about
its own usage is read here, so a harness cannot under-report what it spent. A call
cancelled before its response (its task ended, the daemon stops) is charged what its
provider counted until then where the provider counts its own work as it goes (the local
model, :class:`~daemon.providers.base.CallMeter`), else its reservation, as an estimate.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import anyio
import anyio.to_thread

from daemon.errors import BudgetExceeded
from daemon.gateway import ledger
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.providers.base import (
    CallMeter,
    Capabilities,
    ChatRequest,
    ChatResponse,
    Provider,
    Usage,
    metered_call,
)
from daemon.store import Store

# Told of every answered call: who paid for it and the provider's own seconds for it.
CallObserver = Callable[[Charge, float], None]


class MeteredModel:
    """A provider behind the budget guard and the ledger. Safe for many concurrent tasks."""

    def __init__(
        self,
        provider: Provider,
        store: Store,
        guard: BudgetGuard,
        observe: CallObserver | None = None,
    ) -> None:
        self._provider = provider
        self._store = store
        self._guard = guard
        self._observe = observe
        # The meters of the calls under way (for ``status``: what the daemon waits on).
        self._under_way: dict[int, CallMeter] = {}

    @property
    def ref(self) -> str:
        return self._provider.ref

    @property
    def capabilities(self) -> Capabilities:
        return self._provider.capabilities

    async def prompt_tokens(self, request: ChatRequest) -> int:
        """The provider's count (or estimate) of ``request``'s prompt; nothing is charged."""
        return await self._provider.prompt_tokens(request)

    async def chat(self, request: ChatRequest, charge: Charge) -> ChatResponse:
        """Answer ``request`` charged to ``charge``; raises BudgetExceeded or ProviderError."""
        if charge.model != self._provider.ref:
            raise ValueError(
                f"charge names model {charge.model!r} but this provider is {self._provider.ref!r}"
            )
        prompt = await self._provider.prompt_tokens(request)
        grant = await anyio.to_thread.run_sync(
            self._guard.reserve, charge, request.max_tokens, prompt
        )
        try:
            if grant.max_tokens < request.max_tokens:
                request = request.model_copy(update={"max_tokens": grant.max_tokens})
            with metered_call() as meter:
                self._under_way[id(meter)] = meter
                began = time.monotonic()
                try:
                    response = await self._provider.chat(request)
                    if self._observe is not None:
                        self._observe(charge, time.monotonic() - began)
                except anyio.get_cancelled_exc_class():
                    # Abandoned (its task ended, the daemon stops): the provider has started
                    # and bills it. Charged what it counted, if it counts as it goes; else
                    # the reservation, marked as an estimate.
                    with anyio.CancelScope(shield=True):
                        if meter.counted:
                            await self._record(charge, meter.usage(), estimated=False)
                        else:
                            reserved = Usage(
                                prompt_tokens=prompt, completion_tokens=grant.max_tokens
                            )
                            await self._record(charge, reserved, estimated=True)
                    raise
                except BaseException:
                    # Failed: what a counting provider spent before failing is still spent.
                    if meter.counted and meter.usage().total:
                        with anyio.CancelScope(shield=True):
                            await self._record(charge, meter.usage(), estimated=False)
                    raise
                finally:
                    del self._under_way[id(meter)]
            # Shielded: tokens the provider spent are charged even if the caller is cancelled.
            with anyio.CancelScope(shield=True):
                await self._record(charge, response.usage, estimated=False)
        finally:
            # After the ledger row exists, so the guard never sees the call as unspent.
            self._guard.release(grant)
        if not request.parallel_tool_calls and len(response.tool_calls) > 1:
            # One call was asked for: kept here for every provider, since a server may ignore
            # the parameter (llama-cpp-python's does). The tokens of the rest were spent.
            response = response.model_copy(update={"tool_calls": response.tool_calls[:1]})
        return response

    async def _record(self, charge: Charge, usage: Usage, *, estimated: bool) -> None:
        await anyio.to_thread.run_sync(
            functools.partial(
                ledger.record, self._store, charge, usage, ts=self._guard.now(), estimated=estimated
            )
        )

    def under_way(self) -> tuple[int, int]:
        """``(calls, tokens spent so far)`` of the calls under way (the provider's own
        count, where it keeps one: the local model's prompt tokens read, tokens written)."""
        meters = list(self._under_way.values())
        return len(meters), sum(m.usage().total for m in meters)

    async def probe(self) -> None:
        """Return when the provider answers at all; ProviderUnavailable otherwise."""
        await self._provider.probe()

    async def tokens_left(self, charge: Charge) -> int:
        """Completion tokens the next call under ``charge`` may use (0 when a budget is spent)."""
        try:
            return await anyio.to_thread.run_sync(self._guard.allowance, charge)
        except BudgetExceeded:
            return 0
