"""The proposals a scripted proposer makes in the end-to-end test, one per cycle."""

from __future__ import annotations

from pathlib import Path

from tests.improve.scripted_world import DEV, HELDOUT, policy_text, positions, solver_script

IMPROVE = """Rationale: say which mode we want, and only claim success when we produced calls.

harness.py
<<<<<<< SEARCH
    state = State(task)
=======
    state = State(task)
    state.messages.insert(0, {"role": "system", "content": "MODE:GOOD"})
>>>>>>> REPLACE

harness.py
<<<<<<< SEARCH
    return {"output": output, "claimed_success": output not in (None, ""), "confidence": None}
=======
    return {"output": output, "claimed_success": bool(output), "confidence": None}
>>>>>>> REPLACE
"""


def _mode(token: str) -> str:
    return f"""harness.py
<<<<<<< SEARCH
    state.messages.insert(0, {{"role": "system", "content": "MODE:GOOD"}})
=======
    state.messages.insert(0, {{"role": "system", "content": "MODE:{token}"}})
>>>>>>> REPLACE
"""


def mode_step(old: str, new: str) -> str:
    """A proposal that moves the harness from mode ``old`` to ``new`` ("" : from the seed,
    which also makes its claims honest, as IMPROVE does)."""
    if not old:
        return IMPROVE.replace("MODE:GOOD", f"MODE:{new}")
    return f"Rationale: mode {new}.\n\n" + _mode(new).replace("MODE:GOOD", f"MODE:{old}", 1)


def mode_steps(*modes: str) -> list[str]:
    """Proposals walking the seed through ``modes`` in turn."""
    return [mode_step(old, new) for old, new in zip(("", *modes), modes, strict=False)]


REGRESS = "Rationale: a plainer system message.\n\n" + _mode("NONE")

TOKEN_BLOWUP = (
    "Rationale: better mode, and ask the model again a few times to be sure.\n\n"
    + _mode("BETTER")
    + """
harness.py
<<<<<<< SEARCH
    run_loop(step, state)
=======
    run_loop(step, state)
    for _ in range(6):
        ctx.model.chat(state.messages[:2], max_tokens=200)
>>>>>>> REPLACE
"""
)

DEAD_CODE = (
    "Rationale: better mode, plus a helper for later.\n\n"
    + _mode("BETTER")
    + """
harness.py
<<<<<<< SEARCH
def solve(task, ctx):
=======
def normalise_calls(calls):
    seen = []
    for call in calls:
        if call not in seen:
            seen.append(call)
    return seen


def solve(task, ctx):
>>>>>>> REPLACE
"""
)

DISHONEST = (
    "Rationale: better mode, and be confident.\n\n"
    + _mode("BETTER")
    + """
harness.py
<<<<<<< SEARCH
    return {"output": output, "claimed_success": bool(output), "confidence": None}
=======
    return {"output": output, "claimed_success": True, "confidence": 1.0}
>>>>>>> REPLACE
"""
)

PANEL_SPLIT = "Rationale: a mode tuned for our primary model.\n\n" + _mode("BETTER2")

UNPARSEABLE = "I looked at the harness and I think it is fine as it is. No changes needed!"

ALL = [IMPROVE, REGRESS, TOKEN_BLOWUP, DEAD_CODE, DISHONEST, PANEL_SPLIT, UNPARSEABLE]


def proposer_script(proposals: list[str]) -> str:
    import json

    out = ['mode = "sequence"', 'after_last = "repeat_last"', ""]
    for text in proposals:
        out += ["[[replies]]", f"content = {json.dumps(text)}", ""]
    return "\n".join(out)


def climbing_policy(tmp: Path, cache_dir: Path, *, then: str | None = None) -> str:
    """A policy whose scripted proposer walks the seed up three accuracy levels (50, 100 and
    100 % of the tasks), so candidates keep coming, some promoted, some rejected (crash and
    outage tests). After the climb: junk and the climb again, round and round (all but the
    first rejected at the static stage), or ``then`` over and over. Big steps, a lenient
    lineage-wide alpha and two fresh blocks of ``HELDOUT`` tasks: the lineage moves (two
    promotions) even when most held-out tests are cut short, each taking a slot (and so a
    share of alpha)."""
    pool = 2 * HELDOUT
    n = max(DEV, pool)
    levels = {"L1": lambda i: i % 2 == 0, "L2": lambda i: True, "L3": lambda i: True}
    solver = tmp / "solver.toml"
    modes = {k: positions(n, f) for k, f in levels.items()}
    solver.write_text(solver_script(cache_dir, modes, pool))
    proposer = tmp / "proposer.toml"
    steps = mode_steps("L1", "L2", "L3")
    if then is None:
        script = proposer_script([*steps, "junk"])
        script = script.replace('after_last = "repeat_last"', 'after_last = "cycle"')
    else:
        script = proposer_script([*steps, then])
    proposer.write_text(script)
    return (
        policy_text(solver, solver, proposer, cycles=0, heldout=pool, alpha=0.45)
        .replace(f'panel = ["scripted:{solver}"]', "panel = []")
        .replace("alpha = 0.45", f"alpha = 0.45\nblock_size = {HELDOUT}")
    )
