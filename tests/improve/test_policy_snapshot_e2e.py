"""One policy per candidate: an edit of the policy while a candidate is between stages does
not reach its verdict.

Through the real pipeline, sandbox and scripted model: as the candidate enters the held-out
stage (its dev screen passed under the original policy) the policy in force is replaced by
one under which it could not pass: a token cap it exceeds, a per-task token budget no model
call fits, a wider margin, stricter point gates. The verdict must be the one the original
policy reaches, with the original's thresholds, and name the original policy; so must the
verdict the lineage recorded. (``test_policy_snapshot.py`` follows the same edit through the
loop's whole cycle, proposal included, and every policy each stage was handed.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.config.policy import load_policy
from daemon.evaluation.runtime import policy_sha256
from daemon.improve import intake
from daemon.improve.pipeline import Pipeline
from daemon.lineage import Lineage
from tests.improve.patches import IMPROVE
from tests.improve.pipeline_world import SEED, gate
from tests.improve.scripted_world import proposer_policy

pytestmark = [pytest.mark.docker, pytest.mark.slow]

STRICT = """
[gates.tokens]
max_token_ratio = 0.01
[gates.dead_code]
max_dead_fraction = 0.0
[gates.provenance]
max_unsupported = 0.0
[acceptance]
margin = 0.3
[budget]
tokens_per_task = 1
"""


@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_a_policy_edit_mid_candidate_does_not_reach_its_verdict(
    runtime_factory: Any, tmp_path: Path, asset_cache: Path
) -> None:
    # One scripted solver (half the held-out tasks right in mode GOOD, the seed none), no
    # panel; the proposer is not asked here.
    text = proposer_policy(tmp_path, asset_cache, f"scripted:{tmp_path / 'solver.toml'}")
    async with runtime_factory(text) as rt:
        snapshot = rt.snapshot()
        original = snapshot.policy
        path = rt.policy.path
        lineage = Lineage(rt.store, tmp_path / "harnesses")
        lineage.init_seed(SEED)
        sub = intake.record(
            lineage,
            lineage.current(),
            IMPROVE,
            source="external",
            proposer_model=None,
            policy=original.patch,
            work_dir=rt.work_dir,
        )
        assert sub.accepted_for_evaluation, sub.reason
        edited: list[str] = []

        def activity(line: str) -> None:
            if edited:
                edited.append(line)  # what ran after the edit
            elif line == f"candidate c{sub.candidate_id}: heldout":
                # What a reload of the file does, between the dev screen and the held-out test.
                path.write_text(text + STRICT)
                rt.policy.current = load_policy(path)
                edited.append(line)

        verdict = await Pipeline(rt, lineage, activity).run(sub.candidate_id, snapshot)
        strict = rt.policy.get()
        recorded = lineage.candidate(sub.candidate_id)
    assert edited and strict != original and strict.budget.tokens_per_task == 1
    # The held-out test and the gates after it ran after the edit.
    assert any("held-out test" in line for line in edited[1:]), edited
    assert any("decoy" in line for line in edited[1:]), edited
    assert recorded.verdict == verdict
    # Under the edited policy every model call would be refused and the token cap failed.
    assert verdict.decision == "accept", verdict
    assert verdict.policy is not None
    assert verdict.policy.sha256 == policy_sha256(original) != policy_sha256(strict)
    assert verdict.policy.path == str(path)
    g = original.gates
    expected = {
        "dev_screen": -original.pipeline.dev_max_regression,
        "tokens": g.tokens.max_token_ratio,
        "dead_code": g.dead_code.max_dead_fraction,
        "provenance": g.provenance.max_unsupported,
    }
    for name, threshold in expected.items():
        assert gate(verdict, name).threshold == threshold, gate(verdict, name)
    accuracy = gate(verdict, "accuracy")
    assert f"acc_C - acc_P <= -{original.acceptance.margin:.3f}" in accuracy.test, accuracy.test
    assert ", 0 newly failed" in accuracy.note, accuracy.note
