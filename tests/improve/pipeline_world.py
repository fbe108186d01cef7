"""An in-process pipeline world: the real runtime, sandbox, verifiers and lineage, a scripted
model, and candidates submitted the way ``harnessctl propose`` submits them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from daemon.config.policy import SuitePolicy, load_policy
from daemon.evaluation.runtime import Runtime
from daemon.improve import intake
from daemon.improve.pipeline import Pipeline
from daemon.lineage import CandidateSource, Lineage
from daemon.suites import evaluated_suite
from daemon.suites.splits import split
from daemon.tasks import Task
from daemon.verdict import Verdict
from tests.improve.scripted_world import evaluated, toml_value

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
LOOSE = """
[patch]
max_bytes = 200000
max_literal_bytes = 200000
max_encoded_chars = 200000
"""
ONE_DEFENCE = """
[acceptance]
futility_conditional_gain = 0.0
"""
"""For a test that pins one defence on its own: without the conditional-power stop, which
would reject a cheat whose gain is small after a few dozen tasks, before that defence has
seen enough of its wins to be significant. The cheat is rejected either way."""


def solver(
    cache: Path,
    spec: str,
    dev: int,
    heldout: int,
    counterfactual: bool = True,
    generated_share: float = 0.5,
) -> str:
    """BFCL: the model answers the even positions of each split right, the rest "I do not
    know" (the seed: 50 %). HumanEval: never anything useful (the seed: 0 %). Held-out tasks
    as the daemon evaluates them: their counterfactual copies unless ``counterfactual`` is
    off (a test of another defence against public answers, which copies would stop first)."""
    lines = ['mode = "rules"', ""]
    if spec.startswith("bfcl"):
        # The tasks as the daemon evaluates them: held-out ones are counterfactual copies.
        p = SuitePolicy(
            name=spec,
            dev_size=dev,
            heldout_size=heldout,
            split_seed="mf",
            counterfactual=counterfactual,
            generated_share=generated_share,
        )
        suite = evaluated_suite(p, cache, "mf")
        splits = split(suite.task_ids(), seed="mf", dev_size=dev, heldout_size=heldout)
        for ids in (splits.dev, splits.heldout):
            for task_id in ids[::2]:
                question = [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1]
                lines += [
                    "[[rules]]",
                    f"match = {json.dumps('^' + re.escape(question or '') + '$')}",
                    f"tool_calls = {toml_value(suite.reference_output(task_id))}",
                    "",
                ]
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    return "\n".join(lines)


def one_call_tasks(
    cache: Path, spec: str, split_seed: str, dev: int, heldout: int
) -> list[tuple[Task, str, dict[str, Any]]]:
    """Each dev and held-out task of a one-call suite as the daemon evaluates it (copies and
    generated tasks), with its question as a scripted rule's ``match`` (TOML-ready) and its
    reference call."""
    suite, splits = evaluated(cache, spec, split_seed, dev, heldout)
    found = []
    for task_id in [*splits.dev, *splits.heldout]:
        task = suite.task(task_id)
        question = [m.content for m in task.prompt if m.role == "user"][-1] or ""
        (call,) = suite.reference_output(task_id)
        right = {"name": call["name"], "arguments": call["arguments"]}
        found.append((task, json.dumps("^" + re.escape(question) + "$"), right))
    return found


def policy(
    model: Path,
    spec: str,
    dev: int,
    heldout: int,
    extra: str = "",
    counterfactual: bool = True,
    generated_share: float = 0.5,
) -> str:
    return f"""
[models]
primary = "scripted:{model}"
[suite]
name = "{spec}"
dev_size = {dev}
heldout_size = {heldout}
split_seed = "mf"
counterfactual = {str(counterfactual).lower()}
generated_share = {generated_share}
[sandbox]
wall_s = 60.0
concurrency = 3
{extra}"""


async def submit(rt: Runtime, lineage: Lineage, text: str) -> tuple[intake.Submitted, Any]:
    parent = lineage.current()
    snapshot = rt.snapshot()  # one policy for the candidate, from its static stage on
    sub = intake.record(
        lineage,
        parent,
        text,
        source=CandidateSource.EXTERNAL,
        proposer_model=None,
        policy=snapshot.policy.patch,
        work_dir=rt.work_dir,
    )
    if not sub.accepted_for_evaluation:
        return sub, None
    verdict: Verdict = await Pipeline(rt, lineage).run(sub.candidate_id, snapshot)
    return sub, verdict


def gate(verdict: Verdict, name: str) -> Any:
    return next(g for g in verdict.gates if g.gate == name)


async def judge_on_seed(
    runtime_factory: Any, folder: Path, model: str, suite: tuple[str, int, int], patch: str
) -> tuple[Verdict, Lineage]:
    """``patch`` submitted on the seed and run to its verdict: the scripted ``model`` (its
    rules file's text), ``suite`` (spec, dev size, held-out size), loose patch limits."""
    rules = folder / "model.toml"
    rules.write_text(model)
    async with runtime_factory(policy(rules, *suite, LOOSE)) as rt:
        lineage = Lineage(rt.store, folder / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, patch)
        assert sub.accepted_for_evaluation, sub.reason
    return verdict, lineage


def assert_judged(verdict: Verdict, lineage: Lineage, honest: bool, at: str) -> None:
    """An honest patch promoted with gate ``at`` passed; a cheat rejected there."""
    result = gate(verdict, at)
    if honest:
        assert verdict.decision == "accept", verdict
        assert lineage.current().name == "v0002"
        assert result.passed, result
    else:
        assert verdict.decision == "reject", verdict
        assert not result.passed, result
        assert lineage.current().name == "v0001"


def set_policy(rt: Runtime, folder: Path, text: str) -> None:
    """Apply ``text`` as the policy in force (what a reload of the file does)."""
    path = folder / "policy.toml"
    path.write_text(text)
    rt.policy.current = load_policy(path)


STRIP_DESCRIPTIONS = """def strip_descriptions(value):
    if isinstance(value, dict):
        return {k: strip_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [strip_descriptions(v) for v in value]
    return value
"""


TRIM_DESCRIPTIONS = """def trim_descriptions(value, top=True):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "description":
                if top:  # a tool's own: its first sentence; a parameter's: dropped
                    out[k] = v.split(". ")[0].rstrip(".") + "."
            else:
                out[k] = trim_descriptions(v, top and k != "parameters")
        return out
    if isinstance(value, list):
        return [trim_descriptions(v, top) for v in value]
    return value
"""


def tools_patch(rationale: str, helpers: str, tools: str, imports: str = "") -> str:
    """A patch on the seed: ``imports`` above ``import json``, ``helpers`` before ``solve``,
    and the tools each request offers computed by the expression ``tools``."""
    head = (
        f"harness.py\n<<<<<<< SEARCH\nimport json\n=======\n{imports}import json\n"
        ">>>>>>> REPLACE\n\n"
        if imports
        else ""
    )
    solve = "def solve(task, ctx):\n    state = State(task)\n"
    return (
        f"Rationale: {rationale}\n\n{head}"
        f"harness.py\n<<<<<<< SEARCH\n{solve}=======\n{helpers}\n\n{solve}>>>>>>> REPLACE\n\n"
        f'harness.py\n<<<<<<< SEARCH\n    tools = task["tools"]\n=======\n    tools = {tools}\n'
        ">>>>>>> REPLACE\n"
    )


def around_answer(helpers: str, before: str = "", after: str = "") -> str:
    """Two edits on the seed (edit protocol text): ``helpers`` defined above ``solve``, and
    lines (indented as ``solve``'s body) ``before`` and ``after`` its
    ``output = answer(task, state)``."""
    answer = "    output = answer(task, state)\n"
    return (
        "harness.py\n<<<<<<< SEARCH\ndef solve(task, ctx):\n    state = State(task)\n=======\n"
        f"{helpers}\n\n\ndef solve(task, ctx):\n    state = State(task)\n>>>>>>> REPLACE\n\n"
        f"harness.py\n<<<<<<< SEARCH\n{answer}=======\n{before}{answer}{after}>>>>>>> REPLACE\n"
    )
