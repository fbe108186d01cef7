"""A parent's baseline is reused only under exactly the candidate's conditions."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.policy import Policy
from daemon.evaluation.conditions import conditions_key, run_conditions
from daemon.suites import load_suite

pytestmark = pytest.mark.unit


def test_every_condition_that_changes_a_result_changes_the_key(asset_cache: Path) -> None:
    suite = load_suite("bfcl:simple", asset_cache)
    ids = suite.task_ids()[:5]
    base = {
        "policy": Policy(),
        "image": "img:1",
        "suite": suite,
        "task_ids": ids,
        "model": "local:m",
        "tree_hash": "t1",
    }
    key = conditions_key(run_conditions(**base))  # type: ignore[arg-type]
    assert key == conditions_key(run_conditions(**base))  # type: ignore[arg-type]
    changes = {
        "policy": Policy.model_validate({"sandbox": {"memory_mb": 256}}),
        "image": "img:2",
        "task_ids": ids[::-1],
        "model": "local:other",
        "tree_hash": "t2",
        "suite": load_suite("humaneval", asset_cache),
    }
    for name, value in changes.items():
        other = conditions_key(run_conditions(**(base | {name: value})))  # type: ignore[arg-type]
        assert other != key, name
    budget = Policy.model_validate({"budget": {"tokens_per_task": 1000}})
    assert conditions_key(run_conditions(**(base | {"policy": budget}))) != key  # type: ignore[arg-type]
    # What does not change a result does not change the key.
    calm = Policy.model_validate({"sandbox": {"concurrency": 7}, "acceptance": {"alpha": 0.1}})
    assert conditions_key(run_conditions(**(base | {"policy": calm}))) == key  # type: ignore[arg-type]
