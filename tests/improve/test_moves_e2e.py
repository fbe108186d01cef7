"""The evidence-carrying moves through the real loop cycle, sandbox, verifier and gates.

The world (real BFCL tasks, the tasks as the daemon evaluates them, held-out copies
included): a scripted solver model answers the even positions of each split with the
right call whatever the harness sends, and the odd ones right only when the harness's
system text shows what ``helps`` matches (worked examples; an instruction to answer with
one function call). The seed sends no system text: 50 %.

The proposer is a scripted model that answers the move it is asked for (its system text
says which): ``demonstrate`` picks two of the dev tasks it is offered, ``instruction``
writes one instruction. Where the system text helps, the candidate solves every task and
is promoted; where the solver ignores it, it is not. What the proposer was sent (prompt
and grammar) holds no held-out task id or question.
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
from daemon.improve.proposer import moves
from daemon.lineage import Lineage
from tests.improve.pipeline_world import SEED
from tests.improve.scripted_world import evaluated, toml_value

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SUITE, SPLIT_SEED = "bfcl:simple", "moves"
DEV, HELDOUT = 4, 24
INSTRUCTION = "Answer every question with exactly one function call."
HELPS = {"demonstrate": re.escape(moves.EXAMPLES_HEADER), "instruction": "exactly one function"}


def _question(suite: Any, task_id: str) -> str:
    return " / ".join(m.content or "" for m in suite.task(task_id).prompt if m.role == "user")


def _world(cache: Path, tmp: Path, helps: str | None) -> tuple[Path, Path]:
    """The solver's and the proposer's scripts (``helps``: the system text that makes the
    odd positions right; None: nothing does)."""
    # The tasks as the daemon evaluates them: held-out ones are counterfactual copies.
    suite, splits = evaluated(cache, SUITE, SPLIT_SEED, DEV, HELDOUT)
    lines = ['mode = "rules"', ""]
    for ids in (splits.dev, splits.heldout):
        for pos, task_id in enumerate(ids):
            if pos % 2 and helps is None:
                continue
            question = [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1]
            calls = [
                {"name": c["name"], "arguments": c["arguments"]}
                for c in suite.reference_output(task_id)
            ]
            lines += ["[[rules]]", f"match = {json.dumps('^' + re.escape(question or '') + '$')}"]
            if pos % 2:
                lines.append(f"system = {json.dumps(helps)}")
            lines += [f"tool_calls = {toml_value(calls)}", ""]
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    solver = tmp / "solver.toml"
    solver.write_text("\n".join(lines))
    # The seed solves the even dev positions: two of them are what demonstrate may pick.
    shown = json.dumps({"demonstrate": list(splits.dev[::2]), "rationale": "show the shape"})
    said = json.dumps({"instruction": INSTRUCTION, "rationale": "the misses made no call"})
    proposer = tmp / "proposer.toml"
    proposer.write_text(
        f'mode = "rules"\n\n[[rules]]\nsystem = "choosing worked examples"\n'
        f"content = {json.dumps(shown)}\n\n"
        f'[[rules]]\nsystem = "improve the instruction"\ncontent = {json.dumps(said)}\n\n'
        '[[rules]]\ncontent = "{}"\n'
    )
    return solver, proposer


def _policy(solver: Path, proposer: Path, move: str) -> str:
    return f"""
[models]
primary = "scripted:{solver}"
panel = []

[proposer]
model = "scripted:{proposer}"
protocol = "operations"
samples = 1
search = "live"
moves = ["{move}"]

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


def _named(task_id: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(task_id)}(?![\w-])", text) is not None


@pytest.mark.timeout(1200)
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("move", "helps"),
    [("demonstrate", True), ("demonstrate", False), ("instruction", True), ("instruction", False)],
)
async def test_a_move_is_promoted_where_its_evidence_helps_and_only_there(
    runtime_factory: Any,
    tmp_path: Path,
    asset_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    move: str,
    helps: bool,
) -> None:
    solver, proposer = _world(asset_cache, tmp_path, HELPS[move] if helps else None)
    sent: list[str] = []
    asked = loop.proposal_request

    def recording(messages: Any, **kwargs: Any) -> Any:
        if kwargs.get("schema") is not None:
            sent.append("\n".join(m.content or "" for m in messages))
            sent.append(json.dumps(kwargs["schema"]))
        return asked(messages, **kwargs)

    monkeypatch.setattr(loop, "proposal_request", recording)
    async with runtime_factory(_policy(solver, proposer, move)) as rt:
        policy = rt.policy.get()
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        verdict = await ImprovementLoop(rt, lineage, LoopControl()).cycle()
        cands = lineage.candidates()
        live = lineage.current()
        suite = await rt.load_suite(policy=policy)
        splits = await rt.load_splits(policy=policy)
        records = await anyio.to_thread.run_sync(
            lambda: briefing.move_records(lineage, rt.store, model=policy.models.primary)
        )
    assert verdict is not None and len(cands) == 1, cands
    cand = cands[0]
    assert briefing.move_of(cand.raw) == move
    if move == "demonstrate":
        assert f"+INSTRUCTIONS = {json.dumps(moves.EXAMPLES_HEADER)[:-1]}" in cand.patch
        assert all(_question(suite, t) in sent[0] for t in splits.dev[::2])
        # Each example's answer is the call the verifier accepted for that dev task.
        for t in splits.dev[::2]:
            call = suite.reference_output(t)[0]
            assert json.dumps({"name": call["name"]})[1:-1] in cand.patch.replace('\\"', '"')
    else:
        assert f"+INSTRUCTIONS = {json.dumps(INSTRUCTION)}" in cand.patch
    if helps:
        assert verdict.decision == "accept", verdict
        assert live.name == "v0002"
        assert records[move] == moves.Record(wins=1, losses=0)
    else:
        # It changes what dev sees (a longer prompt), so only held-out can judge it: no
        # task more solved there, and it is not promoted.
        assert verdict.decision == "reject" and verdict.stage == "heldout", verdict
        assert "accuracy" in verdict.failed, verdict
        assert live.name == "v0001"
        assert records[move].wins == 0
    # The proposer's prompt and grammar: dev evidence only.
    assert len(sent) == 2
    everything = "\n".join(sent)
    leaked = [
        t for t in splits.heldout if _named(t, everything) or _question(suite, t) in everything
    ]
    assert not leaked, leaked
