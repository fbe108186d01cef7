"""The small-model edit protocol: every reply its grammar allows is a patch that applies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from daemon.config.policy import PatchPolicy
from daemon.improve.proposer import edit_protocol
from daemon.patches import ParseFailure, PatchRejected, Proposal, apply_proposal, static_check
from daemon.patches.operations import SetConstant
from daemon.patches.targets import find_targets

pytestmark = pytest.mark.unit

SEED_DIR = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
SOURCES = {"harness.py": (SEED_DIR / "harness.py").read_text()}
TARGETS = find_targets(SOURCES)
# Texts a model may write where the grammar allows any string.
HOSTILE_TEXTS = ["", "Call one function.", 'say "hi"\n"""\\', "\u00e9\u4e2d\x00\x1f", "'''"]


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    edit: dict[str, Any] = schema["properties"]["edit"]
    return list(edit["anyOf"])


def _instances(branch: dict[str, Any]) -> list[dict[str, Any]]:
    """Replies the branch allows: every enum value, hostile texts where text is free."""
    props = branch["properties"]
    fixed = {k: v["const"] for k, v in props.items() if "const" in v}
    choices: list[dict[str, Any]] = [fixed]
    for key, spec in props.items():
        if "const" in spec:
            continue
        values = spec.get("enum", [*HOSTILE_TEXTS, "pass"])
        choices = [{**c, key: v} for c in choices for v in values]
    return choices


def _check_applies(edit: dict[str, Any], scratch: Path) -> Proposal | PatchRejected:
    reply = json.dumps({"edit": edit, "rationale": "r"})
    proposal = edit_protocol.to_proposal(reply, SOURCES, TARGETS)
    assert not isinstance(proposal, ParseFailure), (edit, proposal)
    if isinstance(proposal, Proposal) and proposal.edits:
        dest = scratch / "tree"
        applied = apply_proposal(SEED_DIR, proposal, dest)  # never a SEARCH that misses
        try:
            static_check(applied, PatchPolicy())
        finally:
            shutil.rmtree(dest)
    return proposal


def test_every_reply_the_grammar_allows_applies(tmp_path: Path) -> None:
    """Constants, prompt texts and statement edits alike land where they name: the only
    static failures left are the model's own code not compiling, a pattern that is not a
    regular expression, or an empty line of code."""
    outcomes: dict[str, int] = {}
    for branch in _branches(edit_protocol.operations_schema(TARGETS)):
        for edit in _instances(branch):
            try:
                result = _check_applies(edit, tmp_path)
            except PatchRejected as exc:
                # Applied, then refused by the static stage: only code the model wrote.
                assert edit["op"] in ("replace", "insert") and edit["code"] != "pass", (edit, exc)
                continue
            if isinstance(result, PatchRejected):
                assert edit["op"] != "set" or edit["name"] == "CODE_BLOCK", (edit, result)
                assert "regular expression" in result.reason or "empty" in result.reason
            outcomes[edit["op"]] = outcomes.get(edit["op"], 0) + 1
    assert set(outcomes) == {"set", "replace", "insert"}


def test_the_schema_is_one_llama_cpp_turns_into_a_grammar() -> None:
    schema = edit_protocol.operations_schema(TARGETS)
    assert "root ::=" in json_schema_to_gbnf(json.dumps(schema))


def test_schema_names_only_real_targets_and_drops_tried_values() -> None:
    schema = edit_protocol.operations_schema(TARGETS)
    sets = {
        b["properties"]["name"]["const"]: b["properties"]["value"]
        for b in _branches(schema)
        if b["properties"]["op"]["const"] == "set"
    }
    assert sets["MAX_STEPS"] == {"enum": [2, 3, 5, 6, 8, 16]}
    assert sets["MAX_TOKENS"] == {"enum": [128, 256, 384, 768, 1024, 2048]}
    assert sets["INSTRUCTIONS"]["type"] == "string"
    tried = SetConstant("MAX_STEPS", 8)
    fewer = edit_protocol.operations_schema(TARGETS, lambda op: op != tried)
    values = [
        b["properties"]["value"]
        for b in _branches(fewer)
        if b["properties"].get("name", {}).get("const") == "MAX_STEPS"
    ]
    assert values == [{"enum": [2, 3, 5, 6, 16]}]
    # Every value left out: the constant is not offered at all.
    none = edit_protocol.operations_schema(
        TARGETS, lambda op: not (isinstance(op, SetConstant) and op.target == "MAX_STEPS")
    )
    names = [b["properties"].get("name", {}).get("const") for b in _branches(none)]
    assert "MAX_STEPS" not in names and "MAX_TOKENS" in names


def test_statement_edits_are_offered_inside_functions_only() -> None:
    replaceable, insertable = edit_protocol.statement_labels(TARGETS)
    lines = SOURCES["harness.py"].split("\n")
    for label in insertable:
        number = int(label.split(":")[1])
        assert lines[number - 1].startswith(" "), label
    assert set(replaceable) <= set(insertable)
    assert "harness.py:16" not in insertable  # MAX_STEPS = 4: a constant, which "set" covers


def test_the_prompt_shows_numbered_source_and_the_constants_with_choices() -> None:
    text = edit_protocol.targets_section(SOURCES, TARGETS)
    assert " 16| MAX_STEPS = 4  # model calls per task, at most" in text
    assert "- MAX_STEPS = 4: int (model calls per task, at most); choose from 2, 3, 5" in text
    assert '- INSTRUCTIONS = "": prompt text' in text


def test_replies_that_are_not_the_protocol_are_parse_failures() -> None:
    for reply in ("no idea", '{"edit": {"op": "delete"}}', "[]", '{"rationale": "x"}'):
        assert isinstance(edit_protocol.to_proposal(reply, SOURCES, TARGETS), ParseFailure)
    # llama.cpp's grammar lets raw control characters into strings; they are read.
    raw = '{"edit": {"op": "set", "name": "INSTRUCTIONS", "value": "a\nb"}, "rationale": "x\ty"}'
    parsed = edit_protocol.to_proposal(raw, SOURCES, TARGETS)
    assert isinstance(parsed, Proposal) and parsed.rationale == "x\ty"


def test_a_value_equal_to_the_current_one_changes_nothing(tmp_path: Path) -> None:
    reply = json.dumps({"edit": {"op": "set", "name": "MAX_STEPS", "value": 4}, "rationale": ""})
    proposal = edit_protocol.to_proposal(reply, SOURCES, TARGETS)
    assert isinstance(proposal, Proposal) and proposal.edits == ()
    with pytest.raises(PatchRejected, match="changes nothing"):
        apply_proposal(SEED_DIR, proposal, tmp_path / "tree")


def test_a_repeated_choice_names_the_slot_the_next_draw_leaves_out() -> None:
    def reply(move: dict[str, Any]) -> str:
        return json.dumps({**move, "rationale": "r"})

    def slot(content: str) -> tuple[str, str] | None:
        return edit_protocol.slot_of(content, TARGETS)

    # A text constant is closed whole; a number's tried values are left out one by one.
    text = {"op": "set", "name": "INSTRUCTIONS", "value": "Answer."}
    assert slot(reply({"edit": text})) == ("set", "INSTRUCTIONS")
    assert slot(reply({"edit": {"op": "set", "name": "MAX_STEPS", "value": 2}})) is None
    replace = {"op": "replace", "line": "harness.py:26", "code": "pass"}
    assert slot(reply({"edit": replace})) == ("replace", "harness.py:26")
    insert = {"op": "insert", "before": "harness.py:78", "code": "pass"}
    assert slot(reply({"edit": insert})) == ("insert", "harness.py:78")
    # The demonstrate move: the task the model put first.
    assert slot(reply({"demonstrate": ["t2", "t1"]})) == ("demonstrate", "t2")
    # Free text and components: nothing a grammar can close; a reply that is not JSON either.
    assert slot(reply({"instruction": "Answer briefly."})) is None
    assert slot(reply({"component": "one_call_per_reply"})) is None
    assert slot("not json") is None


def test_closed_lines_and_constants_leave_the_grammar_and_none_is_left_at_the_end() -> None:
    replaceable, insertable = edit_protocol.statement_labels(TARGETS)
    closed = {("replace", replaceable[0]), ("insert", insertable[-1]), ("set", "INSTRUCTIONS")}
    schema = edit_protocol.operations_schema(TARGETS, closed=closed)
    assert schema is not None
    branches = {b["properties"]["op"]["const"]: b for b in _branches(schema)}
    assert replaceable[0] not in branches["replace"]["properties"]["line"]["enum"]
    assert replaceable[1] in branches["replace"]["properties"]["line"]["enum"]
    # Closing a line for replace leaves inserting before it open, and the other way round.
    assert replaceable[0] in branches["insert"]["properties"]["before"]["enum"]
    assert insertable[-1] not in branches["insert"]["properties"]["before"]["enum"]
    names = [b["properties"].get("name", {}).get("const") for b in _branches(schema)]
    assert "INSTRUCTIONS" not in names and "MAX_STEPS" in names
    # The grammar still builds from what is left.
    json_schema_to_gbnf(json.dumps(schema))
    everything = (
        {("replace", label) for label in replaceable}
        | {("insert", label) for label in insertable}
        | {("set", c.label) for c in TARGETS.constants}
    )
    assert edit_protocol.operations_schema(TARGETS, closed=everything) is None
