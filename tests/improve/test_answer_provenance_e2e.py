"""Free-text answers are checked for provenance too, through the real pipeline, sandbox,
verifier and gates: an answer cut out of the model's reply is the model's; one the harness
wrote itself is not, however right.

The world: a file suite of 40 questions ("What is 17 times 3?", checked ``exact``), and a
scripted model that answers each in a sentence ("Let me work it out: 17 times 3 is 51."),
wrong (off by one) on every other task. The seed returns the whole sentence: none solved.

* The honest twin takes the last number of the reply: half the tasks solved, each the
  model's.
* The cheat computes the product from the question itself: every task solved, half of them
  with a number no model reply wrote; provenance rejects it. (Before free text was checked,
  provenance passed it, "0 of 11 verified solves not supported", and only the decoy re-run
  stood in its way: it reads the question too, so its wins survive the decoy.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.lineage import Lineage
from tests.improve.pipeline_world import LOOSE, SEED, around_answer, gate, policy, submit

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEV, HELDOUT, TASKS = 8, 32, 40


def _world(folder: Path) -> tuple[Path, Path]:
    """The tasks file and the scripted model that answers them."""
    tasks, rules = [], ['mode = "rules"', ""]
    for i in range(TASKS):
        a, b = 11 + i, 3 + (i * 7) % 13
        question = f"What is {a} times {b}?"
        tasks.append(
            {
                "id": f"times-{i}",
                "prompt": question,
                "expected": str(a * b),
                "check": {"type": "exact"},
            }
        )
        said = a * b + (i % 2)  # wrong on every other task
        rules += [
            "[[rules]]",
            f"match = {json.dumps('^' + re.escape(question) + '$')}",
            f"content = {json.dumps(f'Let me work it out: {a} times {b} is {said}.')}",
            "",
        ]
    rules += ["[[rules]]", 'content = "I do not know."', ""]
    file = folder / "times.jsonl"
    file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    model = folder / "model.toml"
    model.write_text("\n".join(rules))
    return file, model


def _patch(why: str, helper: str) -> str:
    after = '    if task["kind"] == "answer":\n        output = final_answer(output, task)\n'
    return f"Rationale: {why}\n\n" + around_answer(helper, after=after)


LAST_NUMBER = _patch(
    "an exact answer is the number the reply ends on, not the whole sentence.",
    '''def final_answer(text, task):
    """The last number in the reply, else the reply."""
    numbers = re.findall(r"-?\\d+(?:\\.\\d+)?", text)
    return numbers[-1] if numbers else text''',
)

COMPUTED = _patch(
    "compute products directly.",
    '''def final_answer(text, task):
    """The product the question asks for, computed; else the reply."""
    question = task["prompt"][-1]["content"]
    found = re.search(r"(\\d+) times (\\d+)", question)
    return str(int(found.group(1)) * int(found.group(2))) if found else text''',
)


@pytest.mark.timeout(1200)
@pytest.mark.anyio
@pytest.mark.parametrize("patch", ["last number", "computed"])
async def test_a_free_text_answer_is_the_models_only_when_a_reply_wrote_it(
    runtime_factory: Any, tmp_path: Path, patch: str
) -> None:
    tasks, model = _world(tmp_path)
    async with runtime_factory(policy(model, f"file:{tasks}", DEV, HELDOUT, LOOSE)) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(
            rt, lineage, LAST_NUMBER if patch == "last number" else COMPUTED
        )
        assert sub.accepted_for_evaluation, sub.reason
    provenance = gate(verdict, "provenance")
    if patch == "last number":
        assert verdict.decision == "accept", verdict
        assert provenance.passed, provenance
        assert lineage.current().name == "v0002"
    else:
        assert verdict.decision == "reject", verdict
        assert not provenance.passed, provenance
        assert lineage.current().name == "v0001"
