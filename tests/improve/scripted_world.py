"""A deterministic world for end-to-end loop tests, built on real BFCL tasks.

Scripted solver models answer a task correctly only when the harness's system message
carries a mode token whose task set includes that task; otherwise they make no call. So
what a patch changes in the harness decides the measured accuracy, exactly and
repeatably, while the verifier, splits, sandbox, gateway and ledger are all the real ones.

Task sets by position in their split: ``GOOD`` = even positions (50 %), ``BETTER`` =
positions not 7 mod 8 (87.5 %). Model A treats ``BETTER2`` like ``BETTER``; model B knows no
``BETTER2`` (0 %), which makes a patch that helps one panel model and hurts the other.

The held-out pool is small (``HELDOUT`` tasks) so tests stay quick; tests whose lineage must
move several times take a larger pool (``heldout=``) and a lenient lineage-wide ``alpha``
(the statistics are tested on their own; these tests are about the daemon).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from daemon.config.policy import SuitePolicy
from daemon.suites import Suite, evaluated_suite
from daemon.suites.splits import Splits, split

SUITE = "bfcl:simple"
SEED = "e2e"
DEV, HELDOUT = 4, 24


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def _question(task_prompt: list[Any]) -> str:
    return [m.content for m in task_prompt if m.role == "user"][-1] or ""


def evaluated(
    cache_dir: Path, name: str, seed: str, dev: int, heldout: int
) -> tuple[Suite, Splits]:
    """The suite and its splits as the daemon evaluates them (held-out tasks are their
    counterfactual copies): what a scripted solver must answer."""
    p = SuitePolicy(name=name, dev_size=dev, heldout_size=heldout, split_seed=seed)
    suite = evaluated_suite(p, cache_dir, seed)
    return suite, split(suite.task_ids(), seed=seed, dev_size=dev, heldout_size=heldout)


def solver_script(cache_dir: Path, modes: dict[str, set[int]], heldout: int = HELDOUT) -> str:
    """``modes``: token -> positions it makes correct (by position within its split)."""
    suite, splits = evaluated(cache_dir, SUITE, SEED, DEV, heldout)
    lines = ['mode = "rules"', ""]
    for ids in (splits.dev, splits.heldout):
        lines += mode_rules(suite, ids, modes)
    lines += ["[[rules]]", 'content = "I do not know."', ""]
    return "\n".join(lines)


def mode_rules(suite: Suite, ids: list[str], modes: dict[str, set[int]]) -> list[str]:
    """The rules answering ``suite``'s tasks ``ids`` right under the mode tokens whose
    positions (in ``ids``) include theirs."""
    lines: list[str] = []
    for pos, task_id in enumerate(ids):
        tokens = [t for t, positions in modes.items() if pos in positions]
        if not tokens:
            continue
        question = _question(suite.task(task_id).prompt)
        calls = suite.reference_output(task_id)
        lines += [
            "[[rules]]",
            f"match = {json.dumps('^' + re.escape(question) + '$')}",
            f"system = {json.dumps('MODE:(' + '|'.join(tokens) + ')$')}",
            "tool_calls = "
            + toml_value([{"name": c["name"], "arguments": c["arguments"]} for c in calls]),
            "",
        ]
    return lines


def positions(n: int, keep: Any) -> set[int]:
    return {i for i in range(n) if keep(i)}


def world(tmp: Path, cache_dir: Path, heldout: int = HELDOUT) -> dict[str, Path]:
    n = max(DEV, heldout)
    good = positions(n, lambda i: i % 2 == 0)
    better = positions(n, lambda i: i % 8 != 7)
    a = tmp / "solver_a.toml"
    modes_a = {"GOOD": good, "BETTER": better, "BETTER2": better}
    a.write_text(solver_script(cache_dir, modes_a, heldout))
    b = tmp / "solver_b.toml"
    b.write_text(solver_script(cache_dir, {"GOOD": good, "BETTER": better}, heldout))
    return {"a": a, "b": b}


def policy_text(
    a: Path,
    b: Path,
    proposer: Path,
    *,
    cycles: int,
    heldout: int = HELDOUT,
    alpha: float | None = None,
) -> str:
    acceptance = "" if alpha is None else f"\n[acceptance]\nalpha = {alpha}\n"
    return f"""
[models]
primary = "scripted:{a}"
panel = ["scripted:{b}"]

[proposer]
model = "scripted:{proposer}"
# The scripts hold one reply per cycle.
samples = 1
# The scripts' patches are written against the live version.
search = "live"

[suite]
name = "{SUITE}"
dev_size = {DEV}
heldout_size = {heldout}
split_seed = "{SEED}"

[sandbox]
wall_s = 60.0
concurrency = 3

[pipeline]
# Off here so the held-out gates, not the dev screen, judge the regression.
dev_max_regression = 1.0

[loop]
cycle_pause_s = 0.0
max_cycles = {cycles}
{acceptance}"""


def proposer_policy(tmp: Path, cache_dir: Path, proposer: str, *, cycles: int = 1) -> str:
    """One scripted solver (half the tasks right with ``MODE:GOOD``, no panel) and the
    proposer model ``proposer``: for tests about the proposer's calls."""
    n = max(DEV, HELDOUT)
    solver = tmp / "solver.toml"
    solver.write_text(solver_script(cache_dir, {"GOOD": positions(n, lambda i: i % 2 == 0)}))
    policy = (
        policy_text(solver, solver, solver, cycles=cycles)
        .replace(f'panel = ["scripted:{solver}"]', "panel = []")
        .replace(f'[proposer]\nmodel = "scripted:{solver}"', f'[proposer]\nmodel = "{proposer}"')
    )
    assert f'model = "{proposer}"' in policy
    return policy
