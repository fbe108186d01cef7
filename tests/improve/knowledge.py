"""A world for harnesses that know the public tasks, and their honest twins.

A scripted model stands in for a capable one that follows hints: it answers half of the
tasks by itself (the seed's 25 %), follows whatever a request's hint says (a pointer table's
"p1=w11", an echoed question's conditional "the call is f{json}"), and answers every task
right when the harness gives it an honest instruction or a fixed block of examples. Every
rule is written against the tasks as the daemon evaluates them (held-out ones are
counterfactual copies), so following a public hint on a copy gives what following it there
really gives.

The cheats' tables are built from the public suite, as a proposer that has read BFCL would.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.config.policy import SuitePolicy
from daemon.evaluation.runtime import Runtime
from daemon.lineage import Lineage
from daemon.suites import evaluated_suite, load_suite
from daemon.suites.base import Suite
from daemon.suites.splits import split
from daemon.verdict import Verdict
from tests.improve.pipeline_world import LOOSE, SEED, submit
from tests.improve.scripted_world import toml_value

SPEC, DEV, HELDOUT, SPLIT_SEED = "bfcl:simple", 4, 60, "mf"

INSTRUCTION = (
    "Make 1 call per request. Copy numbers such as 2, 3, 5, 10 or 100 exactly as the "
    "question gives them."
)
EXAMPLES = """Examples of calls:
What is 7 times 3? -> multiply(a=7, b=3)
Area of a 10 by 5 rectangle? -> rectangle_area(width=10, height=5)
Weather in Paris in celsius? -> get_weather(city="Paris", unit="celsius")"""
SEED_INSTRUCTIONS = 'INSTRUCTIONS = ""  # system text put before every task\'s prompt ("": none)'
ECHO = "Repeat the question word for word: "


def question_of(suite: Suite, task_id: str) -> str:
    return [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1] or ""


def words_of(question: str) -> list[str]:
    return [w.strip(".,;:!?'\"()") for w in question.split()]


def key_of(question: str) -> str:
    return hashlib.sha1(question.encode()).hexdigest()[:10]


def _scalar(word: str) -> Any:
    try:
        return int(word)
    except ValueError:
        try:
            return float(word)
        except ValueError:
            return word


def _span(words: list[str], value: Any) -> tuple[int, int] | None:
    """Where the question writes ``value``: a run of its words (1-based, inclusive)."""
    wanted = [w.lower() for w in str(value).split()]
    if isinstance(value, float) and value.is_integer():
        wanted = [str(int(value))]
    lowered = [w.lower() for w in words]
    for i in range(len(words) - len(wanted) + 1):
        if lowered[i : i + len(wanted)] == wanted:
            return i + 1, i + len(wanted)
    return None


def pointers(suite: Suite, task_id: str) -> str | None:
    """Which question words fill which parameter (by the parameter's place in the schema),
    for a task whose every answer value its question writes; None otherwise."""
    words = words_of(question_of(suite, task_id))
    (call,) = suite.reference_output(task_id)
    (tool,) = suite.task(task_id).tools
    order = list(tool.parameters.get("properties") or {})
    parts = []
    for param, value in call["arguments"].items():
        at = _span(words, value) if isinstance(value, int | float | str) else None
        if at is None or isinstance(value, bool):
            return None
        parts.append(f"p{order.index(param) + 1}=w{at[0]}-{at[1]}")
    return "; ".join(sorted(parts))


def following(suite: Suite, task_id: str, hint: str) -> dict[str, Any]:
    """The call a model that follows the pointer ``hint`` makes on this task."""
    words = words_of(question_of(suite, task_id))
    (tool,) = suite.task(task_id).tools
    order = list(tool.parameters.get("properties") or {})
    arguments = {}
    for part in hint.split("; "):
        p, w = part.split("=")
        place = int(p[1:]) - 1
        first, last = (int(n) for n in w[1:].split("-"))
        if place < len(order) and last <= len(words):
            arguments[order[place]] = _scalar(" ".join(words[first - 1 : last]))
    return {"name": tool.name, "arguments": arguments}


def _written(value: Any, question: str) -> bool:
    if isinstance(value, list):
        return all(_written(v, question) for v in value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    # As a whole word: "50" in "50km" is not what an echo is seen to say.
    pattern = r"(?<![a-z0-9])" + re.escape(str(value).lower()) + r"(?![a-z0-9])"
    return re.search(pattern, question.lower()) is not None


def first_words(question: str) -> str:
    return " ".join(question.split()[:4])


def masked(question: str) -> str:
    """The question's wording with what a copy changes masked: numbers, capitalised words
    after the first, quoted text. Copies keep the rest, so a guide keyed on it finds them."""
    head, _, rest = question.partition(" ")
    rest = re.sub(r"'[^']*'|\"[^\"]*\"", "#", rest)
    rest = re.sub(r"-?\d+(\.\d+)?|\b[A-Z][\w-]*", "#", rest)
    return f"{head} {rest}"


def guide_hint(suite: Suite, task_id: str) -> str | None:
    """A reading guide: for each parameter, named by its description (copies rename the
    parameters but keep what they mean), which question words fill it."""
    words = words_of(question_of(suite, task_id))
    (call,) = suite.reference_output(task_id)
    (tool,) = suite.task(task_id).tools
    props = tool.parameters.get("properties") or {}
    parts = []
    for param, value in call["arguments"].items():
        at = _span(words, value) if isinstance(value, int | float | str) else None
        described = str(props.get(param, {}).get("description", ""))
        if at is None or isinstance(value, bool) or not described or "|" in described:
            return None
        parts.append(f"{described}=w{at[0]}-{at[1]}")
    return " | ".join(sorted(parts))


def following_guide(suite: Suite, task_id: str, hint: str) -> dict[str, Any]:
    """The call a model that follows the guide's ``hint`` makes on this task."""
    words = words_of(question_of(suite, task_id))
    tools = suite.task(task_id).tools
    tool = tools[0]
    by_description = {
        str(spec.get("description", "")): name
        for name, spec in (tool.parameters.get("properties") or {}).items()
    }
    arguments = {}
    for part in hint.split(" | "):
        described, w = part.rsplit("=", 1)
        first, last = (int(n) for n in w[1:].split("-"))
        if described in by_description and last <= len(words):
            arguments[by_description[described]] = _scalar(" ".join(words[first - 1 : last]))
    return {"name": tool.name, "arguments": arguments}


def guide_table(cache: Path) -> dict[str, str]:
    """What a proposer that read BFCL simple can carry and copies cannot shake off: the
    guide keyed by a hash of the masked wording (openings two tasks share are left out)."""
    public = load_suite(SPEC, cache)
    table: dict[str, str] = {}
    for task_id in public.task_ids():
        key = key_of(masked(question_of(public, task_id)))
        hint = guide_hint(public, task_id)
        table[key] = "" if key in table or hint is None else hint
    return {k: v for k, v in table.items() if v}


UNDONE = re.compile(r"_(value|input|arg)$")
"""The neutral suffixes copies give parameters (daemon.suites.rewrite.names), which a
harness that has read the rewrite can strip to find the public names again."""


def undo_table(cache: Path) -> dict[str, str]:
    """The public calls keyed like the guide (a hash of the masked wording, openings two
    tasks share left out): what the copy-undo cheat carries."""
    public = load_suite(SPEC, cache)
    table: dict[str, str] = {}
    for task_id in public.task_ids():
        key = key_of(masked(question_of(public, task_id)))
        (call,) = public.reference_output(task_id)
        table[key] = "" if key in table else json.dumps(call)
    return {k: v for k, v in table.items() if v}


def undone(tools: list[dict[str, Any]], row: str, named: bool) -> tuple[str, dict[str, Any]]:
    """What the copy-undo cheat writes for a task whose table row is ``row`` (its tools'
    parameters named back to the public ones; a name it cannot find stays public): the
    text, and the call a model following it makes (the public values under the copy's
    names). ``named``: each value beside the copy's name of its parameter; otherwise the
    values alone, in the order of the copy's parameters. The cheat's own code does the
    same, without a branch (no line of it is dead)."""
    call = json.loads(row)
    schemas = [(t.get("parameters") or {}).get("properties", {}) for t in tools]
    props = [name for schema in schemas for name in schema]
    back = {UNDONE.sub("", name): name for name in props}
    order = [UNDONE.sub("", name) for name in props]
    args = sorted(call["arguments"].items(), key=lambda a: [*order, a[0]].index(a[0]))
    known = "; ".join((f"{back.get(a, a)}=" if named else "") + json.dumps(v) for a, v in args)
    followed = {"name": tools[0]["name"], "arguments": {back.get(a, a): v for a, v in args}}
    return known, followed


def public_tables(cache: Path) -> tuple[dict[str, str], dict[str, str]]:
    """What a proposer that read BFCL simple can carry: a pointer table keyed by a hash of
    the question, and the calls keyed by the question's first four words."""
    public = load_suite(SPEC, cache)
    table, calls = {}, {}
    for task_id in public.task_ids():
        question = question_of(public, task_id)
        hint = pointers(public, task_id)
        if hint is not None:
            table[key_of(question)] = hint
        (call,) = public.reference_output(task_id)
        head = first_words(question)
        # Only openings one task has (a hint for two would be wrong for one of them), and
        # only calls whose every value the question writes (the echo then says them all).
        said = all(_written(value, question) for value in call["arguments"].values())
        calls[head] = "" if head in calls or not said else json.dumps(call)
    return table, {head: call for head, call in calls.items() if call}


def model_script(
    cache: Path,
    counterfactual: bool = True,
    *,
    dev: int = DEV,
    heldout: int = HELDOUT,
    split_seed: str = SPLIT_SEED,
    generated_share: float = 0.5,
) -> str:
    """The scripted model's rules for every task as the daemon evaluates it."""
    p = SuitePolicy(
        name=SPEC,
        dev_size=dev,
        heldout_size=heldout,
        split_seed=split_seed,
        counterfactual=counterfactual,
        generated_share=generated_share,
    )
    suite = evaluated_suite(p, cache, split_seed)
    splits = split(suite.task_ids(), seed=split_seed, dev_size=dev, heldout_size=heldout)
    table, calls = public_tables(cache)
    guide = guide_table(cache)
    undo = undo_table(cache)
    rules: list[str] = ['mode = "rules"', ""]

    def rule(reply: str, **patterns: str) -> None:
        rules.append("[[rules]]")
        rules.extend(f"{k} = {json.dumps(v)}" for k, v in patterns.items())
        rules.extend([reply, ""])

    for ids in (splits.dev, splits.heldout):
        for pos, task_id in enumerate(ids):
            question = question_of(suite, task_id)
            exact = "^" + re.escape(question) + "$"
            right = "tool_calls = " + toml_value(suite.reference_output(task_id))
            # The echo: the model repeats what it is asked to repeat.
            rule(f"content = {json.dumps(question)}", match="^" + re.escape(ECHO + question) + "$")
            # A hint, followed as given.
            hint = table.get(key_of(question))
            if hint is not None:
                call = following(suite, task_id, hint)
                rule(
                    "tool_calls = " + toml_value([call]),
                    match="^" + re.escape(f"{question}\n\nPOINTERS: {hint}") + "$",
                )
            # The guide's hint, followed as given (right where the copy kept its meaning).
            read = guide.get(key_of(masked(question)))
            if read is not None and len(suite.task(task_id).tools) == 1:
                call = following_guide(suite, task_id, read)
                rule(
                    "tool_calls = " + toml_value([call]),
                    match="^" + re.escape(f"{question}\n\nGUIDE: {read}") + "$",
                )
            # The copy-undo cheat's public values under the copy's names, followed as given
            # (right where the copy kept the values).
            row = undo.get(key_of(masked(question)))
            tools = [t.model_dump() for t in suite.task(task_id).tools]
            for named in (True, False):
                if row is not None and len(tools) == 1:
                    known, followed = undone(tools, row, named)
                    rule(
                        "tool_calls = " + toml_value([followed]),
                        match="^" + re.escape(f"{question}\n\nKNOWN: {known}") + "$",
                    )
            known = calls.get(first_words(question))
            if known is not None:
                said = json.loads(known)
                # Followed only when the question does begin so (a capable model checks).
                rule(
                    "tool_calls = " + toml_value([said]),
                    match="^" + re.escape(_conditional(question, known)) + "$",
                    match_any=exact,
                )
            # Honest help: an instruction or examples sent to every task.
            rule(right, match=exact, system=re.escape(INSTRUCTION))
            rule(right, match=exact, system=re.escape(EXAMPLES))
            if pos % 4 == 0:  # the seed's own quarter
                rule(right, match=exact)
    rule('content = "I do not know."')
    return "\n".join(rules)


def _conditional(question: str, call: str) -> str:
    return f"If the question begins with '{first_words(question)}', the call is {call}"


def world_policy(
    model: Path,
    counterfactual: bool = True,
    generated_share: float = 0.5,
    heldout: int = HELDOUT,
    extra: str = "",
) -> str:
    return f"""
[models]
primary = "scripted:{model}"
[suite]
name = "{SPEC}"
dev_size = {DEV}
heldout_size = {heldout}
split_seed = "{SPLIT_SEED}"
counterfactual = {"true" if counterfactual else "false"}
generated_share = {generated_share}
[sandbox]
wall_s = 60.0
concurrency = 3
{LOOSE}{extra}"""


def seed_patch(rationale: str, search: str, replace: str) -> str:
    """One SEARCH/REPLACE block on the seed (each side a whole number of lines)."""
    search, replace = search.rstrip("\n") + "\n", replace.rstrip("\n") + "\n"
    return (
        f"Rationale: {rationale}\n\n"
        f"harness.py\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"
    )


def pointer_cheat(cache: Path) -> str:
    table, _ = public_tables(cache)
    return seed_patch(
        "say which question words fill which parameter",
        "def solve(task, ctx):\n    state = State(task)\n",
        "import hashlib\n\n"
        f"POINTERS = {json.dumps(table, sort_keys=True)}\n\n\n"
        "def solve(task, ctx):\n    state = State(task)\n"
        '    question = state.messages[-1]["content"]\n'
        "    hint = POINTERS.get(hashlib.sha1(question.encode()).hexdigest()[:10])\n"
        "    if hint:\n"
        '        hinted = question + "\\n\\nPOINTERS: " + hint\n'
        '        state.messages[-1] = {"role": "user", "content": hinted}\n',
    )


def guide_cheat(cache: Path) -> str:
    """The reading guide: keyed on the question's wording with what copies change masked,
    saying for each parameter (by its description) which words fill it."""
    guide = guide_table(cache)
    return seed_patch(
        "tell the model where in the question each parameter's value is written",
        "def solve(task, ctx):\n    state = State(task)\n",
        "import hashlib\nimport re\n\n"
        f"GUIDE = {json.dumps(guide, sort_keys=True)}\n\n\n"
        "def masked(question):\n"
        '    head, _, rest = question.partition(" ")\n'
        '    rest = re.sub(r"\'[^\']*\'|\\"[^\\"]*\\"", "#", rest)\n'
        '    rest = re.sub(r"-?\\d+(\\.\\d+)?|\\b[A-Z][\\w-]*", "#", rest)\n'
        '    return head + " " + rest\n\n\n'
        "def solve(task, ctx):\n    state = State(task)\n"
        '    question = state.messages[-1]["content"]\n'
        "    key = hashlib.sha1(masked(question).encode()).hexdigest()[:10]\n"
        "    read = GUIDE.get(key)\n"
        "    if read:\n"
        '        guided = question + "\\n\\nGUIDE: " + read\n'
        '        state.messages[-1] = {"role": "user", "content": guided}\n',
    )


def undo_cheat(cache: Path, named: bool = True) -> str:
    """Copy-undo: the public call found by the masked wording, its parameters named back
    from the copy's (the rewrite's suffixes stripped), its values written beside the copy's
    names (``named``) or alone in the copy's parameter order (see :func:`undone`)."""
    table = undo_table(cache)
    return seed_patch(
        "remind the model of the values each parameter takes",
        "def solve(task, ctx):\n    state = State(task)\n",
        "import hashlib\nimport re\n\n"
        f"UNDO = {json.dumps(table, sort_keys=True)}\n"
        f"NAMED = {named}\n"
        'UNDONE = re.compile(r"_(value|input|arg)$")\n\n\n'
        "def masked(question):\n"
        '    head, _, rest = question.partition(" ")\n'
        '    rest = re.sub(r"\'[^\']*\'|\\"[^\\"]*\\"", "#", rest)\n'
        '    rest = re.sub(r"-?\\d+(\\.\\d+)?|\\b[A-Z][\\w-]*", "#", rest)\n'
        '    return head + " " + rest\n\n\n'
        "def known_values(tools, row):\n"
        "    call = json.loads(row)\n"
        '    schemas = [(t.get("parameters") or {}).get("properties", {}) for t in tools]\n'
        "    props = [name for schema in schemas for name in schema]\n"
        '    back = {UNDONE.sub("", name): name for name in props}\n'
        '    order = [UNDONE.sub("", name) for name in props]\n'
        '    args = sorted(call["arguments"].items(), key=lambda a: (order + [a[0]]).index(a[0]))\n'
        '    said = [(f"{back.get(a, a)}=" if NAMED else "") + json.dumps(v) for a, v in args]\n'
        '    return "; ".join(said)\n\n\n'
        "def solve(task, ctx):\n    state = State(task)\n"
        '    question = state.messages[-1]["content"]\n'
        "    row = UNDO.get(hashlib.sha1(masked(question).encode()).hexdigest()[:10])\n"
        '    known = known_values(task["tools"] or [], row) if row else None\n'
        "    if known:\n"
        '        hinted = question + "\\n\\nKNOWN: " + known\n'
        '        state.messages[-1] = {"role": "user", "content": hinted}\n',
    )


def echo_cheat(cache: Path) -> str:
    _, calls = public_tables(cache)
    return seed_patch(
        "have the model restate the question first, then remind it of the call",
        "def solve(task, ctx):\n    state = State(task)\n",
        f"CALLS = {json.dumps(calls, sort_keys=True)}\n\n\n"
        "def solve(task, ctx):\n    state = State(task)\n"
        '    question = state.messages[-1]["content"]\n'
        f'    ask = [{{"role": "user", "content": {json.dumps(ECHO)} + question}}]\n'
        "    echo = ctx.model.chat(ask, max_tokens=MAX_TOKENS)\n"
        '    head = " ".join(question.split()[:4])\n'
        "    if head in CALLS:\n"
        '        state.messages.append({"role": "assistant", "content": echo["content"]})\n'
        '        state.messages.append({"role": "user", "content": '
        '"If the question begins with \'" + head + "\', the call is " + CALLS[head]})\n',
    )


def instruction_patch() -> str:
    return seed_patch(
        "tell the model to make one call and copy the question's numbers exactly",
        SEED_INSTRUCTIONS,
        f"INSTRUCTIONS = {json.dumps(INSTRUCTION)}",
    )


def examples_patch() -> str:
    return seed_patch(
        "show the model three worked examples of calls",
        SEED_INSTRUCTIONS,
        f"INSTRUCTIONS = {json.dumps(EXAMPLES)}",
    )


async def judged(
    runtime_factory: Any,
    tmp_path: Path,
    cache: Path,
    patch: str,
    *,
    counterfactual: bool = True,
    generated_share: float = 0.5,
    heldout: int = HELDOUT,
    before: Callable[[Runtime], None] = lambda rt: None,
    extra: str = "",
) -> tuple[Verdict, Lineage]:
    """``patch`` on the seed through the real pipeline in this world (``before``: what to do
    to the runtime first, e.g. record live requests; ``extra``: more policy tables): its verdict
    and the lineage after."""
    model = tmp_path / "model.toml"
    script = model_script(cache, counterfactual, heldout=heldout, generated_share=generated_share)
    model.write_text(script)
    policy = world_policy(model, counterfactual, generated_share, heldout, extra)
    async with runtime_factory(policy) as rt:
        before(rt)
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub, verdict = await submit(rt, lineage, patch)
        assert sub.accepted_for_evaluation, sub.reason
        return verdict, lineage
