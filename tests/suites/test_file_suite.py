"""File suites: the core format as the issue writes it, each check rule's verdicts, and a
malformed file refused before anything runs with file, line and key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.errors import ConfigError
from daemon.suites import load_suite, parse_spec
from daemon.suites.filesuite import FileSuite
from tests.support.code_checks import NoCodeChecks

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

EXAMPLE = Path(__file__).resolve().parents[2] / "policies" / "suites" / "example"

WEATHER = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}

# One task of each core check type, written exactly as the format.
CORE = [
    {"id": "t1", "prompt": "Capital of France?", "expected": "Paris", "check": {"type": "exact"}},
    {
        "id": "t2",
        "prompt": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Capital of Japan?"},
        ],
        "expected": "tokyo",
        "check": {"type": "exact", "casefold": True},
    },
    {"id": "t3", "prompt": "7 + 5?", "expected": 12, "check": {"type": "number"}},
    {
        "id": "t4",
        "prompt": "pi to two places?",
        "expected": 3.14,
        "check": {"type": "number", "tol": 0.01},
    },
    {
        "id": "t5",
        "prompt": "Say hello.",
        "expected": "^\\s*(hello|hi)\\b",
        "check": {"type": "regex"},
    },
    {
        "id": "t6",
        "prompt": "Weather in Paris?",
        "tools": [WEATHER],
        "expected": [
            {
                "name": "get_weather",
                "arguments": {"city": ["Paris", "paris"], "unit": ["celsius", ""]},
            }
        ],
        "check": {"type": "calls"},
    },
    {
        "id": "t7",
        "prompt": "Say nothing to the tools.",
        "tools": [WEATHER],
        "expected": [],
        "check": {"type": "calls"},
    },
]


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


@pytest.fixture
def core(tmp_path: Path) -> FileSuite:
    return FileSuite.load(_write(tmp_path / "tasks.jsonl", CORE))


def test_the_core_format_loads_with_kinds_from_the_check(core: FileSuite) -> None:
    assert core.task_ids() == [t["id"] for t in CORE]
    kinds = {i: core.task(i).kind for i in core.task_ids()}
    assert kinds == {
        "t1": "answer",
        "t2": "answer",
        "t3": "answer",
        "t4": "answer",
        "t5": "answer",
        "t6": "function_call",
        "t7": "function_call",
    }
    t2 = core.task("t2")
    assert [(m.role, m.content) for m in t2.prompt] == [
        ("system", "Be brief."),
        ("user", "Capital of Japan?"),
    ]
    t6 = core.task("t6")
    assert t6.suite == "file" and [t.name for t in t6.tools] == ["get_weather"]
    assert core.expected("t3") == 12
    # What a harness sees holds neither the answer nor the check.
    assert "Paris" not in core.task("t1").model_dump_json().replace("France", "")


CASES = [
    ("t1", "  Paris \n", True),
    ("t1", "paris", False),
    ("t1", "Paris.", False),
    ("t2", "TOKYO", True),
    ("t2", "Kyoto", False),
    ("t3", "12", True),
    ("t3", "It is 12.", True),
    ("t3", 12, True),
    ("t3", "7 + 5 = 12", False),
    ("t3", "12.0000001", True),
    ("t3", "twelve", False),
    ("t3", ["12"], False),
    ("t4", "3.1415", True),
    ("t4", "3.16", False),
    ("t5", "hello there", True),
    ("t5", "Hi", False),
    ("t5", "oh hello", False),
    ("t6", [{"name": "get_weather", "arguments": {"city": "Paris"}}], True),
    ("t6", [{"name": "get_weather", "arguments": {"city": "paris", "unit": "celsius"}}], True),
    ("t6", [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "fahrenheit"}}], False),
    ("t6", [{"name": "get_weather", "arguments": {"city": "Lyon"}}], False),
    ("t6", [{"name": "get_weather", "arguments": {"city": "Paris"}}] * 2, False),
    ("t6", "get_weather(city='Paris')", False),
    ("t7", [], True),
    ("t7", [{"name": "get_weather", "arguments": {"city": "Paris"}}], False),
]


@pytest.mark.parametrize(("task_id", "output", "passed"), CASES)
async def test_verdicts_follow_the_stated_rules(
    core: FileSuite, task_id: str, output: Any, passed: bool
) -> None:
    result = await core.check(task_id, output, NoCodeChecks())
    assert result.passed is passed, result.detail
    # A verdict's detail never quotes the ground truth (it may be shown for held-out tasks).
    truth = json.dumps(core.expected(task_id))
    assert result.detail == "ok" or truth.strip('"') not in result.detail


async def test_references_pass_their_own_host_checks() -> None:
    suite = FileSuite.load(EXAMPLE)
    assert len(suite.task_ids()) == 200
    checked = 0
    for task_id in suite.task_ids():
        if suite.task(task_id).kind == "function_call" or not _is_python(suite, task_id):
            result = await suite.check(task_id, suite.reference_output(task_id), NoCodeChecks())
            assert result.passed, (task_id, result.detail)
            checked += 1
    assert checked == 160


def _is_python(suite: FileSuite, task_id: str) -> bool:
    return type(suite._task(task_id).rule).__name__ == "Python"


BAD = [
    ('{"id": "a", "prompt": "x", "expected": 1}', "key 'check': missing"),
    ('{"id": "a", "prompt": "x", "check": {"type": "exact"}}', "key 'expected': missing"),
    ('{"prompt": "x", "expected": 1, "check": {"type": "exact"}}', "key 'id': missing"),
    (
        '{"id": "a", "prompt": "x", "expected": 1, "check": {"type": "fuzzy"}}',
        "key 'check.type': expected one of exact, number, regex, calls, python",
    ),
    (
        '{"id": "a", "prompt": "x", "expected": 1, "check": {"type": "exact", "casefld": true}}',
        "key 'check.casefld': unknown key",
    ),
    (
        '{"id": "a", "prompt": "x", "expected": 1, "check": {"type": "exact"}, "expect": 2}',
        "key 'expect': unknown key",
    ),
    (
        '{"id": "a", "prompt": "x", "expected": "12", "check": {"type": "number"}}',
        "key 'expected': a 'number' check needs a number",
    ),
    (
        '{"id": "a", "prompt": "x", "expected": 1, "check": {"type": "number", "tol": -1}}',
        "key 'check.tol'",
    ),
    (
        '{"id": "a", "prompt": "x", "expected": "(", "check": {"type": "regex"}}',
        "key 'expected': not a valid regular expression",
    ),
    (
        '{"id": "a", "prompt": "x", "expected": [], "check": {"type": "calls"}}',
        "key 'tools': a 'calls' check needs the tools",
    ),
    (
        '{"id": "a", "prompt": [{"role": "robot", "content": "x"}], "expected": 1, '
        '"check": {"type": "exact"}}',
        "key 'prompt[0].role'",
    ),
    ('{"id": "a", "prompt": "", "expected": 1, "check": {"type": "exact"}}', "key 'prompt'"),
    ('{"id": "a b", "prompt": "x", "expected": 1, "check": {"type": "exact"}}', "key 'id'"),
    (
        '{"id": "a", "prompt": "x", "expected": 1, "check": {"type": "exact"}, "id": "b"}',
        "key 'id' appears twice",
    ),
    ('{"id": "a", "prompt": "x", "expected": NaN, "check": {"type": "exact"}}', "NaN is not JSON"),
    ('{"id": "a", "prompt": "x", "expected": 1, "check": {"type": "exact"}', "not one JSON object"),
    ('["a"]', "key '(line)': expected one JSON object per line"),
    (
        '{"id": "a", "prompt": "x", "expected": 1, "check": {"type": "python", '
        '"checker": "nowhere.py:f"}}',
        "key 'check.checker'",
    ),
]


@pytest.mark.parametrize(("line", "message"), BAD)
def test_a_bad_line_names_file_line_and_key(tmp_path: Path, line: str, message: str) -> None:
    good = CORE[0]
    path = _write(tmp_path / "tasks.jsonl", [good, "", line])
    with pytest.raises(ConfigError) as err:
        FileSuite.load(path)
    text = str(err.value)
    assert text.startswith(f"{path}:3: "), text
    assert message in text, text
    assert "\n" not in text


def test_duplicate_ids_are_refused_across_the_files_of_a_folder(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", CORE[:2])
    _write(tmp_path / "b.jsonl", [CORE[2], {**CORE[3], "id": "t2"}])
    with pytest.raises(
        ConfigError,
        match=r"b\.jsonl:2: key 'id': 't2' is already the id of "
        r"the task on a\.jsonl:2",
    ):
        FileSuite.load(tmp_path)


def test_calls_answers_are_checked_against_the_tools(tmp_path: Path) -> None:
    wrong = {**CORE[5], "expected": [{"name": "get_weather", "arguments": {"town": ["x"]}}]}
    with pytest.raises(ConfigError, match=r":1: key 'expected\[0\]\.arguments\.town': tool "):
        FileSuite.load(_write(tmp_path / "t.jsonl", [wrong]))
    missing = {**CORE[5], "expected": [{"name": "get_weather", "arguments": {"unit": [""]}}]}
    with pytest.raises(ConfigError, match=r"requires 'city'"):
        FileSuite.load(_write(tmp_path / "t.jsonl", [missing]))


def test_empty_missing_and_non_utf8_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no tasks"):
        FileSuite.load(_write(tmp_path / "empty.jsonl", ["", "  "]))
    with pytest.raises(ConfigError, match="does not exist"):
        FileSuite.load(tmp_path / "nowhere.jsonl")
    (tmp_path / "latin.jsonl").write_bytes(b'{"id": "\xe9"}\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        FileSuite.load(tmp_path / "latin.jsonl")
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(ConfigError, match=r"holds no \.jsonl files"):
        FileSuite.load(folder)


def test_the_name_carries_a_hash_of_the_tasks_and_their_checkers(tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text("def ok(output, expected):\n    return True\n")
    task = {
        "id": "p",
        "prompt": "x",
        "expected": None,
        "check": {"type": "python", "checker": "check.py:ok"},
    }
    path = _write(tmp_path / "mine.jsonl", [CORE[0], task])
    first = FileSuite.load(path)
    assert first.name.startswith("file:mine@") and first.sources == [path, tmp_path / "check.py"]
    assert FileSuite.load(path).name == first.name
    (tmp_path / "check.py").write_text("def ok(output, expected):\n    return False\n")
    second = FileSuite.load(path)
    _write(path, [{**CORE[0], "expected": "Lyon"}, task])
    third = FileSuite.load(path)
    assert len({first.name, second.name, third.name}) == 3


def test_file_specs_resolve_and_reload(tmp_path: Path, asset_cache: Path) -> None:
    path = _write(tmp_path / "tasks.jsonl", CORE)
    assert parse_spec(f"file:{path}") == ("file", (str(path),))
    with pytest.raises(ConfigError, match="no path after 'file:'"):
        parse_spec("file:")
    suite = load_suite(f"file:{path}", asset_cache)
    assert load_suite(f"file:{tmp_path}/./tasks.jsonl", asset_cache) is suite
