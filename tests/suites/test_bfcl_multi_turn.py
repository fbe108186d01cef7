"""BFCL multi-turn: tasks, ground truth and BFCL's multi-turn rules, on the real pinned wheel.

The executor and checker are the worker's modules, run here in the test process on the
real simulated APIs (the daemon itself never imports them); ``test_worker_*`` go through a
real worker process, as the evaluator does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.config.assets import WHEELS, fetch_wheel
from daemon.errors import ConfigError
from daemon.suites import load_suite, parse_spec
from daemon.suites.bfcl_multi_turn import CATEGORIES, BfclMultiTurnSuite
from daemon.suites.envworker import WorkerLimits
from daemon.suites.mixed import MixedSuite
from daemon.suites.toolenv import bfcl_data
from daemon.suites.toolenv.bfcl_api import BfclWheel
from daemon.suites.toolenv.bfcl_run import BfclSimulation, check, replay

Calls = list[list[tuple[str, Any]]]
_DOCS: dict[str, bfcl_data.Docs] = {}


def _docs(wheel: BfclWheel) -> bfcl_data.Docs:
    return _DOCS.setdefault(wheel.sha256, bfcl_data.load_func_docs(wheel.read))


@pytest.fixture(scope="module")
def suite(asset_cache: Path) -> BfclMultiTurnSuite:
    loaded = load_suite("bfcl:" + ",".join(CATEGORIES), asset_cache)
    assert isinstance(loaded, BfclMultiTurnSuite)
    return loaded


@pytest.fixture(scope="module")
def wheel(asset_cache: Path) -> BfclWheel:
    path = fetch_wheel(asset_cache, "bfcl-eval")
    return BfclWheel(path, WHEELS["bfcl-eval"].sha256, asset_cache / "bfcl-eval")


def _task(wheel: BfclWheel, task_id: str) -> bfcl_data.BfclTask:
    category = task_id.rsplit("_", 1)[0]
    return next(t for t in bfcl_data.load_tasks(wheel.read, category) if t.id == task_id)


def _truth(task: bfcl_data.BfclTask, docs: bfcl_data.Docs) -> Calls:
    return [
        [(c["name"], c["arguments"]) for c in turn]
        for turn in bfcl_data.ground_truth_calls(task, docs)
    ]


def _verdict(wheel: BfclWheel, task: bfcl_data.BfclTask, calls: Calls) -> tuple[bool, str | None]:
    classes = wheel.api_classes(task.involved_classes)
    docs = _docs(wheel)
    truth = replay(task, classes, _truth(task, docs))
    verdict = check(task, truth, replay(task, classes, calls))
    return verdict.valid, verdict.error_type


@pytest.mark.unit
def test_specs_name_multi_turn_categories_and_refuse_mixing_them() -> None:
    assert parse_spec("bfcl:multi_turn_base") == ("bfcl", ("multi_turn_base",))
    with pytest.raises(ConfigError, match="cannot be mixed"):
        parse_spec("bfcl:simple,multi_turn_base")


@pytest.mark.unit
def test_tasks_show_the_first_turn_and_tools_and_no_ground_truth(
    suite: BfclMultiTurnSuite,
) -> None:
    assert len(suite.task_ids()) == 800
    task = suite.task("multi_turn_base_0")
    assert task.kind == "tool_use" and task.suite == "bfcl"
    assert [m.role for m in task.prompt] == ["user"]
    assert "final_report.pdf" in (task.prompt[0].content or "")
    names = {t.name for t in task.tools}
    assert {"cd", "mv", "grep", "post_tweet"} <= names
    shown = task.model_dump_json()
    for secret in ("ground_truth", "initial_config", "mkdir(dir_name='temp')", "Year2024"):
        assert secret not in shown
    assert suite.expected("multi_turn_base_0")["turns"][0][1] == "mkdir(dir_name='temp')"


@pytest.mark.unit
def test_miss_func_reveals_the_held_back_tool_at_its_turn(wheel: BfclWheel) -> None:
    task = _task(wheel, "multi_turn_miss_func_0")
    turn, names = next(iter(task.missed_function.items()))
    tools = bfcl_data.tools_per_turn(task, bfcl_data.load_func_docs(wheel.read))
    before = {t["name"] for t in tools[turn - 1]}
    after = {t["name"] for t in tools[turn]}
    assert not set(names) & before and set(names) <= after
    assert bfcl_data.user_messages(task, turn)[0]["content"] == bfcl_data.REVEAL_PROMPT


@pytest.mark.unit
def test_ground_truth_passes_and_doing_nothing_fails_on_a_sample(wheel: BfclWheel) -> None:
    docs = _docs(wheel)
    for category in CATEGORIES:
        for task in bfcl_data.load_tasks(wheel.read, category)[::100]:
            assert _verdict(wheel, task, _truth(task, docs)) == (True, None), task.id
            empty: Calls = [[] for _ in task.turns]
            assert _verdict(wheel, task, empty) == (
                False,
                "multi_turn:empty_turn_model_response",
            )


@pytest.mark.unit
def test_ground_truth_passes_on_every_fifth_task_of_every_category(wheel: BfclWheel) -> None:
    """(All 800 pass; a fifth keeps the suite quick: long-context tasks are slow to load.)"""
    docs = _docs(wheel)
    failed = [
        task.id
        for category in CATEGORIES
        for task in bfcl_data.load_tasks(wheel.read, category)[::5]
        if not _verdict(wheel, task, _truth(task, docs))[0]
    ]
    assert failed == []


@pytest.mark.unit
def test_tool_errors_are_results_and_private_names_are_not_tools(wheel: BfclWheel) -> None:
    task = _task(wheel, "multi_turn_base_0")
    docs = bfcl_data.load_func_docs(wheel.read)
    episode = BfclSimulation(task, wheel.api_classes(task.involved_classes), docs)
    assert episode.call("not_a_tool", {}) == (
        "Error during execution: name 'not_a_tool' is not defined"
    )
    assert "unexpected keyword argument" in episode.call("cd", {"nope": 1})
    for forged in ("_load_scenario", "__init__", "__eq__", "GorillaFileSystem._load_scenario"):
        assert "is not defined" in episode.call(forged, {"scenario": {}}), forged
    assert "not allowed" in episode.call("run", {})
    assert "arguments must be a JSON object" in episode.call("cd", ["document"])
    assert json.loads(episode.call("cd", {"folder": "document"})) == {
        "current_working_directory": "document"
    }


@pytest.mark.unit
def test_an_argument_the_api_keeps_cannot_rewrite_the_record(wheel: BfclWheel) -> None:
    """TwitterAPI.post_tweet keeps ``mentions``; ``mention`` extends it later."""
    task = next(
        t
        for t in bfcl_data.load_tasks(wheel.read, "multi_turn_base")
        if "TwitterAPI" in t.involved_classes
    )
    docs = bfcl_data.load_func_docs(wheel.read)
    episode = BfclSimulation(task, wheel.api_classes(task.involved_classes), docs)
    episode.call("authenticate_twitter", {"username": "u", "password": "p"})
    mentions = ["@a"]
    episode.call("post_tweet", {"content": "hi", "tags": [], "mentions": mentions})
    episode.call("mention", {"tweet_id": 0, "mentioned_usernames": ["@b"]})
    assert mentions == ["@a"]
    assert episode.turns[0].calls[1][1]["mentions"] == ["@a"]


def _worker_limits() -> WorkerLimits:
    return WorkerLimits(call_s=2.0, start_s=60.0, memory_mb=1024, cpu_s=120)


@pytest.mark.unit
def test_worker_runs_the_ground_truth_and_an_empty_run(suite: BfclMultiTurnSuite) -> None:
    suite.limits = _worker_limits()

    async def run(task_id: str, replay_truth: bool) -> tuple[bool, str]:
        turns = suite.reference_output(task_id)["turns"]
        async with suite.episode(task_id) as episode:
            for i, turn in enumerate(turns):
                if i:
                    assert "messages" in await episode.next_turn()
                for call in turn if replay_truth else []:
                    await episode.tool_call(call["name"], call["arguments"])
            assert await episode.next_turn() == {"done": True}
            result = await episode.check("", completed=True)
        return result.passed, result.detail

    async def main() -> None:
        assert await run("multi_turn_miss_param_3", True) == (True, "ok")
        passed, detail = await run("multi_turn_base_7", False)
        assert not passed and detail.startswith("multi_turn:empty_turn_model_response")

    anyio.run(main)


@pytest.mark.unit
def test_worker_cuts_off_a_call_that_runs_too_long_and_restores_the_state(
    suite: BfclMultiTurnSuite, wheel: BfclWheel
) -> None:
    """``power(10, 10**9)`` is one C-level operation: only killing the process stops it. The
    episode goes on in a restored worker and still scores on what the other calls did."""
    suite.limits = _worker_limits()
    task = next(
        t
        for t in bfcl_data.load_tasks(wheel.read, "multi_turn_base")
        if t.involved_classes == ("MathAPI",) or "MathAPI" in t.involved_classes
    )
    turns = suite.reference_output(task.id)["turns"]

    async def main() -> tuple[str, bool]:
        async with suite.episode(task.id) as episode:
            cut = await episode.tool_call("power", {"base": 10, "exponent": 10**9})
            for i, turn in enumerate(turns):
                if i:
                    await episode.next_turn()
                for call in turn:
                    await episode.tool_call(call["name"], call["arguments"])
            await episode.next_turn()
            return cut, (await episode.check("", completed=True)).passed

    cut, passed = anyio.run(main)
    assert cut == "Error during execution: the tool call exceeded the 2 s time limit"
    assert passed


@pytest.mark.unit
def test_a_restarted_episode_forgets_the_lost_run(suite: BfclMultiTurnSuite) -> None:
    """A unit the Ray cluster lost runs again on the same handler: the lost run's calls
    and turns must not carry over. The lost run here did the first turn twice over and moved
    on a turn; the re-run replays the ground truth once, from turn one, and passes."""
    suite.limits = _worker_limits()
    task_id = "multi_turn_miss_param_3"
    turns = suite.reference_output(task_id)["turns"]

    async def main() -> tuple[bool, str, dict[str, Any]]:
        async with suite.episode(task_id) as episode:
            for call in turns[0] + turns[0]:
                await episode.tool_call(call["name"], call["arguments"])
            await episode.next_turn()
            await episode.restart()
            first = await episode.next_turn() if len(turns) > 1 else {}
            await episode.restart()
            for i, turn in enumerate(turns):
                if i:
                    assert "messages" in await episode.next_turn()
                for call in turn:
                    await episode.tool_call(call["name"], call["arguments"])
            assert await episode.next_turn() == {"done": True}
            result = await episode.check("", completed=True)
        return result.passed, result.detail, first

    passed, detail, first = anyio.run(main)
    assert (passed, detail) == (True, "ok")
    assert len(turns) > 1 and "messages" in first  # after a restart, turn two comes next


@pytest.mark.unit
def test_a_tool_use_suite_cannot_be_mixed_with_another(
    suite: BfclMultiTurnSuite, asset_cache: Path
) -> None:
    """A mix opens no tool environments, so its multi-step tasks could never be run."""
    other = load_suite("bfcl:simple", asset_cache)
    with pytest.raises(ConfigError, match=r"\[suite\] name = 'bfcl:multi_turn"):
        MixedSuite(suite, other)
    with pytest.raises(ConfigError, match=r"\[suite\] heldout_suite = 'bfcl:multi_turn"):
        MixedSuite(other, suite)
