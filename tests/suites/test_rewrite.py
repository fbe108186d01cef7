"""Counterfactual copies of public tasks: every surface a stored table keys on is new, the
task's meaning and its ground truth are kept (BFCL's own checker agrees on every copy)."""

from __future__ import annotations

import json
import random
import re

import pytest

from daemon.config.policy import SuitePolicy
from daemon.suites import Splits, evaluation_copies, heldout_evidence, split
from daemon.suites.bfcl import BfclSuite, as_bfcl_calls
from daemon.suites.bfcl_checker import check_calls
from daemon.suites.codecheck import DockerCodeChecker
from daemon.suites.humaneval import HumanEvalSuite
from daemon.suites.rewrite.bfcl import StringPool, rewrite
from daemon.suites.rewrite.names import new_name, words
from daemon.suites.rewrite.numbers import NUMBER, numbers_in

SEED = "installation-secret"


@pytest.mark.unit
def test_ground_truth_replayed_on_every_bfcl_copy_verifies(bfcl: BfclSuite) -> None:
    ids = bfcl.task_ids()
    copies = bfcl.counterfactual(ids, SEED)
    failed = []
    for task_id in ids:
        entry = copies._entry(task_id)
        calls = as_bfcl_calls(entry.functions, copies.reference_output(task_id))
        verdict = check_calls(entry.bfcl_category, entry.functions, calls, entry.answers)
        if not verdict.valid:
            failed.append((task_id, verdict.error))
    assert failed == [], failed[:5]
    assert len(ids) == 1240


@pytest.mark.unit
def test_the_public_answer_fails_on_its_copy(bfcl: BfclSuite) -> None:
    """What a table of the public tasks holds (the call) verifies on no copy: every copy
    renames its functions, so the stored call misses; and where the question's numbers
    changed, the stored values miss too, even under the copy's names."""
    ids = [i for i in bfcl.task_ids() if not i.startswith("irrelevance")]
    copies = bfcl.counterfactual(ids, SEED)
    stored_passes, renamed_passes, numbers_changed = 0, 0, 0
    for task_id in ids:
        entry, original = copies._entry(task_id), bfcl._entry(task_id)
        public = bfcl.reference_output(task_id)
        verdict = check_calls(
            entry.bfcl_category,
            entry.functions,
            as_bfcl_calls(entry.functions, public),
            entry.answers,
        )
        stored_passes += verdict.valid
        if _values(entry.answers) != _values(original.answers):
            numbers_changed += 1
            # The public values under the copy's own names: still wrong.
            names = {f["name"]: g["name"] for f, g in _matched(original, entry)}
            moved = [
                {
                    "name": names.get(c["name"], c["name"]),
                    "arguments": _renamed_args(c, original, entry),
                }
                for c in public
            ]
            again = check_calls(
                entry.bfcl_category,
                entry.functions,
                as_bfcl_calls(entry.functions, moved),
                entry.answers,
            )
            renamed_passes += again.valid
    assert stored_passes == 0
    assert numbers_changed > len(ids) // 3
    # Where every value that changed may also be left out, the old values can still pass.
    assert renamed_passes <= numbers_changed // 100, renamed_passes


def _values(answers: list[dict]) -> list[str]:
    """The possible answers' allowed values, names aside."""
    return sorted(
        json.dumps(allowed, sort_keys=True)
        for call in answers
        for params in call.values()
        for allowed in params.values()
    )


def _matched(original: object, entry: object) -> list[tuple[dict, dict]]:
    """Pairs (public function, its copy) by description (names and order changed)."""
    out = []
    for f in original.functions:  # type: ignore[attr-defined]
        for g in entry.functions:  # type: ignore[attr-defined]
            if f.get("description", "")[:40] == g.get("description", "")[:40] and len(
                f["parameters"].get("properties", {})
            ) == len(g["parameters"].get("properties", {})):
                out.append((f, g))
                break
    return out


def _renamed_args(call: dict, original: object, entry: object) -> dict:
    from daemon.suites.bfcl_schema import tool_name

    for f, g in _matched(original, entry):
        if tool_name(f["name"]) == call["name"]:
            old, new = list(f["parameters"]["properties"]), g["parameters"]["properties"]
            by_desc = {
                p: next(
                    (
                        q
                        for q, s in new.items()
                        if s.get("description")
                        == f["parameters"]["properties"][p].get("description")
                    ),
                    p,
                )
                for p in old
            }
            return {by_desc.get(p, p): v for p, v in call["arguments"].items()}
    return dict(call["arguments"])


@pytest.mark.unit
def test_copies_rename_reorder_and_renumber(bfcl: BfclSuite) -> None:
    ids = bfcl.task_ids()
    copies = bfcl.counterfactual(ids, SEED)
    reordered_params = reordered_tools = 0
    for task_id in ids:
        entry, original = copies._entry(task_id), bfcl._entry(task_id)
        own = {g["name"] for g in original.functions} | {
            g["name"].replace(".", "_") for g in original.functions
        }
        assert not {f["name"] for f in entry.functions} & own, task_id
        old_tools = [f.get("description") for f in original.functions]
        new_tools = [f.get("description") for f in entry.functions]
        reordered_tools += old_tools != new_tools
        for f in entry.functions:
            props = f["parameters"].get("properties", {})
            required = f["parameters"].get("required", [])
            assert set(required) <= set(props), (task_id, required, list(props))
            descs = [p.get("description") for p in props.values()]
            for g in original.functions:
                if g.get("description") == f.get("description"):
                    old = [
                        p.get("description") for p in g["parameters"].get("properties", {}).values()
                    ]
                    reordered_params += old != descs
        # Numbers the answer holds and the question wrote are gone from the question.
        text = " ".join(m["content"] for m in entry.question)
        old_text = " ".join(m["content"] for m in original.question)
        if text != old_text:
            assert json.dumps(entry.answers) != json.dumps(original.answers)
    assert reordered_tools > 150  # multi-function tasks
    assert reordered_params > 300


@pytest.mark.unit
def test_copies_list_each_enums_options_in_another_order(bfcl: BfclSuite) -> None:
    """A table that points at an option by position ("the last one") for a task's wording
    points elsewhere on its copy; the answers name values, so they stand (the ground-truth
    replay above verifies on every copy)."""
    ids = bfcl.task_ids()
    copies = bfcl.counterfactual(ids, SEED)
    enums = 0
    for task_id in ids:
        before = {
            json.dumps(sorted(map(repr, spec["enum"]))): spec["enum"]
            for f in bfcl._entry(task_id).functions
            for spec in f["parameters"].get("properties", {}).values()
            if isinstance(spec, dict) and len(set(map(repr, spec.get("enum") or []))) >= 2
        }
        for f in copies._entry(task_id).functions:
            for spec in f["parameters"].get("properties", {}).values():
                options = spec.get("enum") if isinstance(spec, dict) else None
                key = json.dumps(sorted(map(repr, options or [])))
                if key in before:
                    enums += 1
                    assert options != before[key], (task_id, options)
    assert enums > 50


@pytest.mark.unit
def test_copies_are_fixed_by_the_seed_and_differ_across_seeds(bfcl: BfclSuite) -> None:
    ids = bfcl.task_ids()[:50]
    a, b, c = (bfcl.counterfactual(ids, s) for s in (SEED, SEED, "another-installation"))
    assert [a.task(i) for i in ids] == [b.task(i) for i in ids]
    assert sum(a.task(i) != c.task(i) for i in ids) >= len(ids) - 2  # a one-word tool, one synonym
    # Only the listed tasks are copies.
    rest = bfcl.task_ids()[50]
    assert a.task(rest) == bfcl.task(rest)


@pytest.mark.unit
def test_evaluation_copies_rewrite_the_dev_split_and_the_heldout_pool_alike(
    bfcl: BfclSuite,
) -> None:
    splits = split(bfcl.task_ids(), seed=SEED, dev_size=20, heldout_size=380, suite="bfcl")
    copies = evaluation_copies(bfcl, splits, SEED)
    assert copies.task_ids() == bfcl.task_ids()
    assert all(copies.task(i) != bfcl.task(i) for i in splits.dev)
    assert all(copies.task(i) != bfcl.task(i) for i in splits.heldout)
    # One transformation for both: a dev task is the copy the held-out pool would hold.
    one = evaluation_copies(bfcl, Splits(dev=[], heldout=splits.dev), SEED)
    assert all(copies.task(i) == one.task(i) for i in splits.dev)
    rest = [i for i in bfcl.task_ids() if i not in set(splits.dev) | set(splits.heldout)]
    assert all(copies.task(i) == bfcl.task(i) for i in rest)
    assert evaluation_copies(bfcl, splits, SEED) is copies  # made once


@pytest.mark.unit
def test_policy_check_says_what_the_heldout_tasks_are() -> None:
    on = heldout_evidence(SuitePolicy(name="bfcl:simple"))
    assert "counterfactual copies" in on and "dev tasks made the same way" in on
    assert "counterfactual copies" in heldout_evidence(SuitePolicy(name="humaneval"))
    off = heldout_evidence(SuitePolicy(name="bfcl:simple", counterfactual=False))
    assert "can be promoted" in off and "counterfactual = true" in off
    multi = heldout_evidence(SuitePolicy(name="bfcl:multi_turn_base"))
    assert "cannot be rewritten" in multi and "heldout_suite" in multi
    dojo = heldout_evidence(SuitePolicy(name="agentdojo:banking"))
    assert "cannot be rewritten" in dojo
    private = heldout_evidence(SuitePolicy(name="bfcl:simple", heldout_suite="file:/x.jsonl"))
    assert "your own tasks" in private


@pytest.mark.unit
def test_new_names_differ_from_the_public_one_and_keep_its_words() -> None:
    rng = random.Random(1)
    for old in ["calculate_triangle_area", "math.factorial", "getUserInfo", "base", "x"]:
        for param in (False, True):
            for _ in range(20):
                new = new_name(old, rng, {old}, param=param)
                assert new.isidentifier() and new != old.lower().replace(".", "_")
                # The words after a leading verb stay, in order: the sense is kept.
                assert "_".join(words(old)[1:]) in new


@pytest.mark.unit
def test_numbers_keep_their_shape_and_dates_stay() -> None:
    found = [
        w.text for w in numbers_in("From 2020-01-05 at 10:30, pay $1,250.50 for 3 items, v2 and 7%")
    ]
    assert found == ["1,250.50", "3", "7"]
    question = [{"role": "user", "content": "Split 1,250.50 dollars among 3 people, tip 15%."}]
    functions = [
        {
            "name": "split_bill",
            "description": "Split a bill.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "total": {"type": "float", "description": "Bill total."},
                    "people": {"type": "integer", "description": "Number of people."},
                    "tip": {"type": "integer", "description": "Tip percent."},
                },
                "required": ["total", "people"],
            },
        }
    ]
    answers = [{"split_bill": {"total": [1250.5], "people": [3], "tip": [15, ""]}}]
    copy = rewrite(question, functions, answers, random.Random(3), StringPool([]))
    text = copy.question[0]["content"]
    assert not re.search(r"\b1,250\.50\b|\b3 people|\b15%", text), text
    (call,) = copy.answers
    ((_, args),) = call.items()
    values = {v[0] for v in args.values()}
    for w in numbers_in(text):
        assert w.value in values, (text, args)
    assert re.fullmatch(r"Split \d,\d{3}\.\d{2} dollars among \d people, tip \d\d%\.", text), text
    assert NUMBER.pattern  # the rule is documented on the pattern itself


@pytest.mark.unit
def test_a_number_the_tools_document_stays() -> None:
    question = [{"role": "user", "content": "Roll 2 dice with 6 sides."}]
    functions = [
        {
            "name": "roll",
            "description": "Roll dice; sides default to 6.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "count": {"type": "integer", "description": "Dice."},
                    "sides": {"type": "integer", "description": "Sides.", "default": 6},
                },
                "required": ["count"],
            },
        }
    ]
    answers = [{"roll": {"count": [2], "sides": [6, ""]}}]
    copy = rewrite(question, functions, answers, random.Random(5), StringPool([]))
    assert "6 sides" in copy.question[0]["content"]
    assert "2 dice" not in copy.question[0]["content"]


@pytest.mark.unit
def test_exact_strings_swap_with_another_tasks_value_of_that_parameter() -> None:
    def task(city: str) -> tuple[list[dict[str, str]], list[dict[str, object]]]:
        return [{"role": "user", "content": f"Weather in {city} today?"}], [
            {"weather": {"city": [city]}}
        ]

    pool = StringPool([task("Boston"), task("Denver"), task("Austin")])
    q, a = task("Boston")
    functions = [
        {
            "name": "weather",
            "description": "Current weather.",
            "parameters": {
                "type": "dict",
                "properties": {"city": {"type": "string", "description": "City name."}},
                "required": ["city"],
            },
        }
    ]
    copy = rewrite(q, functions, a, random.Random(0), pool)
    city = copy.strings["Boston"]
    assert city in ("Denver", "Austin")
    assert copy.question[0]["content"] == f"Weather in {city} today?"
    (call,) = copy.answers
    assert list(call.values()) == [{copy.names["city"]: [city]}]


@pytest.mark.unit
def test_humaneval_copies_rename_the_entry_point_everywhere(humaneval: HumanEvalSuite) -> None:
    ids = humaneval.task_ids()
    copies = humaneval.counterfactual(ids, SEED)
    for task_id in ids:
        old, new = humaneval._problem(task_id), copies._problem(task_id)
        assert new.entry_point != old.entry_point
        pattern = re.compile(rf"(?<![\w.]){re.escape(old.entry_point)}(?!\w)")
        assert not pattern.search(new.prompt + new.test + new.canonical_solution), task_id
        assert f"def {new.entry_point}(" in new.prompt
        assert copies.task(task_id).meta["entry_point"] == new.entry_point


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(1200)
async def test_humaneval_canonical_solutions_pass_on_their_copies(
    humaneval: HumanEvalSuite, checker: DockerCodeChecker
) -> None:
    copies = HumanEvalSuite(
        [humaneval._problem(i) for i in humaneval.task_ids()], timeout_s=120.0
    ).counterfactual(humaneval.task_ids(), SEED)
    ids = copies.task_ids()[::4]  # 41 problems, two fresh containers each
    failed = {}
    for task_id in ids:
        result = await copies.check(task_id, copies.reference_output(task_id), checker)
        if not result.passed:
            failed[task_id] = result.detail
    assert failed == {}


@pytest.mark.unit
@pytest.mark.parametrize(
    "options", [[1, 1.0], [0, False], [1, True, 1.0], ["a", "a", "b"], [None, {"a": 1}, [1]]]
)
def test_an_enum_of_values_that_compare_equal_is_reordered_and_ends(options: list[object]) -> None:
    from daemon.suites.rewrite.bfcl import _shuffled_enum

    spec = {"type": "array", "items": {"enum": options}}
    shuffled = _shuffled_enum(spec, random.Random(0), True)["items"]["enum"]
    assert sorted(map(repr, shuffled)) == sorted(map(repr, options))
    assert list(map(repr, shuffled)) != list(map(repr, options))
