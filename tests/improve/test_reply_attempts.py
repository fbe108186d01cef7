"""A small proposer's reply that the static stage would stop is drawn again before it becomes
a proposal: the loop's real ``sample`` (model call, edit protocol, static checks, lineage
record, ledger attribution) with a scripted proposer in sequence mode. No sandbox runs:
nothing here is evaluated.

A line of code that does not compile is discarded (an event says why) and the next reply is
the candidate; every reply's tokens are charged to that candidate. When every attempt fails,
the last is recorded at static with its reason, as before. Free-text replies (capable
models) are recorded as they come."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from daemon.config.policy import load_policy
from daemon.config.reload import PolicyHolder
from daemon.config.settings import load_settings
from daemon.evaluation.coverage import read_sources
from daemon.evaluation.runtime import Runtime
from daemon.events import EventBus, recent_events
from daemon.gateway.ledger import Charge
from daemon.improve import loop
from daemon.improve.loop import Ask, ImprovementLoop, LoopControl
from daemon.improve.proposer import moves
from daemon.lineage import Lineage
from daemon.patches.targets import find_targets
from daemon.providers.base import ChatRequest, Message
from daemon.store import Store

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "seeds" / "minimal"

BROKEN = json.dumps(
    {"edit": {"op": "insert", "before": "harness.py:78", "code": "x = 07"}, "rationale": "a"}
)
FORGED = json.dumps(
    {
        "edit": {"op": "set", "name": "INSTRUCTIONS", "value": "Worked examples: Q a"},
        "rationale": "b",
    }
)
GOOD = json.dumps(
    {"edit": {"op": "set", "name": "MAX_STEPS", "value": 2}, "rationale": "fewer steps"}
)


def _proposer(tmp: Path, replies: list[str]) -> Path:
    path = tmp / "proposer.toml"
    body = "".join(f"\n[[replies]]\ncontent = {json.dumps(r)}\n" for r in replies)
    path.write_text(f'mode = "sequence"\nafter_last = "error"\n{body}')
    return path


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[object]:
    """``await make(replies)``: the loop, its lineage (the seed live) and an Ask of the
    operations protocol answered by ``replies`` in turn."""
    (tmp_path / "state").mkdir(mode=0o700)
    config = tmp_path / "harnessd.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\ncache_dir = "{tmp_path / "cache"}"\n')
    store = Store(tmp_path / "state" / "state.db")

    async def factory(replies: list[str]) -> tuple[ImprovementLoop, Lineage, Ask]:
        proposer = _proposer(tmp_path, replies)
        path = tmp_path / "policy.toml"
        path.write_text(
            f'[models]\nprimary = "scripted:{proposer}"\npanel = []\n\n'
            f'[proposer]\nmodel = "scripted:{proposer}"\nprotocol = "operations"\n'
        )
        holder = PolicyHolder(path, load_policy(path))
        # No engine: nothing is evaluated.
        rt = Runtime(
            load_settings(config),
            holder,
            store,
            None,  # type: ignore[arg-type]
            "unused",
            "attempts-test",
            EventBus(store).emit,
        )
        lineage = Lineage(store, tmp_path / "harnesses")
        seed = lineage.init_seed(SEED)
        sources = read_sources(lineage.path(seed))
        model = await rt.model(f"scripted:{proposer}")
        ask = Ask(
            rt.snapshot(),
            seed,
            model,
            [Message(role="user", content="propose one edit")],
            sources,
            find_targets(sources),
        )
        return ImprovementLoop(rt, lineage, LoopControl()), lineage, ask

    yield factory
    store.close()


def _discarded(store: Store) -> list[str]:
    return [e["message"] for e in recent_events(store, 100) if e["kind"] == "proposal.discarded"]


@pytest.mark.anyio
async def test_a_reply_that_does_not_compile_is_drawn_again(make: object) -> None:
    the_loop, lineage, ask = await make([BROKEN, FORGED, GOOD])  # type: ignore[operator]
    submitted = await the_loop.sample(ask)
    assert submitted is not None and submitted.accepted_for_evaluation, submitted
    (cand,) = lineage.candidates()
    assert "MAX_STEPS = 2" in cand.patch and cand.raw == GOOD
    messages = _discarded(the_loop.rt.store)
    assert len(messages) == 2, messages
    assert "reply 1 of at most 3" in messages[0] and "line 78" in messages[0], messages
    assert "Worked examples:" in messages[1], messages
    # The three replies' tokens are the candidate's proposal cost.
    rows = the_loop.rt.store.query(
        "SELECT COUNT(*) AS n, COUNT(DISTINCT candidate_id) AS c FROM ledger "
        "WHERE purpose = 'propose'"
    )
    assert (rows[0]["n"], rows[0]["c"]) == (3, 1)


@pytest.mark.anyio
async def test_when_every_attempt_fails_the_last_is_recorded_at_static(make: object) -> None:
    the_loop, lineage, ask = await make([BROKEN] * loop.REPLY_ATTEMPTS)  # type: ignore[operator]
    submitted = await the_loop.sample(ask)
    assert submitted is not None and not submitted.accepted_for_evaluation
    (cand,) = lineage.candidates()
    assert cand.state == "rejected" and cand.verdict is not None
    assert cand.verdict.stage == "static" and "line 78" in cand.verdict.reason, cand.verdict
    assert len(_discarded(the_loop.rt.store)) == loop.REPLY_ATTEMPTS - 1


@pytest.mark.anyio
async def test_free_text_replies_are_recorded_as_they_come(make: object) -> None:
    the_loop, lineage, ask = await make(["no patch here", GOOD])  # type: ignore[operator]
    submitted = await the_loop.sample(Ask(**{**ask.__dict__, "targets": None}))
    assert submitted is not None and not submitted.accepted_for_evaluation
    (cand,) = lineage.candidates()
    assert cand.raw == "no patch here" and not _discarded(the_loop.rt.store)


@pytest.mark.anyio
async def test_a_reply_that_repeats_a_program_tried_before_is_drawn_again(make: object) -> None:
    other = json.dumps({"edit": {"op": "set", "name": "MAX_STEPS", "value": 3}, "rationale": "c"})
    the_loop, lineage, ask = await make([GOOD, GOOD, other])  # type: ignore[operator]
    first = await the_loop.sample(ask)
    assert first is not None and first.accepted_for_evaluation, first
    second = await the_loop.sample(ask)
    assert second is not None and second.accepted_for_evaluation, second
    newest = lineage.candidates()[0]
    assert "MAX_STEPS = 3" in newest.patch and newest.raw == other
    (message,) = _discarded(the_loop.rt.store)
    assert f"duplicate of c{first.candidate_id}" in message, message


class _Spy:
    """The scripted proposer, with the reply schema of every request it was sent."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.schemas: list[dict[str, Any] | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    async def chat(self, request: ChatRequest, charge: Charge) -> Any:
        self.schemas.append(request.response_schema)
        return await self.model.chat(request, charge)


def _inserts(schema: dict[str, Any] | None) -> list[str]:
    assert schema is not None
    (branch,) = [
        b
        for b in schema["properties"]["edit"]["anyOf"]
        if b["properties"]["op"]["const"] == "insert"
    ]
    return list(branch["properties"]["before"]["enum"])


INSERT = json.dumps(
    {"edit": {"op": "insert", "before": "harness.py:78", "code": "x = 7"}, "rationale": "d"}
)
STEPS_3 = json.dumps({"edit": {"op": "set", "name": "MAX_STEPS", "value": 3}, "rationale": "c"})


async def _spied(make: Any, replies: list[str]) -> tuple[ImprovementLoop, Lineage, Ask, _Spy]:
    """``make``'s loop, lineage and Ask, its proposer wrapped in a :class:`_Spy`."""
    the_loop, lineage, ask = await make(replies)
    spy = _Spy(ask.model)
    return the_loop, lineage, replace(ask, model=spy), spy


@pytest.mark.anyio
async def test_a_repeated_line_is_left_out_of_the_next_draws_of_the_cycle(make: object) -> None:
    the_loop, lineage, ask, spy = await _spied(make, [INSERT, INSERT, GOOD, STEPS_3])
    first = await the_loop.sample(ask)
    assert first is not None and first.accepted_for_evaluation, first
    # The same insert again: a duplicate, so the next draw's grammar has no insert before
    # line 78; the reply drawn under it is the candidate.
    second = await the_loop.sample(ask)
    assert second is not None and second.accepted_for_evaluation, second
    assert "MAX_STEPS = 2" in lineage.candidates()[0].patch
    assert "harness.py:78" in _inserts(spy.schemas[1])
    assert "harness.py:78" not in _inserts(spy.schemas[2])
    (message,) = _discarded(the_loop.rt.store)
    assert f"duplicate of c{first.candidate_id}" in message, message
    assert "insert harness.py:78 left out of the next draws" in message, message
    (event,) = [
        e for e in recent_events(the_loop.rt.store, 100) if e["kind"] == "proposal.discarded"
    ]
    assert event["data"]["closed"] == ["insert", "harness.py:78"], event
    # The prompt's next sample starts without it: no draw is spent on it again.
    third = await the_loop.sample(ask)
    assert third is not None and third.accepted_for_evaluation, third
    assert "harness.py:78" not in _inserts(spy.schemas[3])
    # Other lines stay open.
    assert "harness.py:26" in _inserts(spy.schemas[3])


@pytest.mark.anyio
async def test_a_duplicate_with_nothing_left_to_draw_is_recorded_with_its_reason(
    make: object,
) -> None:
    demo = json.dumps({"demonstrate": ["simple_1"], "rationale": "e"})
    # A third reply would be drawn only if the closed choice were drawn again: the script
    # errors after its last reply.
    the_loop, lineage, ask = await make([demo, demo])  # type: ignore[operator]
    prompt = moves.prompt_constant(ask.targets)
    assert prompt is not None
    offer = moves.Offer("demonstrate", prompt, (moves.Demo("simple_1", "What is 2 + 3?", "5"),))
    spy = _Spy(ask.model)
    ask = replace(ask, model=spy, offer=offer)
    first = await the_loop.sample(ask)
    assert first is not None and first.accepted_for_evaluation, first
    second = await the_loop.sample(ask)
    # Not hidden: the repeat is a candidate stopped at static that names the earlier one,
    # after one draw (its only offered task is closed, so there is nothing else to draw).
    assert second is not None and not second.accepted_for_evaluation
    newest = lineage.candidates()[0]
    assert newest.verdict is not None and newest.verdict.stage == "static"
    assert f"duplicate of c{first.candidate_id}" in newest.verdict.reason, newest.verdict
    assert len(spy.schemas) == 2 and not _discarded(the_loop.rt.store)
    # The prompt is asked no more: every choice of its move repeated a program, and an
    # event says so.
    assert await the_loop.sample(ask) is None
    assert len(spy.schemas) == 2 and len(lineage.candidates()) == 2
    (event,) = [
        e for e in recent_events(the_loop.rt.store, 100) if e["kind"] == "proposal.exhausted"
    ]
    assert event["data"]["closed"] == [["demonstrate", "simple_1"]], event


@pytest.mark.anyio
async def test_only_a_repeated_program_closes_a_choice(make: object) -> None:
    """A line that does not compile is drawn again on the same choices; a number's tried
    value is left out value by value, never the whole constant."""
    the_loop, _, ask, spy = await _spied(make, [BROKEN, GOOD, GOOD, STEPS_3])
    first = await the_loop.sample(ask)
    assert first is not None and first.accepted_for_evaluation, first
    assert "harness.py:78" in _inserts(spy.schemas[1]) and not ask.closed
    second = await the_loop.sample(ask)
    assert second is not None and second.accepted_for_evaluation, second
    assert not ask.closed
    assert _steps(spy.schemas[2]) == _steps(spy.schemas[3]) and 2 not in _steps(spy.schemas[3])
    assert 3 in _steps(spy.schemas[3])


def _steps(schema: dict[str, Any] | None) -> list[Any]:
    assert schema is not None
    (branch,) = [
        b
        for b in schema["properties"]["edit"]["anyOf"]
        if b["properties"].get("name", {}).get("const") == "MAX_STEPS"
    ]
    return list(branch["properties"]["value"]["enum"])
