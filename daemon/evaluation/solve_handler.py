"""The gateway's view of one task run (:class:`SolveHandler`): the model calls, metered to
the task and kept for the provenance check; tool calls and turn ends, served by the task's
trusted environment and kept too; the decoy's word swap. Moved out of the evaluator, which
runs tasks; this serves one of them."""

from __future__ import annotations

import json
from typing import Any

from daemon.errors import ProviderUnavailable
from daemon.evaluation.decoy import decoy_reply, decoy_request
from daemon.evaluation.provenance import EnvironmentText, Exchange
from daemon.gateway.ledger import Charge
from daemon.gateway.metering import MeteredModel
from daemon.gateway.session import NoSuchTool, ToolCallError
from daemon.providers.base import ChatRequest, ChatResponse
from daemon.suites.base import EnvironmentFailed, Episode


class SolveHandler:
    """The gateway's view of one task run: every model call metered to this task, and kept
    (the harness's request, the model's reply) for the provenance check; tool calls and turn
    ends sent to the task's trusted environment (when its suite has one). With ``decoy``, the
    task's own words in each request are swapped for the decoy task's before the model sees
    them; the exchange keeps the harness's request."""

    def __init__(
        self,
        model: MeteredModel,
        charge: Charge,
        decoy: list[tuple[str, str]] | None = None,
        episode: Episode | None = None,
    ) -> None:
        self._model = model
        self._charge = charge
        self._decoy = decoy
        self._episode = episode
        self.exchanges: list[Exchange] = []
        # What the trusted environment said (tool results, later turns), in order, with the
        # calls that got a result: the provenance check of tool-use tasks reads them.
        self.environment: list[EnvironmentText] = []
        # The first "provider down" a call of this run met: the run's result is void.
        self.outage: ProviderUnavailable | None = None

    async def chat(self, request: ChatRequest) -> ChatResponse:
        sent = request if self._decoy is None else decoy_request(request, self._decoy)
        try:
            response = await self._model.chat(sent, self._charge)
        except ProviderUnavailable as exc:
            self.outage = self.outage or exc
            raise
        if self._decoy is not None and sent != request:
            # What the harness could compare with its own request (a repeated question,
            # the prompt's size) looks as it would without the decoy.
            shift = await self._model.prompt_tokens(request) - await self._model.prompt_tokens(sent)
            response = decoy_reply(response, self._decoy, shift)
        self.exchanges.append((request, response))
        return response

    async def tool_call(self, name: str, arguments: dict[str, Any]) -> Any:
        if self._episode is None:  # BFCL single-turn, HumanEval: no host-side tools
            raise NoSuchTool(name)
        try:
            result = await self._episode.tool_call(name, arguments)
        except EnvironmentFailed as exc:  # the run cannot pass now; the harness hears why
            raise ToolCallError(str(exc)) from None
        self._heard(result, (name, dict(arguments)))
        return result

    async def next_turn(self) -> dict[str, Any]:
        if self._episode is None:
            return {"done": True}  # a single-turn task is done when its one turn is
        try:
            turn = await self._episode.next_turn()
        except EnvironmentFailed as exc:
            raise ToolCallError(str(exc)) from None
        self._heard(turn, None)
        return turn

    def _heard(self, said: Any, call: tuple[str, dict[str, Any]] | None) -> None:
        text = json.dumps(said, default=str, ensure_ascii=False)
        self.environment.append(EnvironmentText(text, len(self.exchanges), call))

    async def tokens_left(self) -> int:
        return await self._model.tokens_left(self._charge)

    async def restart(self) -> None:
        # The lost run's model calls stay charged to the task (they were spent); its tool
        # calls and turns must not count for the run that is judged.
        if self._episode is not None:
            await self._episode.restart()
        self.environment.clear()
