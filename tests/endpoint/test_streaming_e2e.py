"""Streamed chat completions from a real daemon on the embedded model: the ``openai`` SDK
streams a plain answer and a tool call, the stream keeps itself alive while the harness
works, and a client that leaves mid-stream cancels its run and is charged."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.endpoint.chunks import sdk_tool_calls
from tests.endpoint.endpoint_daemon import KEEPALIVE_S, WEATHER, Endpoint

pytestmark = [pytest.mark.docker, pytest.mark.model, pytest.mark.slow]


def _ledger(endpoint: Endpoint, request_id: int) -> tuple[int, int]:
    [(prompt, completion)] = endpoint.rows(
        "SELECT SUM(prompt_tokens), SUM(completion_tokens) FROM ledger WHERE run_id=?",
        f"live-{request_id}",
    )
    return int(prompt), int(completion)


def test_the_sdk_streams_a_plain_answer_with_its_usage(endpoint: Endpoint) -> None:
    client = endpoint.client(max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="harnessd",
        messages=[{"role": "user", "content": "What colour is the sky on a clear day?"}],
        max_tokens=32,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert raw.headers["content-type"].startswith("text/event-stream")
    request_id = int(raw.headers["x-harnessd-request"])
    assert raw.headers["x-harnessd-version"] == "v0001"
    chunks = list(raw.parse())
    assert chunks[0].choices[0].delta.role == "assistant"
    assert {c.id for c in chunks} == {f"chatcmpl-{request_id}"}
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in ("stop", "length") and not any(finishes[:-1])
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    # The usage chunk is the gateway's metering, as in a whole response.
    assert (usage.prompt_tokens, usage.completion_tokens) == _ledger(endpoint, request_id)
    [(kind, state)] = endpoint.rows("SELECT kind, state FROM requests WHERE id=?", request_id)
    assert (kind, state) == ("chat", "done")


def test_the_sdk_streams_a_tool_call_and_the_round_trip_goes_on(endpoint: Endpoint) -> None:
    client = endpoint.client(max_retries=0)
    messages: list[Any] = [
        {"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}
    ]
    stream = client.chat.completions.create(
        model="harnessd", messages=messages, tools=[WEATHER], stream=True
    )
    chunks = list(stream)
    calls = sdk_tool_calls(chunks)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
    assert finish == "tool_calls", calls
    call = calls[0]
    assert call["name"] == "get_weather" and call["id"].startswith("call_")
    assert isinstance(json.loads(call["arguments"]), dict)
    # What the client assembled from the deltas goes back as the assistant's turn.
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": '{"temp_c": 21}'})
    again = client.chat.completions.create(
        model="harnessd", messages=messages, tools=[WEATHER], stream=True
    )
    assert [c.choices[0].finish_reason for c in again if c.choices][-1] in (
        "stop",
        "tool_calls",
        "length",
    )


def test_a_stream_sends_keepalives_while_the_harness_works(endpoint: Endpoint) -> None:
    body = {
        "model": "harnessd",
        "messages": [{"role": "user", "content": "Name three rivers in Europe."}],
        "stream": True,
    }
    lines: list[tuple[float, str]] = []
    start = time.monotonic()
    with endpoint.stream(body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line:
                lines.append((time.monotonic() - start, line))
    texts = [t for _, t in lines]
    assert texts[0].startswith("data: ") and '"role":"assistant"' in texts[0]
    assert texts[-1] == "data: [DONE]"
    keepalives = [when for when, t in lines if t == ": keep-alive"]
    answer_at = next(when for when, t in lines if '"finish_reason":"' in t)
    # The run takes seconds on the embedded model: comments come every KEEPALIVE_S meanwhile.
    assert len(keepalives) >= max(1, int(answer_at / KEEPALIVE_S) - 2), lines[:5]
    assert all(when < answer_at for when in keepalives)


def test_a_client_that_leaves_mid_stream_cancels_the_run_and_is_charged(
    endpoint: Endpoint,
) -> None:
    before = endpoint.rows("SELECT COALESCE(MAX(id), 0) FROM requests")[0][0]
    essay = "Write a very long, detailed essay about the history of the bicycle, in many parts."
    body = {"model": "harnessd", "messages": [{"role": "user", "content": essay}], "stream": True}
    with endpoint.stream(body) as response:
        lines = response.iter_lines()
        assert '"role":"assistant"' in next(lines)  # the stream has begun
        deadline = time.monotonic() + 180
        # Leave only once the model is generating for this request.
        while endpoint.calls_under_way() == 0:
            assert time.monotonic() < deadline, endpoint.daemon.log.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)
    # The connection is closed here: the client went away.
    request_id, state = endpoint.settled_after(before)
    assert state == "interrupted"
    charged = endpoint.charged(request_id)
    assert charged and all(estimated == 0 for *_, estimated in charged)
    assert sum(p + c for p, c, _ in charged) > 0
    assert sum(c for _, c, _ in charged) < 512  # cut short: charged what it wrote
