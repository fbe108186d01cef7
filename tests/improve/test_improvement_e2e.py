"""The improvement loop end to end, in a real daemon, with a scripted proposer.

The proposer submits, in turn: a real improvement, a regression, a token blow-up, a patch
adding never-run code, one that claims success it does not have, one that helps one panel
model and hurts another, and an unparseable reply. Only the first may be promoted; each
other must be rejected by the right gate, with the measured value in its verdict. The
held-out pool is 56 tasks and the lineage-wide alpha the default 0.05: the sequential test
promotes the +50-point improvement early and the later +37.5-point candidates within the pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import start_daemon
from tests.improve import patches
from tests.improve.scripted_world import policy_text, world
from tests.support.wait import wait_for_decided

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HELDOUT = 56


def _failed(verdict: dict[str, Any]) -> list[str]:
    return [
        g["gate"]
        for g in verdict["gates"]
        if g["enabled"] and not g["passed"] and not g.get("skipped")
    ]


def _gate(verdict: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in verdict["gates"] if g["gate"] == name)


@pytest.mark.timeout(3000)  # long by design (minutes idle, far longer on a loaded machine)
def test_only_the_real_improvement_is_promoted(tmp_path: Path, asset_cache: Path) -> None:
    solvers = world(tmp_path, asset_cache, HELDOUT)
    proposer = tmp_path / "proposer.toml"
    proposer.write_text(patches.proposer_script(patches.ALL))
    policy = policy_text(
        solvers["a"], solvers["b"], proposer, cycles=len(patches.ALL), heldout=HELDOUT
    )
    daemon = start_daemon(tmp_path, asset_cache, policy)
    try:
        lineage = wait_for_decided(daemon, len(patches.ALL), timeout=2900)
        cands = sorted(lineage["candidates"], key=lambda x: x["id"])
        with daemon.client() as c:
            shown = {x["id"]: c.call("show", ref=f"c{x['id']}") for x in cands}
            lineage = c.call("lineage", candidates=50)
    finally:
        daemon.stop()

    states = [x["state"] for x in cands]
    assert states == ["accepted"] + ["rejected"] * 6, states
    assert lineage["current"] == "v0002"
    improve, regress, blowup, dead, dishonest, panel, garbage = (shown[x["id"]] for x in cands)

    # 1. The improvement: every gate passed, figures recorded, decoy and panel run.
    v = improve["verdict"]
    assert v["decision"] == "accept" and _failed(v) == []
    for name in ("accuracy", "improvement"):
        g = _gate(v, name)
        assert g["measured"] >= g["threshold"] > 1 / 0.05, g  # an e-value past 1/alpha_i
        assert "e-process" in g["test"] or "e-value" in g["test"], g
    assert "newly solved" in _gate(v, "accuracy")["note"]
    assert _gate(v, "decoy")["passed"] and not _gate(v, "decoy").get("skipped")
    assert _gate(v, "panel")["passed"] and not _gate(v, "panel").get("skipped")

    # 2. Regression: the accuracy gate, decided early by the sequential test (futility).
    v = regress["verdict"]
    assert _failed(v)[0] == "accuracy", v
    assert _gate(v, "accuracy")["measured"] < _gate(v, "accuracy")["threshold"]
    heldout = [r for r in regress["reports"] if r["split"] == "heldout"]
    assert heldout and heldout[0]["summary"]["stopped_early"], heldout
    assert heldout[0]["summary"]["n"] < HELDOUT // 2, heldout

    # 3. Token blow-up: tokens only.
    v = blowup["verdict"]
    assert _failed(v) == ["tokens"], v
    assert _gate(v, "tokens")["measured"] > _gate(v, "tokens")["threshold"]

    # 4. Never-run code: dead_code only, the unused helper's lines counted.
    v = dead["verdict"]
    assert _failed(v) == ["dead_code"], v
    assert _gate(v, "dead_code")["measured"] > 0.25
    assert "never ran" in _gate(v, "dead_code")["note"]

    # 5. Claims success it does not have: honesty only; it fails 1 task in 8 and claims it
    # anyway, while the parent over-claims none: 12.5 points more over-claims.
    v = dishonest["verdict"]
    assert _failed(v) == ["honesty"], v
    assert abs(_gate(v, "honesty")["measured"] - 0.125) < 1e-6

    # 6. Helps model A, hurts model B: panel only, at the panel stage.
    v = panel["verdict"]
    assert v["stage"] == "panel" and _failed(v) == ["panel"], v
    assert _gate(v, "panel")["measured"] <= -0.5

    # 7. Unparseable: rejected at parse, raw text kept.
    assert garbage["state"] == "rejected" and garbage["stage"] == "parse"
    assert "fine as it is" in garbage["raw"]
