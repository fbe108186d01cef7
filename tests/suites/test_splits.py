"""Deterministic, disjoint dev / held-out splits."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from daemon.config.policy import SuitePolicy
from daemon.errors import ConfigError
from daemon.suites import load_suite, split

pytestmark = pytest.mark.unit

IDS = [f"task_{i}" for i in range(100)]


def test_split_is_deterministic_disjoint_and_sized() -> None:
    first = split(IDS, seed="s", dev_size=10, heldout_size=40)
    again = split(list(reversed(IDS)), seed="s", dev_size=10, heldout_size=40)
    assert first == again
    assert len(first.dev) == 10 and len(first.heldout) == 40
    assert not set(first.dev) & set(first.heldout)
    assert set(first.dev) | set(first.heldout) <= set(IDS)


def test_split_orders_by_sha256_of_seed_and_id() -> None:
    ordered = sorted(IDS, key=lambda i: hashlib.sha256(("s" + i).encode()).hexdigest())
    result = split(IDS, seed="s", dev_size=5, heldout_size=5)
    assert result.dev == ordered[:5]
    assert result.heldout == list(reversed(ordered[-5:]))


def test_another_seed_gives_another_split() -> None:
    assert split(IDS, seed="a", dev_size=10, heldout_size=10) != split(
        IDS, seed="b", dev_size=10, heldout_size=10
    )


def test_resizing_never_moves_a_task_between_splits() -> None:
    small = split(IDS, seed="s", dev_size=10, heldout_size=20)
    more_dev = split(IDS, seed="s", dev_size=30, heldout_size=20)
    more_heldout = split(IDS, seed="s", dev_size=10, heldout_size=60)
    assert more_dev.dev[:10] == small.dev and more_dev.heldout == small.heldout
    assert more_heldout.heldout[:20] == small.heldout and more_heldout.dev == small.dev
    everything = split(IDS, seed="s", dev_size=50, heldout_size=50)
    assert set(everything.dev) | set(everything.heldout) == set(IDS)


def test_duplicates_count_once_and_zero_sizes_work() -> None:
    result = split(IDS + IDS, seed="s", dev_size=0, heldout_size=100)
    assert result.dev == [] and sorted(result.heldout) == sorted(IDS)


def test_too_small_a_suite_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as err:
        split(IDS, seed="s", dev_size=70, heldout_size=40, suite="suite 'bfcl:x'")
    message = str(err.value)
    assert "suite 'bfcl:x' has 100 tasks" in message
    assert "dev_size (70) + heldout_size (40) = 110" in message


def test_default_policy_splits_the_default_suite(asset_cache: Path) -> None:
    policy = SuitePolicy()
    suite = load_suite(policy.name, asset_cache)
    result = split(
        suite.task_ids(),
        seed=policy.split_seed or "a per-installation secret",
        dev_size=policy.dev_size,
        heldout_size=policy.heldout_size,
    )
    assert len(result.dev) == policy.dev_size and len(result.heldout) == policy.heldout_size
    assert all(suite.task(i).id == i for i in result.dev + result.heldout)
