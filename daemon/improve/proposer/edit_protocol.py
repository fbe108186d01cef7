"""The edit protocol for small models: one typed operation on a named target, under a grammar.

A 135M model cannot copy a line of code exactly, so it is never asked to: the harness's
targets (:mod:`daemon.patches.targets`) are listed, and the reply's JSON schema offers only
those. Every reply the grammar lets through names a real target, so it applies; a constant
gets a value of its own type written by the host, so it compiles; only the one line of a
statement edit is the model's own code. The operations:

* ``set``: a constant to a new value. Numbers and switches choose from a few values around
  the current one (those already tried on this version are left out); prompt texts and
  patterns take any text.
* ``replace``: a simple statement by one line of code.
* ``insert``: one line of code before a statement inside a function.

Besides ``edit``, a reply may make one of the evidence-carrying moves of
:mod:`~daemon.improve.proposer.moves` (``instruction``, ``demonstrate``, ``component``);
each reply holds exactly one move key, and the schema of a cycle allows only the move it
asked for.

Larger models keep the free-text protocol (search/replace blocks or unified diffs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from daemon.improve.proposer import components, moves
from daemon.patches import ParseFailure, PatchRejected, Proposal
from daemon.patches.diff import parse_unified_diff
from daemon.patches.operations import (
    InsertStatement,
    Operation,
    ReplaceStatement,
    SetConstant,
    apply_operation,
)
from daemon.patches.targets import ConstantTarget, Targets, Value
from daemon.patches.tree import render_git_diff

RATIONALE_CHARS = 200
CODE_CHARS = 120
# Under the static stage's longest-encoded-run screen, so that prose never trips it.
TEXT_CHARS = 240
# What a reply may need at most, kept free of the prompt in the model's context: the longest
# the schema allows (a text value and a rationale, framing) at a pessimistic 1.5 characters
# a token. A reply cut short is no JSON and is lost.
REPLY_TOKENS = 400

SYSTEM = """\
You improve an agent harness: the Python code around a language model that solves tasks.
You see the harness with line numbers, its edit targets, how it did on development tasks
and what was tried before. Propose ONE edit that makes it solve more tasks, spend fewer
tokens, or claim success only when it is right. Reply with JSON:

{"edit": {"op": "set", "name": CONSTANT, "value": NEW VALUE}, "rationale": WHY}
{"edit": {"op": "replace", "line": "FILE:LINE", "code": ONE LINE OF PYTHON}, "rationale": WHY}
{"edit": {"op": "insert", "before": "FILE:LINE", "code": ONE LINE OF PYTHON}, "rationale": WHY}

"set" gives a constant a new value, "replace" rewrites the statement starting on that line,
"insert" adds a line before it (indentation is added for you). Do not repeat an edit that
was already tried."""


_FACTORS = (0.25, 0.5, 0.75, 1.5, 2.0, 4.0)


def alternatives(constant: ConstantTarget) -> list[Value]:
    """Values offered for a number or switch: a few steps either side of the current one."""
    value = constant.value
    if constant.kind == "bool":
        return [not value]
    if constant.kind == "int" and isinstance(value, int):
        if abs(value) <= 8:
            steps = {value - 2, value - 1, value + 1, value + 2, 2 * value, 4 * value}
            whole = sorted(v for v in steps if v >= 0 or value < 0)
        else:
            whole = sorted({round(value * f) for f in _FACTORS})
        return [v for v in whole if v != value]
    if constant.kind == "float" and isinstance(value, int | float):
        if value == 0:
            return [0.1, 0.5, 1.0]
        fractional = sorted({float(f"{value * f:.3g}") for f in _FACTORS})
        return [v for v in fractional if v != value]
    return []


def _free_text(constant: ConstantTarget) -> dict[str, Any]:
    limit = TEXT_CHARS if constant.kind == "text" else CODE_CHARS
    return {"type": "string", "maxLength": limit}


def _branch(op: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"op": {"const": op}, **fields},
        "required": ["op", *fields],
    }


def statement_labels(targets: Targets) -> tuple[list[str], list[str]]:
    """Which statements ``replace`` and ``insert`` may name: statements inside functions
    (module-level lines are imports and constants, which ``set`` covers)."""
    inside = [s for s in targets.statements if s.indent]
    return [s.label for s in inside if s.replaceable], [s.label for s in inside]


# A choice in a reply that a grammar can leave out of the next draw: ("set", constant),
# ("replace", line), ("insert", line) of an edit, ("demonstrate", task id).
Slot = tuple[str, str]


def slot_of(content: str, targets: Targets) -> Slot | None:
    """The choice of a reply whose program was tried before that the next draw's grammar
    leaves out: the text constant or line its edit names, the first task its demonstrate
    move shows (the one it put before the others). None: no grammar needs to or can close
    it (a number's or switch's values tried are left out value by value already; an
    instruction's free text; components tried are not offered in the first place)."""
    read = read_reply(content)
    if isinstance(read, ParseFailure):
        return None
    reply = read[0]
    if isinstance(reply, SetConstant):
        free = [c for c in targets.constants if c.kind in ("text", "pattern")]
        return ("set", reply.target) if any(c.label == reply.target for c in free) else None
    if isinstance(reply, ReplaceStatement):
        return ("replace", reply.target)
    if isinstance(reply, InsertStatement):
        return ("insert", reply.before)
    if isinstance(reply, Demonstrate) and reply.task_ids:
        return ("demonstrate", reply.task_ids[0])
    return None


def operations_schema(
    targets: Targets,
    offered: Callable[[Operation], bool] = lambda op: True,
    closed: Collection[Slot] = (),
) -> dict[str, Any] | None:
    """The reply's JSON schema; ``offered`` drops operations known to lead nowhere new
    (a constant's value already tried on this version), ``closed`` the constants and lines
    whose edit repeated a program tried before. None: no operation is left to offer."""
    branches: list[dict[str, Any]] = []
    for constant in targets.constants:
        if ("set", constant.label) in closed:
            continue
        if constant.kind in ("text", "pattern"):
            value: dict[str, Any] = _free_text(constant)
        else:
            values = [v for v in alternatives(constant) if offered(SetConstant(constant.label, v))]
            if not values:
                continue
            value = {"enum": values}
        branches.append(_branch("set", {"name": {"const": constant.label}, "value": value}))
    replaceable, insertable = statement_labels(targets)
    replaceable = [label for label in replaceable if ("replace", label) not in closed]
    insertable = [label for label in insertable if ("insert", label) not in closed]
    code = {"type": "string", "maxLength": CODE_CHARS}
    if replaceable:
        branches.append(_branch("replace", {"line": {"enum": replaceable}, "code": code}))
    if insertable:
        branches.append(_branch("insert", {"before": {"enum": insertable}, "code": code}))
    if not branches:
        return None
    return {
        "type": "object",
        "properties": {
            "edit": {"anyOf": branches},
            "rationale": {"type": "string", "maxLength": RATIONALE_CHARS},
        },
        "required": ["edit", "rationale"],
    }


def reply_schema(
    targets: Targets,
    offer: moves.Offer,
    offered: Callable[[Operation], bool] = lambda op: True,
    closed: Collection[Slot] = (),
) -> dict[str, Any] | None:
    """The schema of a reply making ``offer.move``, and no other move, without the
    ``closed`` choices. None: every choice of the move is closed."""
    if offer.move == "instruction":
        return moves.instruction_schema(RATIONALE_CHARS)
    if offer.move == "demonstrate":
        demos = [d for d in offer.demos if ("demonstrate", d.task_id) not in closed]
        return moves.demonstrate_schema(demos, RATIONALE_CHARS) if demos else None
    if offer.move == "component":
        return components.schema(offer.components, RATIONALE_CHARS)
    return operations_schema(targets, offered, closed)


def _shown(value: Value) -> str:
    return json.dumps(value, ensure_ascii=False)


def targets_section(sources: Mapping[str, str], targets: Targets) -> str:
    """The harness as the protocol shows it: numbered source, then its constants."""
    parts = []
    for name, text in sorted(sources.items()):
        numbered = "\n".join(f"{i:3d}| {line}" for i, line in enumerate(text.split("\n"), 1))
        parts.append(f"{name}\n{numbered.rstrip()}")
    constants = []
    for c in targets.constants:
        what = {"text": "prompt text", "pattern": "regular expression"}.get(c.kind, c.kind)
        comment = f" ({c.comment})" if c.comment else ""
        options = alternatives(c)
        choice = f"; choose from {', '.join(_shown(v) for v in options)}" if options else ""
        constants.append(f"- {c.label} = {_shown(c.value)}: {what}{comment}{choice}")
    parts.append("# Constants you can set\n" + ("\n".join(constants) or "none"))
    return "\n\n".join(parts)


def _operation(edit: Any) -> Operation:
    if not isinstance(edit, dict):
        raise TypeError("edit is not an object")
    op = edit.get("op")
    if op == "set":
        return SetConstant(str(edit["name"]), edit["value"])
    if op == "replace":
        return ReplaceStatement(str(edit["line"]), str(edit["code"]))
    if op == "insert":
        return InsertStatement(str(edit["before"]), str(edit["code"]))
    raise KeyError(f"unknown op {op!r}")


@dataclass(frozen=True)
class Instruction:
    """The instruction move: a new instruction text for the prompt text constant."""

    text: str


@dataclass(frozen=True)
class Demonstrate:
    """The demonstrate move: the solved dev tasks to show as worked examples, by id."""

    task_ids: tuple[str, ...]


@dataclass(frozen=True)
class ChooseComponent:
    """The component move: one of the offered components, by name."""

    key: str


MoveReply = Operation | Instruction | Demonstrate | ChooseComponent


def move_of(reply: MoveReply) -> moves.Move:
    if isinstance(reply, Instruction):
        return "instruction"
    if isinstance(reply, Demonstrate):
        return "demonstrate"
    if isinstance(reply, ChooseComponent):
        return "component"
    return "edit"


def _read_move(data: Any) -> MoveReply:
    if not isinstance(data, dict):
        raise TypeError("the reply is not an object")
    keys = [m for m in moves.MOVES if m in data]
    if len(keys) != 1:
        raise KeyError(f"a reply makes exactly one move of {', '.join(moves.MOVES)}; got {keys}")
    value = data[keys[0]]
    if keys[0] == "edit":
        return _operation(value)
    if keys[0] == "instruction":
        if not isinstance(value, str):
            raise TypeError("instruction is not a string")
        return Instruction(value)
    if keys[0] == "component":
        if not isinstance(value, str):
            raise TypeError("component is not a string")
        return ChooseComponent(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("demonstrate is not a list of task ids")
    return Demonstrate(tuple(dict.fromkeys(value)))  # a task shown once, in the model's order


def read_reply(content: str) -> tuple[MoveReply, str] | ParseFailure:
    """A reply's move and rationale, or a ParseFailure when it is not the protocol's JSON
    (e.g. cut off, another protocol's text, or not exactly one move)."""
    try:
        # Not strict: llama.cpp's JSON grammar lets raw control characters into strings.
        data = json.loads(content, strict=False)
        return _read_move(data), str(data.get("rationale", "")).strip()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return ParseFailure(f"not an edit operation ({exc})", content)


def _forged(text: str) -> PatchRejected:
    return PatchRejected(
        f"the text holds {moves.EXAMPLES_HEADER!r}: worked examples are written by the daemon "
        "from solved dev tasks (the demonstrate move), never by hand"
    )


def _move_operation(reply: Operation | Instruction | Demonstrate, offer: moves.Offer) -> Operation:
    """The reply as an operation on the harness, with the daemon's text for the moves."""
    if isinstance(reply, SetConstant | ReplaceStatement | InsertStatement):
        written = reply.value if isinstance(reply, SetConstant) else reply.code
        if isinstance(written, str) and moves.EXAMPLES_HEADER in written:
            raise _forged(written)
        return reply
    prompt = offer.prompt
    if prompt is None:
        raise PatchRejected(f"the {move_of(reply)} move needs a prompt text constant; none")
    if isinstance(reply, Instruction):
        if moves.EXAMPLES_HEADER in reply.text:
            raise _forged(reply.text)
        if len(reply.text) > moves.INSTRUCTION_CHARS:
            raise PatchRejected(
                f"the instruction has {len(reply.text)} characters; at most "
                f"{moves.INSTRUCTION_CHARS}"
            )
        return SetConstant(prompt.label, moves.with_instruction(str(prompt.value), reply.text))
    offered = {d.task_id: d for d in offer.demos}
    unknown = [t for t in reply.task_ids if t not in offered]
    if unknown or not reply.task_ids or len(reply.task_ids) > moves.MAX_DEMOS:
        raise PatchRejected(
            f"demonstrate takes 1 to {moves.MAX_DEMOS} of the offered solved dev tasks; "
            f"got {list(reply.task_ids)}"
        )
    demos = [offered[t] for t in reply.task_ids]
    return SetConstant(prompt.label, moves.with_examples(str(prompt.value), demos))


def to_proposal(
    content: str,
    sources: Mapping[str, str],
    targets: Targets,
    offer: moves.Offer | None = None,
) -> Proposal | ParseFailure | PatchRejected:
    """The reply as a patch of ``sources``: a Proposal (a normalised diff), a ParseFailure
    when it is not the protocol's JSON (e.g. cut off), or PatchRejected when the operation
    cannot be carried out (its reason says why). ``offer``: the prompt text constant and
    solved dev tasks the instruction and demonstrate moves may use (None: edits only)."""
    read = read_reply(content)
    if isinstance(read, ParseFailure):
        return read
    reply, rationale = read
    offer = offer or moves.Offer()
    if isinstance(reply, ChooseComponent):
        return _component_proposal(reply, rationale, sources, offer)
    try:
        op = _move_operation(reply, offer)
        if offer.prompt is not None and isinstance(reply, Instruction | Demonstrate):
            # The move's constant is applied even when an edit filter left it out of targets.
            targets = Targets((offer.prompt,), ())
        file, new_text = apply_operation(sources, targets, op)
    except PatchRejected as exc:
        return exc
    diff = render_git_diff({file: sources[file].encode("utf-8")}, {file: new_text.encode("utf-8")})
    edits = tuple(parse_unified_diff(diff)) if diff else ()  # () changes nothing: refused later
    return Proposal(rationale=rationale, edits=edits, format="diff")


def component_file(sources: Mapping[str, str]) -> str | None:
    """The harness file a component is appended to: the one with the primitive it wraps."""
    return next((f for f in sorted(sources) if components.wraps(sources[f])), None)


def with_component(sources: Mapping[str, str], key: str) -> dict[str, str]:
    """``sources`` with component ``key`` appended to the harness file (unchanged: none)."""
    file = component_file(sources)
    if file is None:
        return dict(sources)
    return {**sources, file: components.with_component(sources[file], key)}


def _component_proposal(
    reply: ChooseComponent, rationale: str, sources: Mapping[str, str], offer: moves.Offer
) -> Proposal | PatchRejected:
    offered = [e.key for e in offer.components]
    if reply.key not in offered:
        return PatchRejected(
            f"component {reply.key!r} was not offered; choose one of {offered or 'none'}"
        )
    file = component_file(sources)
    if file is None:
        return PatchRejected("no harness file defines answer(task, state) to wrap")
    after = with_component(sources, reply.key)
    diff = render_git_diff(
        {file: sources[file].encode("utf-8")}, {file: after[file].encode("utf-8")}
    )
    return Proposal(rationale=rationale, edits=tuple(parse_unified_diff(diff)), format="diff")


def preview(sources: Mapping[str, str], targets: Targets, op: Operation) -> dict[str, str]:
    """``sources`` after ``op`` (for duplicate checks before anything is asked)."""
    file, new_text = apply_operation(sources, targets, op)
    return {**sources, file: new_text}
