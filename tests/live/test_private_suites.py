"""Labelled requests become tasks of a private suite, in the file format the loader reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.errors import BadRequest
from daemon.live import private_suites, requests
from daemon.providers.base import Message, ToolSpec
from daemon.store import Store
from daemon.suites.filesuite import FileSuite
from daemon.tasks import Task
from tests.support.code_checks import NoCodeChecks

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": []},
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "state.db")


def _served(store: Store, task: Task, output: object, *, done: bool = True) -> int:
    request_id = requests.start(store, "ask", 1, task)
    if done:
        requests.finish(store, request_id, "done", {"request": request_id, "output": output})
    return request_id


def _ask(text: str) -> Task:
    return Task(id="ask-1", suite="ask", kind="answer", prompt=[Message(role="user", content=text)])


async def test_a_labelled_request_is_a_task_of_the_exported_suite(
    store: Store, tmp_path: Path
) -> None:
    folder = tmp_path / "suites"
    first = _served(store, _ask("Capital of Peru?"), "Lima, I think")
    tools = Task(
        id="simple_python_3",
        suite="bfcl",
        kind="function_call",
        prompt=[
            Message(role="system", content="Use tools."),
            Message(role="user", content="Weather in Oslo?"),
        ],
        tools=[WEATHER],
    )
    second = _served(store, tools, [{"name": "get_weather", "arguments": {"city": "Bergen"}}])
    out = private_suites.label(
        store,
        folder,
        request_id=first,
        suite="team",
        expected="Lima",
        check={"type": "exact", "casefold": True},
    )
    assert out["task"] == f"request-{first}" and out["tasks"] == 1
    private_suites.label(
        store,
        folder,
        request_id=second,
        suite="team",
        task_id="oslo",
        expected=[{"name": "get_weather", "arguments": {"city": ["Oslo"]}}],
        check={"type": "calls"},
    )
    exported = private_suites.export(folder, "team")
    assert exported["tasks"] == 2 and exported["name"].startswith("file:team@")
    lines = [json.loads(line) for line in exported["text"].splitlines()]
    assert lines[0]["prompt"] == "Capital of Peru?" and lines[0]["expected"] == "Lima"
    assert lines[0]["notes"]["answer"] == "Lima, I think"
    assert lines[1]["prompt"][0] == {"role": "system", "content": "Use tools."}
    # The export is a suite the loader reads, and its checks judge as labelled.
    (tmp_path / "mine.jsonl").write_text(exported["text"])
    suite = FileSuite.load(tmp_path / "mine.jsonl")
    assert suite.task_ids() == [f"request-{first}", "oslo"]
    assert suite.task("oslo").kind == "function_call" and suite.task("oslo").tools == [WEATHER]
    assert "notes" not in suite.task("oslo").model_dump_json()
    assert (await suite.check(f"request-{first}", "LIMA", NoCodeChecks())).passed
    calls = [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    assert (await suite.check("oslo", calls, NoCodeChecks())).passed
    assert not (await suite.check("oslo", lines[1]["notes"]["answer"], NoCodeChecks())).passed


def test_labels_are_checked_before_they_are_written(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "suites"
    request = _served(store, _ask("7 + 5?"), "12")
    with pytest.raises(BadRequest, match="key 'expected': a 'number' check needs a number"):
        private_suites.label(
            store,
            folder,
            request_id=request,
            suite="s",
            expected="twelve",
            check={"type": "number"},
        )
    with pytest.raises(BadRequest, match=r"key 'check\.type'"):
        private_suites.label(
            store, folder, request_id=request, suite="s", expected=1, check={"type": "close"}
        )
    with pytest.raises(BadRequest, match="key 'tools': a 'calls' check needs the tools"):
        private_suites.label(
            store, folder, request_id=request, suite="s", expected=[], check={"type": "calls"}
        )
    with pytest.raises(BadRequest, match="no request 99"):
        private_suites.label(
            store, folder, request_id=99, suite="s", expected=1, check={"type": "number"}
        )
    running = _served(store, _ask("still going"), None, done=False)
    with pytest.raises(BadRequest, match="still being served"):
        private_suites.label(
            store, folder, request_id=running, suite="s", expected="x", check={"type": "exact"}
        )
    with pytest.raises(BadRequest, match=r"suite name '\.\./x'"):
        private_suites.label(
            store, folder, request_id=request, suite="../x", expected=12, check={"type": "number"}
        )
    assert not folder.exists()  # nothing was written
    private_suites.label(
        store, folder, request_id=request, suite="s", expected=12, check={"type": "number"}
    )
    with pytest.raises(BadRequest, match="already has a task 'request-1'"):
        private_suites.label(
            store, folder, request_id=request, suite="s", expected=12, check={"type": "number"}
        )
    with pytest.raises(BadRequest, match=r"no labelled suite 'other'; suites: s"):
        private_suites.export(folder, "other")
    (folder / "s.jsonl").write_text('{"id": "broken"}\n')
    with pytest.raises(BadRequest, match=r"s\.jsonl:1: key 'prompt': missing"):
        private_suites.export(folder, "s")
