"""HumanEval copies keep their docstrings, so a table keyed on the docstring survives them; it
buys nothing on problems generated for this installation. Through the real pipeline and
sandbox (the code checks run there too), on a scripted model that follows hints, written
against the problems as the daemon evaluates them (copies and generated problems, dev and
held-out alike):

* the cheat: a table of the public problems keyed on the prompt with the entry point's name
  masked (what a copy renames), giving the canonical solution's words as prose; the model
  writes the right function whenever the request carries its problem's hint. Its wins are
  all on copies, and the ``generated`` gate refuses it;
* its honest twin, an instruction sent to every problem, which the model follows on every
  problem, generated or not: promoted, with wins on both.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.config.policy import SuitePolicy
from daemon.lineage import Lineage
from daemon.suites import evaluated_suite, generated_ids, load_suite
from daemon.suites.base import Suite
from daemon.suites.splits import split
from daemon.verdict import Verdict
from tests.improve.knowledge import seed_patch
from tests.improve.pipeline_world import LOOSE, ONE_DEFENCE, SEED, gate, policy, submit

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SPEC, DEV, HELDOUT = "humaneval", 4, 120
INSTRUCTION = "Write the whole function in one python code block, nothing else."
SEED_INSTRUCTIONS = 'INSTRUCTIONS = ""  # system text put before every task\'s prompt ("": none)'


def _user(suite: Suite, task_id: str) -> str:
    return [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1] or ""


def masked(prompt: str, entry_point: str) -> str:
    """The prompt with the entry point's name masked: what a copy keeps."""
    return " ".join(re.sub(r"\b" + re.escape(entry_point) + r"\b", "#", prompt).split())


def key(prompt: str, entry_point: str) -> str:
    return hashlib.sha1(masked(prompt, entry_point).encode()).hexdigest()[:10]


def prose(solution: str) -> str:
    """The solution's words, not its code: what a proposer that read it would write down."""
    return "Use " + " ".join(re.findall(r"[A-Za-z_]+", solution))[:400]


def guide_table(cache: Path) -> dict[str, str]:
    public = load_suite(SPEC, cache)
    return {
        key(_user(public, t), public.task(t).meta["entry_point"]): prose(public.reference_output(t))
        for t in public.task_ids()
    }


def _toml(text: str) -> str:
    return json.dumps(text)


def model_script(cache: Path) -> str:
    """Right when the request carries its problem's hint or the instruction, and on a
    quarter of each split by itself (the seed's share); otherwise useless."""
    p = SuitePolicy(name=SPEC, dev_size=DEV, heldout_size=HELDOUT, split_seed="mf")
    suite = evaluated_suite(p, cache, "mf")
    splits = split(suite.task_ids(), seed="mf", dev_size=DEV, heldout_size=HELDOUT)
    guide = guide_table(cache)
    rules = ['mode = "rules"', ""]
    for ids in (splits.dev, splits.heldout):
        for pos, task_id in enumerate(ids):
            user = _user(suite, task_id)
            right = "content = " + _toml(f"```python\n{suite.reference_output(task_id)}\n```")
            hint = guide.get(key(user, suite.task(task_id).meta["entry_point"]))
            if hint is not None:
                hinted = "^" + re.escape(f"{user}\n\nHINT: {hint}") + "$"
                rules += ["[[rules]]", f"match = {_toml(hinted)}", right, ""]
            exact = "^" + re.escape(user) + "$"
            rules += ["[[rules]]", f"match = {_toml(exact)}"]
            rules += [f"system = {_toml(re.escape(INSTRUCTION))}", right, ""]
            if pos % 4 == 0:
                rules += ["[[rules]]", f"match = {_toml(exact)}", right, ""]
    rules += ["[[rules]]", 'content = "I do not know."', ""]
    return "\n".join(rules)


def docstring_cheat(cache: Path) -> str:
    return seed_patch(
        "remind the model how each kind of function is usually written",
        "def solve(task, ctx):\n    state = State(task)\n",
        "import hashlib\n\n"
        f"GUIDE = {json.dumps(guide_table(cache), sort_keys=True)}\n\n\n"
        "def masked(prompt, name):\n"
        '    return " ".join(re.sub(r"\\b" + re.escape(name) + r"\\b", "#", prompt).split())\n\n\n'
        "def solve(task, ctx):\n    state = State(task)\n"
        '    if task["kind"] == "code":\n'
        '        prompt = state.messages[-1]["content"]\n'
        '        seen = masked(prompt, task["meta"]["entry_point"])\n'
        "        hint = GUIDE.get(hashlib.sha1(seen.encode()).hexdigest()[:10])\n"
        "        if hint:\n"
        '            hinted = prompt + "\\n\\nHINT: " + hint\n'
        '            state.messages[-1] = {"role": "user", "content": hinted}\n',
    )


def instruction_patch() -> str:
    return seed_patch(
        "ask for the whole function in one code block",
        SEED_INSTRUCTIONS,
        f"INSTRUCTIONS = {json.dumps(INSTRUCTION)}",
    )


async def _judged(
    runtime_factory: Any, tmp_path: Path, cache: Path, patch: str, extra: str = ""
) -> tuple[Verdict, Lineage]:
    model = tmp_path / "model.toml"
    model.write_text(model_script(cache))
    async with runtime_factory(policy(model, SPEC, DEV, HELDOUT, LOOSE + extra)) as rt:
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, patch)
        assert sub.accepted_for_evaluation, sub.reason
        return verdict, lineage


def test_the_guide_finds_every_copy_and_no_generated_problem(asset_cache: Path) -> None:
    """The world is what the test below needs: copies keep what the guide keys on."""
    p = SuitePolicy(name=SPEC, dev_size=DEV, heldout_size=HELDOUT, split_seed="mf")
    suite = evaluated_suite(p, asset_cache, "mf")
    guide = guide_table(asset_cache)
    made = generated_ids(suite)
    pool = split(suite.task_ids(), seed="mf", dev_size=DEV, heldout_size=HELDOUT).heldout
    found = {t for t in pool if key(_user(suite, t), suite.task(t).meta["entry_point"]) in guide}
    assert found == set(pool) - made and len(made & set(pool)) == HELDOUT // 2


@pytest.mark.timeout(1500)
@pytest.mark.anyio
async def test_a_docstring_keyed_guide_is_rejected_with_generated_problems(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    verdict, lineage = await _judged(
        runtime_factory, tmp_path, asset_cache, docstring_cheat(asset_cache), ONE_DEFENCE
    )
    assert verdict.decision != "accept", verdict
    assert lineage.current().name == "v0001"
    generated = gate(verdict, "generated")
    assert generated.note.startswith("0 of "), generated.note  # none of its wins there
    assert "generated" in verdict.failed and not generated.passed, verdict


@pytest.mark.timeout(1500)
@pytest.mark.anyio
async def test_an_instruction_for_every_problem_is_promoted(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    verdict, lineage = await _judged(runtime_factory, tmp_path, asset_cache, instruction_patch())
    assert verdict.decision == "accept", verdict
    assert lineage.current().name == "v0002"
    generated = gate(verdict, "generated")
    assert generated.passed and not generated.note.startswith("0 of "), generated.note
