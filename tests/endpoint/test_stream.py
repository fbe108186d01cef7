"""Streamed chat completions: the chunks (pure), and the application sending them to the
real ``openai`` SDK over an in-process transport, with a stand-in for the live harness."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import openai
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.testclient import TestClient

from daemon.config.settings import EndpointSettings
from daemon.endpoint import wire
from daemon.endpoint.app import KEEPALIVE, EndpointApp
from daemon.endpoint.wire import ApiError, parse_request
from daemon.errors import NotAccepting
from daemon.live.harness import OnStart, Served, Started
from daemon.tasks import Task
from tests.endpoint.chunks import MODELS, WEATHER, sample_body, sdk_tool_calls

pytestmark = pytest.mark.unit

TOKEN = "t" * 32
CALLS = [
    {"name": "get_weather", "arguments": {"city": "Oslo"}},
    {"name": "get_weather", "arguments": {"city": "Bergen"}},
]


def _request(**extra: Any) -> dict[str, Any]:
    return {"model": "harnessd", "messages": [{"role": "user", "content": "hi"}], **extra}


def _joined(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client that accumulates the deltas makes of them (as the SDKs do)."""
    message: dict[str, Any] = {"role": None, "content": None}
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        for choice in chunk["choices"]:
            delta = choice["delta"]
            message["role"] = delta.get("role", message["role"])
            if delta.get("content"):
                message["content"] = (message["content"] or "") + delta["content"]
            for part in delta.get("tool_calls", []):
                call = calls.setdefault(part["index"], {"function": {"arguments": ""}})
                call.update({k: part[k] for k in ("id", "type") if k in part})
                function = part.get("function", {})
                if "name" in function:
                    call["function"]["name"] = function["name"]
                call["function"]["arguments"] += function.get("arguments", "")
            finish = choice["finish_reason"] or finish
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"message": message, "finish_reason": finish}


def _streamed(data: dict[str, Any], output: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    checked = parse_request(data, MODELS)
    body = sample_body(data, output)
    head = wire.stream_head(checked, 12, "v0002", 1)
    return body, [head, *wire.stream_rest(body, include_usage=checked.include_usage)]


@pytest.mark.parametrize(
    ("data", "output"),
    [(_request(stream=True), "It is sunny."), (_request(stream=True, tools=[WEATHER]), CALLS)],
)
def test_the_chunks_join_into_the_whole_response(data: dict[str, Any], output: Any) -> None:
    body, chunks = _streamed(data, output)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert {(c["id"], c["model"], c["system_fingerprint"]) for c in chunks} == {
        ("chatcmpl-12", "harnessd", "v0002")
    }
    joined = _joined(chunks)
    assert joined["message"] == body["choices"][0]["message"]
    assert joined["finish_reason"] == body["choices"][0]["finish_reason"]
    # Without include_usage no chunk carries a usage key.
    assert all("usage" not in c for c in chunks)


def test_tool_calls_stream_their_name_before_their_arguments() -> None:
    _, chunks = _streamed(_request(stream=True, tools=[WEATHER]), CALLS)
    parts = [p for c in chunks for ch in c["choices"] for p in ch["delta"].get("tool_calls", [])]
    assert parts[0] == {
        "index": 0,
        "id": "call_12_0",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    assert parts[1] == {"index": 0, "function": {"arguments": json.dumps({"city": "Oslo"})}}
    assert [p["index"] for p in parts] == [0, 0, 1, 1]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_include_usage_adds_a_last_chunk_with_no_choices() -> None:
    _, chunks = _streamed(
        _request(stream=True, stream_options={"include_usage": True}), "It is sunny."
    )
    *rest, last = chunks
    assert all(c["usage"] is None for c in rest)
    assert last["choices"] == []
    assert last["usage"] == {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}


@pytest.mark.parametrize(
    ("data", "param"),
    [
        (_request(stream="yes"), "stream"),
        (_request(stream_options={"include_usage": True}), "stream_options"),
        (_request(stream=True, stream_options=[1]), "stream_options"),
        (_request(stream=True, stream_options={"chunk": 1}), "stream_options.chunk"),
        (
            _request(stream=True, stream_options={"include_usage": "yes"}),
            "stream_options.include_usage",
        ),
    ],
)
def test_bad_stream_arguments_are_refused_by_name(data: dict[str, Any], param: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_request(data, MODELS)
    assert (caught.value.status, caught.value.param) == (400, param)


class _Harness:
    """The live harness's part: a run that starts, takes ``delay`` seconds and answers."""

    def __init__(
        self,
        output: Any,
        *,
        delay: float = 0.0,
        error: str | None = None,
        refuse: Exception | None = None,
    ) -> None:
        self.output, self.delay, self.error, self.refuse = output, delay, error, refuse
        self.cancelled = False

    async def chat(self, task: Task, on_start: OnStart | None = None) -> Served:
        if self.refuse is not None:
            raise self.refuse
        if on_start is not None:
            on_start(Started(7, "v0003"))
        try:
            await anyio.sleep(self.delay)
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        answer = {
            "request": 7,
            "version": "v0003",
            "error": self.error,
            "detail": "",
            "prompt_tokens": 3,
            "completion_tokens": 2,
        }
        return Served(answer, self.output, None)


class _Observer:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def request_done(self, route: str, status: int, seconds: float) -> None:
        assert seconds >= 0
        self.seen.append((route, status))


class _Probes:
    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(self, request: Request) -> Response:
        return PlainTextResponse("not ready", status_code=503)

    async def metrics(self, request: Request) -> Response:
        return PlainTextResponse("harnessd_up 1\n")


def _app(harness: _Harness, observer: _Observer | None = None, **settings: Any) -> EndpointApp:
    return EndpointApp(
        harness,
        TOKEN,
        EndpointSettings(enabled=True, **settings),
        observer=observer,
        probes=_Probes(),
    )


AUTH = {"authorization": f"Bearer {TOKEN}"}


def _events(text: str) -> list[str]:
    return [block for block in text.split("\n\n") if block]


def test_a_stream_keeps_the_connection_alive_while_the_harness_works() -> None:
    observer = _Observer()
    app = _app(_Harness("It is sunny.", delay=0.35), observer, keepalive_s=0.1)
    with TestClient(app.app) as http:
        response = http.post("/v1/chat/completions", json=_request(stream=True), headers=AUTH)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert (response.headers["x-harnessd-version"], response.headers["x-harnessd-request"]) == (
        "v0003",
        "7",
    )
    events = _events(response.text)
    assert events[0].startswith("data: ") and '"role":"assistant"' in events[0]
    # The role first, then keep-alive comments while the run works, then the answer.
    keepalives = [e for e in events if e == KEEPALIVE.decode().strip()]
    assert len(keepalives) >= 2, events
    assert events.index(keepalives[0]) == 1
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events if e.startswith("data: {")]
    assert _joined(chunks)["message"]["content"] == "It is sunny."
    assert observer.seen == [("chat", 200)]


def test_a_refusal_before_the_run_starts_is_a_plain_error_with_its_status() -> None:
    observer = _Observer()
    app = _app(_Harness(None, refuse=NotAccepting("harnessd is stopping")), observer)
    with TestClient(app.app) as http:
        response = http.post("/v1/chat/completions", json=_request(stream=True), headers=AUTH)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
    assert observer.seen == [("chat", 503)]
    assert app.in_flight == 0


def test_a_run_that_fails_after_the_stream_began_ends_it_with_an_error_event() -> None:
    observer = _Observer()
    app = _app(_Harness(None, error="timeout"), observer)
    with TestClient(app.app) as http:
        response = http.post("/v1/chat/completions", json=_request(stream=True), headers=AUTH)
    assert response.status_code == 200
    events = _events(response.text)
    error = json.loads(events[-1].removeprefix("data: "))["error"]
    assert error["code"] == "harness_timeout" and "request 7 on v0003" in error["message"]
    assert "data: [DONE]" not in events
    assert observer.seen == [("chat", 500)]


def test_probes_answer_without_the_token_and_metrics_only_with_it() -> None:
    observer = _Observer()
    with TestClient(_app(_Harness("x"), observer).app) as http:
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 503
        assert http.get("/metrics").status_code == 401
        assert http.get("/metrics", headers=AUTH).text == "harnessd_up 1\n"
        assert http.get("/v1/models", headers=AUTH).status_code == 200
    assert observer.seen == [("metrics", 401), ("metrics", 200), ("models", 200)]


@pytest.mark.anyio
async def test_the_openai_sdk_reads_a_streamed_answer_and_streamed_tool_calls() -> None:
    harness = _Harness(CALLS)
    transport = httpx2.ASGITransport(app=_app(harness).app)
    async with httpx2.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(base_url="http://endpoint/v1", api_key=TOKEN, http_client=http)
        stream = await client.chat.completions.create(
            model="harnessd",
            messages=[{"role": "user", "content": "Weather in Oslo and Bergen?"}],
            tools=[WEATHER],  # type: ignore[list-item]
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        harness.output = "It is sunny."
        text = await client.chat.completions.create(
            model="harnessd", messages=[{"role": "user", "content": "Weather?"}], stream=True
        )
        words = "".join([c.choices[0].delta.content or "" async for c in text if c.choices])
    assert words == "It is sunny."
    calls = sdk_tool_calls(chunks)
    assert [json.loads(c["arguments"]) for c in calls.values()] == [
        {"city": "Oslo"},
        {"city": "Bergen"},
    ]
    assert {c["name"] for c in calls.values()} == {"get_weather"}
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 5
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
