"""Policies naming file suites: paths relative to the policy file, the suite checked before
anything runs, and a held-out pool taken from a second suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.policy import load_policy
from daemon.errors import ConfigError
from daemon.suites import check_suite, policy_splits, policy_suite
from daemon.suites.mixed import MixedSuite

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "policies" / "suites" / "example"


def _policy(folder: Path, suite: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "policy.toml"
    path.write_text(f"[suite]\n{suite}\n")
    return path


def test_a_relative_file_suite_resolves_against_the_policy_folder(
    tmp_path: Path, asset_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "team" / "tasks").mkdir(parents=True)
    (tmp_path / "team" / "tasks" / "mine.jsonl").write_text((EXAMPLE / "number.jsonl").read_text())
    path = _policy(
        tmp_path / "team", 'name = "file:tasks/mine.jsonl"\ndev_size = 5\nheldout_size = 20'
    )
    monkeypatch.chdir(tmp_path)  # not the policy's folder
    policy = load_policy(path)
    assert policy.suite.name == f"file:{tmp_path / 'team' / 'tasks' / 'mine.jsonl'}"
    check_suite(policy, asset_cache)
    splits = policy_splits(policy.suite, asset_cache, "seed")
    assert len(splits.dev) == 5 and len(splits.heldout) == 20
    assert not set(splits.dev) & set(splits.heldout)


def test_a_policy_naming_a_missing_or_bad_file_is_refused(
    tmp_path: Path, asset_cache: Path
) -> None:
    policy = load_policy(_policy(tmp_path, 'name = "file:absent.jsonl"'))
    with pytest.raises(ConfigError, match=r"absent\.jsonl does not exist"):
        check_suite(policy, asset_cache)
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "prompt": "x", "expected": 1}\n')
    policy = load_policy(_policy(tmp_path, 'name = "file:bad.jsonl"'))
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1: key 'check': missing"):
        check_suite(policy, asset_cache)
    small = load_policy(_policy(tmp_path, f'name = "file:{EXAMPLE / "exact.jsonl"}"'))
    with pytest.raises(ConfigError, match=r"has 40 tasks, fewer than the policy's"):
        check_suite(small, asset_cache)  # default sizes 10 + 40


def test_a_policy_refuses_a_suite_name_that_is_neither_built_in_nor_a_file(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"key 'suite.name'.*or 'file:PATH'"):
        load_policy(_policy(tmp_path, 'name = "tasks.jsonl"'))


def test_a_private_held_out_pool_from_a_second_suite(tmp_path: Path, asset_cache: Path) -> None:
    path = _policy(
        tmp_path,
        f'name = "bfcl:simple"\nheldout_suite = "file:{EXAMPLE}"\n'
        "dev_size = 10\nheldout_size = 150",
    )
    policy = load_policy(path)
    check_suite(policy, asset_cache)
    suite = policy_suite(policy.suite, asset_cache)
    assert isinstance(suite, MixedSuite)
    splits = policy_splits(policy.suite, asset_cache, "secret")
    assert all(t.startswith("dev:simple_") for t in splits.dev) and len(splits.dev) == 10
    assert all(t.startswith("heldout:") for t in splits.heldout) and len(splits.heldout) == 150
    # The pool only grows at its end, as one suite's held-out split does.
    bigger = policy.suite.model_copy(update={"heldout_size": 160})
    assert policy_splits(bigger, asset_cache, "secret").heldout[:150] == splits.heldout
    task = suite.task(splits.heldout[0])
    assert task.id == splits.heldout[0] and task.suite == "file"
    same = load_policy(
        _policy(
            tmp_path,
            f'name = "file:{EXAMPLE}"\nheldout_suite = '
            f'"file:{EXAMPLE}/"\ndev_size = 1\nheldout_size = 1',
        )
    )
    with pytest.raises(ConfigError, match="names the same suite"):
        check_suite(same, asset_cache)
    short = policy.model_copy(
        update={"suite": policy.suite.model_copy(update={"heldout_size": 201})}
    )
    with pytest.raises(ConfigError, match="the held-out suite 'file:example@"):
        check_suite(short, asset_cache)
