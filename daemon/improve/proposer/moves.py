"""Moves a small proposer can make that carry evidence, and which one a cycle asks for.

A 135M model's free text is noise, so three of the four moves give it little to write:

* ``edit`` (:mod:`~daemon.improve.proposer.edit_protocol`): one typed operation on a named
  target.
* ``demonstrate`` (DSPy's bootstrapped demonstrations): the model picks 1-4 dev tasks its
  base version solved, by id from an enum of exactly those; the daemon writes each task's
  question and the answer the verifier accepted into the harness's prompt text under
  :data:`EXAMPLES_HEADER`, replacing any earlier examples. The model writes no example text.
* ``component`` (:mod:`~daemon.improve.proposer.components`): one of the project's generic
  harness components (drop repeated calls, calls to functions not offered, undeclared
  arguments, extra calls), chosen by name from those whose symptom failed dev tasks show.
* ``instruction`` (OPRO / GEPA reflection): the model writes a new instruction text (bounded
  length) for the prompt text constant, shown the failed dev tasks and earlier instruction
  candidates with their dev results, best last. Any examples block is kept as it is; an
  instruction holding the header is refused, so examples cannot be forged by hand.

Everything here arrives as plain data built by :mod:`daemon.improve.briefing` from dev
reports only: a :class:`Demo` comes from a dev task the base solved, a :class:`Trial` from a
candidate's dev report (of a candidate that reached held-out, the proposer learns only
"promoted" or "not promoted", as everywhere).

The move a cycle asks for is drawn by Thompson sampling over each move's record
(:func:`choose_move`): Beta(1 + wins, 1 + losses), where a win is a candidate of that move
whose dev accuracy beat its base's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from daemon.improve.proposer.components import Evidence
from daemon.patches.targets import ConstantTarget, Targets

Move = Literal["edit", "instruction", "demonstrate", "component"]
MOVES: tuple[Move, ...] = ("edit", "instruction", "demonstrate", "component")

# The fixed header of the daemon-written examples block; everything from it on is the block.
EXAMPLES_HEADER = "Worked examples:"
MAX_DEMOS = 4
# A new instruction text, at most (the examples block is not counted: the daemon writes it).
# Under the local grammar's bound on repetitions (256), above which llama.cpp's grammar drops
# the limit and a small model writes on until max_tokens cuts its reply into no JSON; and
# under the static stage's longest-encoded-run screen, like the edit protocol's texts.
INSTRUCTION_CHARS = 240
# How much of a question or answer one example carries: enough to show the answer's shape
# without letting four examples crowd the solver model's context.
DEMO_QUESTION_CHARS = 300
DEMO_ANSWER_CHARS = 300
# Prompt texts a move may rewrite, by name: the seed's INSTRUCTIONS, and the usual names.
PROMPT_NAMES = ("INSTRUCTION", "SYSTEM", "PROMPT")


@dataclass(frozen=True)
class Demo:
    """A dev task the base solved, as an example: its question and the verified answer."""

    task_id: str
    question: str
    answer: Any  # the output the verifier accepted, in the shape the harness returns


@dataclass(frozen=True)
class Trial:
    """An earlier instruction candidate with its dev result (``outcome``: the information
    rule's words for it, e.g. "not promoted")."""

    candidate_id: int
    text: str
    solved: int
    n: int
    outcome: str


@dataclass(frozen=True)
class Record:
    """A move's candidates so far: a win beat its base's dev accuracy, a loss did not."""

    wins: int = 0
    losses: int = 0


@dataclass(frozen=True)
class Offer:
    """What a cycle's move may use: the prompt text constant it rewrites, the solved dev
    tasks offered as examples and the components offered with their evidence."""

    move: Move = "edit"
    prompt: ConstantTarget | None = None
    demos: tuple[Demo, ...] = ()
    components: tuple[Evidence, ...] = ()


def prompt_constant(targets: Targets) -> ConstantTarget | None:
    """The harness's prompt text constant (a module-level str whose name says it is an
    instruction, system text or prompt), or None when it has none."""
    texts = [c for c in targets.constants if c.kind == "text"]
    for word in PROMPT_NAMES:
        for c in texts:
            if word in c.name.upper():
                return c
    return None


def possible(
    moves: Sequence[Move],
    prompt: ConstantTarget | None,
    demos: Sequence[Demo],
    components: Sequence[Evidence] = (),
) -> list[Move]:
    """The moves of ``moves`` that can be made: instruction and demonstrate need a prompt
    text constant, demonstrate a solved dev task too, component a component to offer."""
    can = {
        "edit": True,
        "instruction": prompt is not None,
        "demonstrate": bool(prompt and demos),
        "component": bool(components),
    }
    return [m for m in moves if can[m]]


def choose_move(moves: Sequence[Move], records: Mapping[Move, Record], rng: random.Random) -> Move:
    """The move to ask for: one Beta(1 + wins, 1 + losses) draw per move, the highest wins
    (ties: the earlier in ``moves``). ``moves`` must not be empty."""
    if not moves:
        raise ValueError("no move to choose from")
    best, best_draw = moves[0], -1.0
    for move in moves:
        record = records.get(move, Record())
        draw = rng.betavariate(1 + record.wins, 1 + record.losses)
        if draw > best_draw:
            best, best_draw = move, draw
    return best


def split_examples(text: str) -> tuple[str, str]:
    """``(instruction, examples block)`` of a prompt text (the block starts at the header)."""
    at = text.find(EXAMPLES_HEADER)
    if at < 0:
        return text, ""
    return text[:at].rstrip(), text[at:]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _answer(answer: Any) -> str:
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)


def examples_block(demos: Sequence[Demo]) -> str:
    """The examples the daemon writes: each task's question and its verified answer."""
    lines = [EXAMPLES_HEADER]
    for demo in demos:
        lines.append(f"Question: {_clip(demo.question, DEMO_QUESTION_CHARS)}")
        lines.append(f"Answer: {_clip(_answer(demo.answer), DEMO_ANSWER_CHARS)}")
    return "\n".join(lines)


def with_examples(text: str, demos: Sequence[Demo]) -> str:
    """``text`` with its examples block (if any) replaced by one of ``demos``."""
    instruction, _ = split_examples(text)
    block = examples_block(demos)
    return f"{instruction}\n\n{block}" if instruction else block


def with_instruction(text: str, instruction: str) -> str:
    """``text`` with its instruction replaced by ``instruction``; the examples stay."""
    _, block = split_examples(text)
    instruction = instruction.strip()
    if not block:
        return instruction
    return f"{instruction}\n\n{block}" if instruction else block


# One system text per move (the edit move's is edit_protocol.SYSTEM).
INSTRUCTION_SYSTEM = f"""\
You improve the instruction an agent harness gives a language model before every task.
You see the current instruction, the development tasks it failed and earlier instructions
with how many development tasks each solved, best last. Write ONE new instruction (at
most {INSTRUCTION_CHARS} characters) that would solve more tasks. Reply with JSON:

{{"instruction": NEW INSTRUCTION TEXT, "rationale": WHY}}

Do not repeat an earlier instruction. Do not write examples: the harness adds them."""

DEMONSTRATE_SYSTEM = f"""\
You improve an agent harness by choosing worked examples for its prompt. You see the
development tasks the harness solved, by id, and those it failed. Choose 1 to {MAX_DEMOS}
solved tasks whose question and answer would best show the model how to answer the failed
ones; the harness writes them into its prompt. Reply with JSON:

{{"demonstrate": [TASK ID, ...], "rationale": WHY}}"""


def instruction_schema(rationale_chars: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "instruction": {"type": "string", "maxLength": INSTRUCTION_CHARS},
            "rationale": {"type": "string", "maxLength": rationale_chars},
        },
        "required": ["instruction", "rationale"],
    }


def demonstrate_schema(demos: Sequence[Demo], rationale_chars: int) -> dict[str, Any]:
    """Only the offered tasks' ids: the grammar lets nothing else through."""
    ids = [d.task_id for d in demos]
    return {
        "type": "object",
        "properties": {
            "demonstrate": {
                "type": "array",
                "items": {"enum": ids},
                "minItems": 1,
                "maxItems": min(MAX_DEMOS, len(ids)),
            },
            "rationale": {"type": "string", "maxLength": rationale_chars},
        },
        "required": ["demonstrate", "rationale"],
    }


def current_section(prompt: ConstantTarget) -> str:
    """The prompt text constant as the instruction and demonstrate moves show it."""
    instruction, block = split_examples(str(prompt.value))
    lines = [f"{prompt.label}, the system text put before every task:"]
    lines.append(f"instruction: {json.dumps(instruction, ensure_ascii=False)}")
    lines.append(block or "(no worked examples)")
    return "\n".join(lines)


def history_section(trials: Sequence[Trial]) -> str:
    """Earlier instruction candidates, sorted by dev accuracy, best last (OPRO: the model
    continues the trend)."""
    if not trials:
        return "none yet"
    ordered = sorted(trials, key=lambda t: (t.solved / t.n if t.n else 0.0, t.candidate_id))
    lines = []
    for t in ordered:
        text = json.dumps(_clip(t.text, INSTRUCTION_CHARS), ensure_ascii=False)
        lines.append(f"- c{t.candidate_id}: {text}\n  dev: {t.solved}/{t.n} solved; {t.outcome}")
    return "\n".join(lines)


def demos_section(demos: Sequence[Demo]) -> str:
    """The solved dev tasks offered, by id."""
    lines = [f"- {d.task_id}: {_clip(d.question, 200)}" for d in demos]
    return "\n".join(lines) or "none"
