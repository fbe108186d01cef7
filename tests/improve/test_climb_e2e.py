"""The daemon climbs on its own: two promotions of its own proposals, each verified on
held-out, the second built on the first, by a proposer that fixes what the failed dev tasks'
transcripts show.

The world (real BFCL tasks, the real sandbox, verifier, gateway and ledger): a scripted
solver model answers a quarter of the tasks with a proper tool call, half by writing the
call as ``<function_call>{json}</function_call>`` text in its reply, and a quarter by
writing that text twice. The seed harness reads only proper tool calls (25 %).

The proposer is an OpenAI-compatible server (the real SDK, the Chat Completions wire
format) that reads the prompt the daemon sends it, the way a capable model would:

* a failed task whose **transcript** shows the model writing calls inside a tag: it writes a
  parser for calls in that tag (the tag's name is taken from the transcript; it appears
  nowhere else in the prompt): 25 % -> 75 %;
* once the harness has that parser, a failed task whose **output** repeats a call: it makes
  the parser drop repeated calls, a patch of the parser's own lines (so it applies only on
  top of the first): 75 % -> 100 %;
* otherwise it has nothing to go on and says so (no patch).

So the climb needs the briefing to carry the failed tasks whole: without their transcripts
(the operation protocol's compact view clips them; ``failures_shown = 0`` drops them) the
proposer writes nothing and the lineage stays at the seed.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import start_daemon
from tests.improve.scripted_world import evaluated, toml_value
from tests.providers.fake_llm_apis import Received, Reply, openai_completion, serve

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SUITE, SEED = "bfcl:simple", "climb"
DEV, HELDOUT, BLOCK = 4, 96, 48  # two fresh blocks: one for each promotion's epoch
TAG = "function_call"  # the solver's habit; only its replies (transcripts) show it
PROPOSER = "openai:gpt-test"

PARSE_CALLS = """Rationale: the failed tasks' transcripts show the model writing its calls as \
<{tag}> JSON in the reply text, which the harness ignores; read those calls too.

harness.py
<<<<<<< SEARCH
    if task["kind"] == "function_call":
        return state.calls
=======
    if task["kind"] == "function_call":
        return state.calls or calls_in_text(state.reply["content"] or "")
>>>>>>> REPLACE

harness.py
<<<<<<< SEARCH
def answer(task, state):
=======
TEXT_CALL = re.compile(r"<{tag}>\\s*(\\{{.*?\\}})\\s*</{tag}>", re.DOTALL)


def calls_in_text(text):
    \"\"\"Calls the model wrote as <{tag}> JSON in its reply instead of as tool calls.\"\"\"
    calls = [json.loads(found) for found in TEXT_CALL.findall(text)]
    return [{{"name": c["name"], "arguments": c["arguments"]}} for c in calls]


def answer(task, state):
>>>>>>> REPLACE
"""

DEDUPLICATE = """Rationale: the failed tasks' outputs repeat the same call (the model wrote it \
twice); keep each call once.

harness.py
<<<<<<< SEARCH
    return [{"name": c["name"], "arguments": c["arguments"]} for c in calls]
=======
    unique = []
    for c in calls:
        call = {"name": c["name"], "arguments": c["arguments"]}
        if call not in unique:
            unique.append(call)
    return unique
>>>>>>> REPLACE
"""

NOTHING = "Rationale: nothing in what I was shown says what goes wrong; no change."

# The stepping-stone world's careless proposer: its parser comes with eight more model calls
# per step whose answers are never used (2.25 times the parent's tokens per solved task,
# past the tokens gate's 1.5: the gate stops it on held-out).
TWICE = """    for _ in range(8):  # sure?
        ctx.model.chat(state.messages, tools=tools or None, max_tokens=MAX_TOKENS)"""
ASK_TWICE = f"""
harness.py
<<<<<<< SEARCH
    reply = ctx.model.chat(state.messages, tools=tools or None, max_tokens=MAX_TOKENS)
=======
    reply = ctx.model.chat(state.messages, tools=tools or None, max_tokens=MAX_TOKENS)
{TWICE}
>>>>>>> REPLACE
"""
ASK_ONCE = f"""Rationale: the harness asks the model nine times per step and uses only the
first answer; ask once.

harness.py
<<<<<<< SEARCH
    reply = ctx.model.chat(state.messages, tools=tools or None, max_tokens=MAX_TOKENS)
{TWICE}
=======
    reply = ctx.model.chat(state.messages, tools=tools or None, max_tokens=MAX_TOKENS)
>>>>>>> REPLACE
"""


def _solver(cache_dir: Path, path: Path, *, twice: bool = True) -> None:
    """By position in its split: 0 mod 4 a tool call, 1-2 the call as tagged text, 3 the
    tagged text twice (``twice``; else once)."""
    # The tasks as the daemon evaluates them: held-out ones are counterfactual copies.
    suite, splits = evaluated(cache_dir, SUITE, SEED, DEV, HELDOUT)
    lines = ['mode = "rules"', ""]
    for ids in (splits.dev, splits.heldout):
        for pos, task_id in enumerate(ids):
            question = [m.content for m in suite.task(task_id).prompt if m.role == "user"][-1]
            calls = [
                {"name": c["name"], "arguments": c["arguments"]}
                for c in suite.reference_output(task_id)
            ]
            lines += ["[[rules]]", f"match = {json.dumps('^' + re.escape(question or '') + '$')}"]
            if pos % 4 == 0:
                lines.append(f"tool_calls = {toml_value(calls)}")
            else:
                text = "".join(f"<{TAG}>{json.dumps(c)}</{TAG}>" for c in calls)
                said = f"I will call it: {text}" + (
                    f" To be sure: {text}" if twice and pos % 4 == 3 else ""
                )
                lines.append(f"content = {json.dumps(said)}")
            lines.append("")
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    path.write_text("\n".join(lines))


def _section(prompt: str, title: str) -> str:
    after = prompt.split(f"# {title}\n", 1)
    return after[1].split("\n# ", 1)[0] if len(after) == 2 else ""


def propose(prompt: str, careless: bool = False) -> str:
    """What the reading proposer writes for ``prompt`` (the daemon's user message);
    ``careless``: its parser comes with a second model call, which it removes once it sees
    that call in the source it is given."""
    source = _section(prompt, "Harness source")
    failures = _section(prompt, "Failed dev tasks")
    tags: set[str] = set()
    repeated = False
    for line in failures.splitlines():
        head, _, rest = line.strip().partition(": ")
        if head == "transcript":
            try:
                step = json.loads(rest)
            except json.JSONDecodeError:
                continue  # a clipped step: not readable
            reply = (step.get("reply") or {}).get("content") or ""
            tags.update(re.findall(r"<(\w+)>\s*\{.*?\}\s*</\1>", reply))
        elif head == "harness output":
            try:
                output = json.loads(rest)
            except json.JSONDecodeError:
                continue
            if isinstance(output, list):
                repeated |= any(c in output[:i] for i, c in enumerate(output))
    if careless and TWICE in source:
        return ASK_ONCE
    if "def calls_in_text" not in source and len(tags) == 1:
        return PARSE_CALLS.format(tag=tags.pop()) + (ASK_TWICE if careless else "")
    if "def calls_in_text" in source and repeated:
        return DEDUPLICATE
    return NOTHING


def _prompt(request: Received) -> str:
    messages = request.body["messages"] if isinstance(request.body, dict) else []
    return "\n".join(m.get("content") or "" for m in messages if m.get("role") == "user")


def _answer(request: Received, careless: bool = False) -> Reply:
    text = propose(_prompt(request), careless)
    return Reply(200, openai_completion(content=text, prompt_tokens=2000, completion_tokens=300))


def _policy(solver: Path, *, failures_shown: int, cycles: int, search: str = "thompson") -> str:
    return f"""
[models]
primary = "scripted:{solver}"
panel = []

[proposer]
model = "{PROPOSER}"
protocol = "text"
samples = 1
failures_shown = {failures_shown}
search = "{search}"

[suite]
name = "{SUITE}"
dev_size = {DEV}
heldout_size = {HELDOUT}
split_seed = "{SEED}"

[sandbox]
wall_s = 60.0
concurrency = 3

[acceptance]
alpha = 0.2
block_size = {BLOCK}

[loop]
cycle_pause_s = 0.0
max_cycles = {cycles}

[retry]
max_retries = 0
timeout_s = 30.0
"""


def _decided(daemon: Any, n: int, timeout: float, *, or_promoted: bool) -> list[dict[str, Any]]:
    """The candidates once ``n`` are decided (``or_promoted``: or one is accepted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with daemon.client() as c:
            lineage = c.call("lineage", candidates=50)
        cands = sorted(lineage["candidates"], key=lambda x: x["id"])
        states = [x["state"] for x in cands]
        if sum(s in ("accepted", "rejected") for s in states) >= n or (
            or_promoted and "accepted" in states
        ):
            return cands
        assert daemon.proc.poll() is None, daemon.log.read_text()[-3000:]
        time.sleep(1.0)
    raise AssertionError(f"fewer than {n} candidates decided:\n{daemon.log.read_text()[-3000:]}")


def _run(
    tmp_path: Path, asset_cache: Path, failures_shown: int, *, stepping: bool = False
) -> tuple[Any, list[Any], Any]:
    """The daemon on the world until two candidates are decided (``stepping``: the careless
    proposer and no repeated calls, until a promotion or four decided)."""
    solver = tmp_path / "solver.toml"
    _solver(asset_cache, solver, twice=not stepping)
    cycles = 4 if stepping else 2
    with serve([], answer=lambda r: _answer(r, careless=stepping)) as api:
        env = {
            "HARNESSD_OPENAI__BASE_URL": f"{api.url}/v1",
            "OPENAI_API_KEY": "sk-test-climb-0000000000000000",
        }
        policy = _policy(solver, failures_shown=failures_shown, cycles=cycles)
        daemon = start_daemon(tmp_path, asset_cache, policy, env=env)
        try:
            cands = _decided(daemon, cycles, timeout=1700, or_promoted=stepping)
            with daemon.client() as c:
                lineage = c.call("lineage", candidates=50)
                shown = [c.call("show", ref=f"c{x['id']}") for x in cands]
        finally:
            daemon.stop()
        prompts = [_prompt(r) for r in api.received if r.method == "POST"]
    return lineage, shown, prompts


@pytest.mark.timeout(1800)  # minutes idle; far longer on a loaded machine
def test_the_daemon_climbs_two_promotions_of_its_own_proposals(
    tmp_path: Path, asset_cache: Path
) -> None:
    lineage, shown, prompts = _run(tmp_path, asset_cache, failures_shown=4)
    assert [c["state"] for c in shown] == ["accepted", "accepted"], [
        (c["state"], c.get("verdict", {}) and c["verdict"]["reason"]) for c in shown
    ]
    assert lineage["current"] == "v0003"
    first, second = shown
    # Both its own (the proposer's), each verified on held-out, each against the live
    # version of its time: the second on v0002, which the first made.
    assert {c["source"] for c in shown} == {"proposer"}
    assert (first["parent"], second["parent"]) == ("v0001", "v0002")
    for cand in shown:
        assert cand["verdict"]["decision"] == "accept"
        heldout = [r for r in cand["reports"] if r["split"] == "heldout"]
        assert heldout and heldout[0]["summary"]["n"] > 0, cand["reports"]
    assert f"<{TAG}>" in first["patch"] and "def calls_in_text" in first["patch"]
    # The second changes the first one's parser (its lines are context, not additions).
    assert "+            unique.append(call)" in second["patch"]
    assert " def calls_in_text(text):" in second["patch"]
    assert "+def calls_in_text" not in second["patch"]
    # What the proposer read: the tag only inside the failed tasks' transcripts.
    assert len(prompts) == 2
    assert f"<{TAG}>" in _section(prompts[0], "Failed dev tasks")
    assert f"<{TAG}>" not in _section(prompts[0], "Harness source")
    versions = {v["name"]: v for v in lineage["versions"]}
    assert versions["v0003"]["depth"] == 2 and versions["v0003"]["parent_id"] == 2


@pytest.mark.timeout(900)
def test_without_the_failures_in_its_briefing_the_proposer_has_nothing_to_go_on(
    tmp_path: Path, asset_cache: Path
) -> None:
    """The twin: the same world and proposer, the failed tasks left out of the briefing
    (``failures_shown = 0``): no patch, no promotion."""
    lineage, shown, prompts = _run(tmp_path, asset_cache, failures_shown=0)
    assert lineage["current"] == "v0001"
    assert [(c["state"], c["stage"]) for c in shown] == [("rejected", "parse")] * 2
    assert all(f"<{TAG}>" not in p for p in prompts)


@pytest.mark.timeout(1800)
def test_a_near_miss_becomes_a_stepping_stone(tmp_path: Path, asset_cache: Path) -> None:
    """Search beyond the live version: c1 parses the calls (all dev tasks solved) but asks
    the model twice, so the tokens gate stops it on held-out: not promoted. The next
    proposal, drawn by Thompson sampling from dev results, builds on c1 (its source is what
    the proposer is shown), removes the second call and is promoted; its held-out test
    compared it with the live version v0001, not with c1."""
    lineage, shown, prompts = _run(tmp_path, asset_cache, failures_shown=4, stepping=True)
    first = shown[0]
    assert (first["state"], first["parent"], first["base"]) == ("rejected", "v0001", None)
    failed = [
        g["gate"]
        for g in first["verdict"]["gates"]
        if g["enabled"] and not g["passed"] and not g.get("skipped")
    ]
    assert first["verdict"]["stage"] == "heldout" and "tokens" in failed, first["verdict"]
    winner = next((c for c in shown if c["state"] == "accepted"), None)
    assert winner is not None, [(c["name"], c["state"], c["base"]) for c in shown]
    assert (winner["parent"], winner["base"]) == ("v0001", first["name"])
    assert "+def calls_in_text(text):" in winner["patch"] and "sure?" not in winner["patch"]
    assert lineage["current"] == "v0002"
    # The prompt it answered: c1's tree, and of c1's held-out test one bit.
    asked = next(p for p in prompts if TWICE in _section(p, "Harness source"))
    archive = _section(asked, "Earlier proposals and what came of them")
    # The scripted proposer may send c1's patch again before it sees c1's verdict; the
    # archive then folds the repeat into c1's entry ("proposer, proposed 2 times").
    entry = rf"{first['name']} on v0001 \(proposer(, proposed \d+ times)?\): not promoted"
    assert re.search(entry, archive), archive
    assert "tokens gate" not in archive and "heldout" not in archive
