"""The component move through the real loop cycle, sandbox, verifier and gates.

The world (real BFCL tasks as the daemon evaluates them, copies and generated tasks
included): a scripted solver model answers the even positions of each split with the right
call, and the odd ones with one call made twice: the right call where the world makes the
component help, a wrong one (another value) where it does not. The seed returns both calls,
so the odd positions fail either way: 50 %.

The proposer is a scripted model that, asked for a component, names ``unique_calls`` (drop
exact repeats) or ``one_call_per_reply`` (ask the model for one call a reply; the scripted
model then writes its first). The daemon offers them because failed dev tasks show
repeated calls; where the repeats were of the right call, the candidate solves every task
and is promoted; where they were wrong, it changes what dev sees but solves nothing more,
and held-out rejects it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.improve import briefing, loop
from daemon.improve.loop import ImprovementLoop, LoopControl
from daemon.improve.proposer import components, moves
from daemon.lineage import Lineage
from tests.improve.pipeline_world import SEED
from tests.improve.scripted_world import evaluated, toml_value

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SUITE, SPLIT_SEED = "bfcl:simple", "component"
DEV, HELDOUT = 4, 24


def _wrong(call: dict[str, Any]) -> dict[str, Any]:
    """``call`` with its first argument's value changed (so the checker refuses it)."""
    arguments = dict(call["arguments"])
    name = next(iter(arguments))
    value = arguments[name]
    if isinstance(value, bool):
        arguments[name] = not value
    elif isinstance(value, int | float):
        arguments[name] = value + 7
    else:
        arguments[name] = f"{value} (not this)"
    return {"name": call["name"], "arguments": arguments}


def _world(
    cache: Path, tmp: Path, helps: bool, component: str = "unique_calls"
) -> tuple[Path, Path]:
    suite, splits = evaluated(cache, SUITE, SPLIT_SEED, DEV, HELDOUT)
    lines = ['mode = "rules"', ""]
    for ids in (splits.dev, splits.heldout):
        for pos, task_id in enumerate(ids):
            question = [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1]
            (call,) = [
                {"name": c["name"], "arguments": c["arguments"]}
                for c in suite.reference_output(task_id)
            ]
            reply = [call] if pos % 2 == 0 else [call, call] if helps else [_wrong(call)] * 2
            lines += ["[[rules]]", f"match = {json.dumps('^' + re.escape(question or '') + '$')}"]
            lines += [f"tool_calls = {toml_value(reply)}", ""]
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    solver = tmp / "solver.toml"
    solver.write_text("\n".join(lines))
    chosen = json.dumps({"component": component, "rationale": "the model repeats calls"})
    proposer = tmp / "proposer.toml"
    proposer.write_text(
        f'mode = "rules"\n\n[[rules]]\nsystem = "adding ONE of the daemon\'s components"\n'
        f"content = {json.dumps(chosen)}\n\n"
        '[[rules]]\ncontent = "{}"\n'
    )
    return solver, proposer


def _policy(solver: Path, proposer: Path) -> str:
    return f"""
[models]
primary = "scripted:{solver}"
panel = []

[proposer]
model = "scripted:{proposer}"
protocol = "operations"
samples = 1
search = "live"
moves = ["component"]

[suite]
name = "{SUITE}"
dev_size = {DEV}
heldout_size = {HELDOUT}
split_seed = "{SPLIT_SEED}"

[sandbox]
wall_s = 60.0
concurrency = 3

[loop]
cycle_pause_s = 0.0
"""


@pytest.mark.timeout(1200)
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("component", "helps"),
    # Where a component does not help, the same path rejects it whichever it is: one such
    # case keeps the suite's time (each case is a whole cycle through the sandbox).
    [("unique_calls", True), ("one_call_per_reply", True), ("one_call_per_reply", False)],
)
async def test_a_component_is_promoted_where_it_removes_failures_and_only_there(
    runtime_factory: Any,
    tmp_path: Path,
    asset_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    component: str,
    helps: bool,
) -> None:
    solver, proposer = _world(asset_cache, tmp_path, helps, component)
    sent: list[str] = []
    asked = loop.proposal_request

    def recording(messages: Any, **kwargs: Any) -> Any:
        if kwargs.get("schema") is not None:
            sent.append("\n".join(m.content or "" for m in messages))
            sent.append(json.dumps(kwargs["schema"]))
        return asked(messages, **kwargs)

    monkeypatch.setattr(loop, "proposal_request", recording)
    async with runtime_factory(_policy(solver, proposer)) as rt:
        policy = rt.policy.get()
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        verdict = await ImprovementLoop(rt, lineage, LoopControl()).cycle()
        cands = lineage.candidates()
        live = lineage.current()
        records = await anyio.to_thread.run_sync(
            lambda: briefing.move_records(lineage, rt.store, model=policy.models.primary)
        )
    assert verdict is not None and len(cands) == 1, cands
    cand = cands[0]
    assert briefing.move_of(cand.raw) == "component"
    assert f"+{components.MARKER}{component}" in cand.patch
    # Offered on evidence: the two odd dev positions repeat a call (and make two where one
    # is wanted), shown with their counts; nothing else was offered.
    schema = json.loads(sent[1])
    assert schema["properties"]["component"]["enum"] == [
        "unique_calls",
        "first_call_only",
        "one_call_per_reply",
    ]
    assert "unique_calls: drop exact repeats" in sent[0] and "showing it: 2" in sent[0]
    if helps:
        assert verdict.decision == "accept", verdict
        assert live.name == "v0002"
        assert records["component"] == moves.Record(wins=1, losses=0)
    else:
        assert verdict.decision == "reject" and verdict.stage == "heldout", verdict
        assert "accuracy" in verdict.failed, verdict
        assert live.name == "v0001"
        assert records["component"].wins == 0


@pytest.mark.timeout(1200)
@pytest.mark.anyio
async def test_samples_of_a_component_move_stop_when_every_offered_one_is_proposed(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    """Three components have evidence; six samples ask for them: three candidates, no
    duplicate stopped at the static stage (the enum shrinks as they are proposed)."""
    solver, _ = _world(asset_cache, tmp_path, True)
    proposer = tmp_path / "first_offered.toml"
    # Whatever is offered, the first: "unique_calls", "first_call_only", "one_call_per_reply".
    replies = [json.dumps({"component": k, "rationale": "r"}) for k in components.BY_KEY]
    proposer.write_text(
        'mode = "sequence"\nafter_last = "repeat_last"\n\n'
        f"[[replies]]\ncontent = {json.dumps(replies[0])}\n\n"
        f"[[replies]]\ncontent = {json.dumps(replies[3])}\n\n"
        f"[[replies]]\ncontent = {json.dumps(replies[4])}\n"
    )
    policy = _policy(solver, proposer).replace("samples = 1", "samples = 6\ndev_pool = 3")
    async with runtime_factory(policy) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        await ImprovementLoop(rt, lineage, LoopControl()).cycle()
        cands = lineage.candidates()
    assert sorted(c.id for c in cands) == [1, 2, 3], cands
    assert all(c.duplicate_of is None for c in cands), cands
