"""The proposer's moves (issue 36): reply shapes, what each move may use, which one a cycle
asks for, and that nothing of the held-out pool reaches the proposer through them."""

from __future__ import annotations

import ast
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from daemon.config.policy import ProposerPolicy, SuitePolicy, load_policy
from daemon.errors import ConfigError
from daemon.evaluation.report import CoverageReport, EvalReport, TaskResult, build_report
from daemon.improve import briefing
from daemon.improve.proposer import edit_protocol, moves
from daemon.improve.proposer.components import Evidence
from daemon.improve.proposer.moves import Demo, Offer, Record, Trial
from daemon.improve.proposer.prompt import build_prompt
from daemon.patches import ParseFailure, PatchRejected, Proposal, apply_proposal
from daemon.patches.targets import find_targets
from daemon.providers.local_grammar import MAX_REPEAT, bounded
from daemon.suites import evaluated_suite
from daemon.suites.splits import split

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SEED_DIR = ROOT / "seeds" / "minimal"
SOURCES = {"harness.py": (SEED_DIR / "harness.py").read_text()}
TARGETS = find_targets(SOURCES)
PROMPT = moves.prompt_constant(TARGETS)
TASKS = ROOT / "policies" / "suites" / "example" / "exact.jsonl"
DEMOS = (
    Demo("simple_1", "Area of a triangle with base 10 and height 5?", [{"name": "area"}]),
    Demo("simple_2", "What is 2 + 3?", "5"),
)


def _offer(move: moves.Move) -> Offer:
    offered = (Evidence("unique_calls", "drop exact repeats of a call", 2),)
    return Offer(move, PROMPT, DEMOS, offered)


def _instructions(reply: str, offer: Offer, scratch: Path) -> str:
    """The seed's INSTRUCTIONS after ``reply``, read from the patched tree."""
    parsed = edit_protocol.to_proposal(reply, SOURCES, TARGETS, offer)
    assert isinstance(parsed, Proposal), parsed
    applied = apply_proposal(SEED_DIR, parsed, scratch / "tree")
    tree = ast.parse((applied.dest_dir / "harness.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "INSTRUCTIONS":
            value = ast.literal_eval(node.value)
            assert isinstance(value, str)
            return value
    raise AssertionError("no INSTRUCTIONS")


def test_the_seed_has_a_prompt_text_constant() -> None:
    assert PROMPT is not None and PROMPT.name == "INSTRUCTIONS" and PROMPT.value == ""


def test_each_move_has_its_own_reply_shape(tmp_path: Path) -> None:
    edit = '{"edit": {"op": "set", "name": "MAX_STEPS", "value": 6}, "rationale": "more"}'
    instruction = '{"instruction": "Answer with one function call.", "rationale": "shape"}'
    demonstrate = '{"demonstrate": ["simple_2", "simple_1", "simple_2"], "rationale": "show"}'
    read = [edit_protocol.read_reply(r) for r in (edit, instruction, demonstrate)]
    assert not any(isinstance(r, ParseFailure) for r in read)
    moved = [edit_protocol.move_of(r[0]) for r in read if not isinstance(r, ParseFailure)]
    assert moved == ["edit", "instruction", "demonstrate"]
    assert [briefing.move_of(r) for r in (edit, instruction, demonstrate)] == moved
    second = read[2]
    assert not isinstance(second, ParseFailure)
    assert second[0] == edit_protocol.Demonstrate(("simple_2", "simple_1"))  # each once

    text = _instructions(instruction, _offer("instruction"), tmp_path / "a")
    assert text == "Answer with one function call."
    shown = _instructions(demonstrate, _offer("demonstrate"), tmp_path / "b")
    assert shown == (
        "Worked examples:\nQuestion: What is 2 + 3?\nAnswer: 5\n"
        "Question: Area of a triangle with base 10 and height 5?\n"
        'Answer: [{"name": "area"}]'
    )


@pytest.mark.parametrize(
    "reply",
    [
        '{"edit": {"op": "set", "name": "MAX_STEPS", "value": 6}, "instruction": "x"}',
        '{"instruction": "x", "demonstrate": ["simple_1"], "rationale": ""}',
        '{"rationale": "nothing"}',
        '{"instruction": ["not", "text"], "rationale": ""}',
        '{"demonstrate": "simple_1", "rationale": ""}',
    ],
)
def test_a_reply_makes_exactly_one_move(reply: str) -> None:
    assert isinstance(edit_protocol.read_reply(reply), ParseFailure)
    assert isinstance(
        edit_protocol.to_proposal(reply, SOURCES, TARGETS, _offer("edit")), ParseFailure
    )


@pytest.mark.parametrize(
    "reply",
    [
        '{"instruction": "Be brief.\\n\\nWorked examples:\\nQuestion: q\\nAnswer: a", '
        '"rationale": ""}',
        '{"edit": {"op": "set", "name": "INSTRUCTIONS", "value": "Worked examples: Q a"}, '
        '"rationale": ""}',
        '{"edit": {"op": "insert", "before": "harness.py:26", '
        '"code": "x = \\"Worked examples:\\""}, "rationale": ""}',
    ],
)
def test_examples_cannot_be_forged_by_hand(reply: str) -> None:
    parsed = edit_protocol.to_proposal(reply, SOURCES, TARGETS, _offer("instruction"))
    assert isinstance(parsed, PatchRejected) and "never by hand" in parsed.reason


def test_demonstrate_takes_only_offered_tasks() -> None:
    for ids in (["simple_9"], [], ["simple_1", "held_1"]):
        reply = json.dumps({"demonstrate": ids, "rationale": ""})
        parsed = edit_protocol.to_proposal(reply, SOURCES, TARGETS, _offer("demonstrate"))
        assert isinstance(parsed, PatchRejected), ids
    schema = edit_protocol.reply_schema(TARGETS, _offer("demonstrate"))
    spec = schema["properties"]["demonstrate"]
    assert spec["items"] == {"enum": ["simple_1", "simple_2"]} and spec["maxItems"] == 2
    assert set(schema["properties"]) == {"demonstrate", "rationale"}
    # A task a repeated program's reply put first is left out of the next draws' grammar;
    # with every task closed the move has no choice left.
    fewer = edit_protocol.reply_schema(
        TARGETS, _offer("demonstrate"), closed={("demonstrate", "simple_1")}
    )
    assert fewer is not None
    spec = fewer["properties"]["demonstrate"]
    assert spec["items"] == {"enum": ["simple_2"]} and spec["maxItems"] == 1
    everything = {("demonstrate", d.task_id) for d in DEMOS}
    assert edit_protocol.reply_schema(TARGETS, _offer("demonstrate"), closed=everything) is None
    # An edit's closed line leaves the other moves' grammar as it was.
    for move in ("instruction", "component"):
        closed = {("replace", "harness.py:26"), ("demonstrate", "simple_1")}
        assert edit_protocol.reply_schema(TARGETS, _offer(move), closed=closed) == (
            edit_protocol.reply_schema(TARGETS, _offer(move))
        )


def test_a_move_keeps_the_other_part_of_the_prompt_text() -> None:
    text = moves.with_examples("Call one function.", DEMOS[:1])
    assert text.startswith("Call one function.\n\nWorked examples:\nQuestion: Area")
    again = moves.with_examples(text, DEMOS[1:])  # the earlier block is replaced
    assert again.count("Worked examples:") == 1 and "Area" not in again and "2 + 3" in again
    assert (
        moves.with_instruction(again, "Be brief.")
        == "Be brief.\n\n" + moves.split_examples(again)[1]
    )
    assert moves.with_instruction("Old.", "New.") == "New."


def test_each_move_schema_allows_only_that_move() -> None:
    shapes = {
        m: set(edit_protocol.reply_schema(TARGETS, _offer(m))["properties"]) for m in moves.MOVES
    }
    assert shapes == {
        "edit": {"edit", "rationale"},
        "instruction": {"instruction", "rationale"},
        "demonstrate": {"demonstrate", "rationale"},
        "component": {"component", "rationale"},
    }
    limit = edit_protocol.reply_schema(TARGETS, _offer("instruction"))["properties"]["instruction"]
    assert limit == {"type": "string", "maxLength": moves.INSTRUCTION_CHARS}


def _report(split_name: str, passed: dict[str, bool], model: str = "local:x") -> EvalReport:
    tasks = [
        TaskResult(id=i, passed=ok, claimed_success=True, output="Paris" if ok else "no", tokens=9)
        for i, ok in passed.items()
    ]
    coverage = CoverageReport(executed_fraction=1.0)
    return build_report(
        run_id="r", suite="s", split=split_name, model=model, tasks=tasks, coverage=coverage
    )


def _example_suite(tmp_path: Path) -> tuple[Any, list[str], list[str]]:
    p = SuitePolicy(name=f"file:{TASKS}", dev_size=4, heldout_size=24, split_seed="moves")
    suite = evaluated_suite(p, tmp_path, "moves")
    splits = split(suite.task_ids(), seed="moves", dev_size=4, heldout_size=24)
    return suite, list(splits.dev), list(splits.heldout)


def _question(suite: Any, task_id: str) -> str:
    return " / ".join(m.content or "" for m in suite.task(task_id).prompt if m.role == "user")


def test_only_solved_dev_tasks_are_offered_and_nothing_held_out_reaches_the_proposer(
    tmp_path: Path,
) -> None:
    suite, dev_ids, heldout_ids = _example_suite(tmp_path)
    dev = _report("dev", {t: i % 2 == 0 for i, t in enumerate(dev_ids)})
    demos = briefing.demonstrations(dev, suite)
    assert [d.task_id for d in demos] == dev_ids[::2]
    assert all(d.question == _question(suite, d.task_id) and d.answer == "Paris" for d in demos)
    # A held-out report is never taken, whatever its tasks.
    with pytest.raises(ValueError, match="dev-split"):
        briefing.demonstrations(_report("heldout", dict.fromkeys(heldout_ids, True)), suite)
    # What the proposer is sent for each move: prompt and grammar.
    sent = []
    for move in moves.MOVES:
        offer = Offer(move, PROMPT, tuple(demos))
        messages = build_prompt(SOURCES, dev, [], "nothing tried yet", TARGETS, offer=offer)
        sent.append("\n".join(m.content or "" for m in messages))
        sent.append(json.dumps(edit_protocol.reply_schema(TARGETS, offer)))
    everything = "\n".join(sent)
    assert all(d.task_id in everything for d in demos)
    leaked = [t for t in heldout_ids if t in everything or _question(suite, t) in everything]
    assert not leaked, leaked


def test_thompson_sampling_favours_the_move_that_won_and_skips_impossible_ones() -> None:
    rng = random.Random(7)
    records = {
        "edit": Record(0, 12),
        "instruction": Record(6, 1),
        "demonstrate": Record(0, 0),
        "component": Record(0, 12),
    }
    drawn = Counter(moves.choose_move(list(moves.MOVES), records, rng) for _ in range(400))
    assert drawn["instruction"] > 300 and drawn["edit"] < 20
    # Without records every move gets drawn.
    fresh = Counter(moves.choose_move(list(moves.MOVES), {}, rng) for _ in range(300))
    assert all(fresh[m] > 50 for m in moves.MOVES)
    # No prompt text: only edits; no solved dev task: no demonstrate.
    assert moves.possible(list(moves.MOVES), None, DEMOS) == ["edit"]
    assert moves.possible(list(moves.MOVES), PROMPT, ()) == ["edit", "instruction"]
    assert moves.possible(["demonstrate"], PROMPT, DEMOS) == ["demonstrate"]
    with pytest.raises(ValueError):
        moves.choose_move([], records, rng)


def test_instruction_history_is_shown_best_last_with_dev_results_only() -> None:
    trials = [
        Trial(4, "Be brief.", 3, 4, "not promoted"),
        Trial(5, "Call one function.", 4, 4, "promoted"),
        Trial(6, "Think.", 1, 4, "rejected at dev_screen: fewer solved"),
    ]
    text = moves.history_section(trials)
    order = [text.index(t.text) for t in (trials[2], trials[0], trials[1])]
    assert order == sorted(order)
    assert "dev: 4/4 solved; promoted" in text and "held" not in text
    dev = _report("dev", {"a": True, "b": False})
    offer = Offer("instruction", PROMPT, ())
    messages = build_prompt(SOURCES, dev, [], "none", TARGETS, offer=offer, history=trials)
    assert messages[0].content == moves.INSTRUCTION_SYSTEM
    assert text in (messages[1].content or "")


def test_moves_policy_is_validated(tmp_path: Path) -> None:
    assert ProposerPolicy().moves == ["edit", "instruction", "demonstrate", "component"]
    assert ProposerPolicy(moves=["demonstrate"]).moves == ["demonstrate"]
    for bad, words in (("[]", "moves is empty"), ('["edit", "guess"]', "moves")):
        path = tmp_path / "p.toml"
        path.write_text(f"[proposer]\nmoves = {bad}\n")
        with pytest.raises(ConfigError, match=words) as info:
            load_policy(path)
        assert "key 'proposer.moves" in str(info.value), info.value


def test_the_moves_schemas_are_ones_llama_cpp_turns_into_grammars() -> None:
    for move in ("instruction", "demonstrate", "component"):
        schema = edit_protocol.reply_schema(TARGETS, _offer(move))
        assert "root ::=" in json_schema_to_gbnf(json.dumps(schema))


def test_the_instruction_bound_survives_the_local_grammar() -> None:
    """Above the local grammar's bound on repetitions a maxLength is dropped, and the
    embedded model then writes until max_tokens cuts its reply into no JSON."""
    assert moves.INSTRUCTION_CHARS <= MAX_REPEAT
    schema = edit_protocol.reply_schema(TARGETS, _offer("instruction"))
    assert bounded(schema) == schema
