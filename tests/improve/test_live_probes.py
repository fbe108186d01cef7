"""Requests made in the live requests' shape: field for field what ``harnessctl ask`` and the
endpoint's chats hand a harness, with words of the candidate's own key."""

from __future__ import annotations

import inspect
import re

import pytest

from daemon.endpoint import wire
from daemon.improve import live_probes
from daemon.improve.live_probes import probe, probes
from daemon.live.harness import LiveHarness
from daemon.tasks import Task

pytestmark = pytest.mark.unit


def test_the_suites_are_those_the_live_paths_give() -> None:
    assert live_probes.CHAT_SUITE == wire.TASK_SUITE
    # LiveHarness.ask names its tasks' suite inline; read it from the source it runs.
    assert f'suite="{live_probes.ASK_SUITE}"' in inspect.getsource(LiveHarness.ask)


def test_an_ask_is_one_user_message_like_a_served_ask() -> None:
    task = probe("secret", "c1", "ask")
    assert re.fullmatch(r"ask-[0-9a-f]{8}", task.id)
    assert (task.suite, task.kind, task.tools, task.meta) == ("ask", "answer", [], {})
    (message,) = task.prompt
    assert message.role == "user" and message.content


@pytest.mark.parametrize(("shape", "kind"), [("chat", "answer"), ("chat_tools", "function_call")])
def test_a_chat_has_a_clients_system_prompt_like_a_served_chat(shape: str, kind: str) -> None:
    for i in range(20):
        task = probe("secret", f"c1\0{i}", shape)
        assert re.fullmatch(r"chat-[0-9a-f]{12}", task.id)
        assert (task.suite, task.kind) == ("chat", kind)
        system, user = task.prompt
        assert system.role == "system" and user.role == "user"
        assert re.search(r"\b[A-Z]{2}\d{2,4}\b", system.content or ""), system.content
        assert set(task.meta) <= {"max_tokens"}
        if kind == "function_call":
            assert task.tools and all(t.parameters["type"] == "object" for t in task.tools)
            # A client's declaration: no note of the BFCL suites' Python types.
            assert all("Python" not in t.description for t in task.tools)
        else:
            assert task.tools == []


def test_each_candidate_gets_requests_of_its_own() -> None:
    first, again, other = probes("s", "c1", 6), probes("s", "c1", 6), probes("s", "c2", 6)
    assert first == again
    words = {m.content for t in first for m in t.prompt}
    assert not words & {m.content for t in other for m in t.prompt}
    assert sorted(t.kind for t in first) == ["answer"] * 4 + ["function_call"] * 2
    assert probes("s", "c1", 0) == []


def test_a_made_request_is_a_task_the_endpoint_could_have_made() -> None:
    """The chat with tools round-trips through the task model as a recorded request does."""
    task = probe("s", "c9", "chat_tools")
    assert Task.model_validate_json(task.model_dump_json()) == task
