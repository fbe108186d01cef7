"""The OpenAI-compatible endpoint of a real daemon on the embedded default model, with the
real ``openai`` SDK as the client: chat, a tool-call round trip, auth, bad input, a client
that goes away, the Unix socket, the probes beside the API, and labelling endpoint traffic
(the daemon: the ``endpoint`` fixture of tests/endpoint/conftest.py, shared with the other
files here)."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import openai
import pytest

from tests.endpoint.endpoint_daemon import MAX_BODY, WEATHER, Endpoint
from tests.support.scrape import samples

pytestmark = [pytest.mark.docker, pytest.mark.model, pytest.mark.slow]


def _error(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return dict(body["error"])


def test_chat_is_answered_by_the_live_version_and_recorded(endpoint: Endpoint) -> None:
    client = endpoint.client()
    raw = client.chat.completions.with_raw_response.create(
        model="harnessd",
        messages=[
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "What colour is the sky on a clear day?"},
        ],
        max_tokens=32,
    )
    completion = raw.parse()
    assert raw.headers["x-harnessd-version"] == "v0001"
    request_id = int(raw.headers["x-harnessd-request"])
    assert completion.id == f"chatcmpl-{request_id}"
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content.strip()
    assert choice.message.tool_calls is None
    # Usage is the gateway's metering of the run: the ledger's rows for it.
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    [(prompt, completion_tokens, calls)] = endpoint.rows(
        "SELECT SUM(prompt_tokens), SUM(completion_tokens), COUNT(*) FROM ledger WHERE run_id=?",
        f"live-{request_id}",
    )
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (
        prompt,
        completion_tokens,
    )
    assert calls >= 1
    [(kind, version, state)] = endpoint.rows(
        "SELECT r.kind, v.name, r.state FROM requests r JOIN versions v ON v.id = r.version_id"
        " WHERE r.id=?",
        request_id,
    )
    assert (kind, version, state) == ("chat", "v0001", "done")
    models = client.models.list()
    assert [m.id for m in models.data] == ["harnessd"]

    # Recorded like 'ask': a person labels it into a private suite.
    with endpoint.daemon.client() as c:
        labelled = c.call(
            "label",
            request=request_id,
            suite="from-app",
            expected="blue",
            check={"type": "regex", "ignorecase": True},
        )
    line = json.loads(Path(labelled["path"]).read_text().splitlines()[0])
    assert line["prompt"][1] == {
        "role": "user",
        "content": "What colour is the sky on a clear day?",
    }


def test_a_tool_call_round_trip(endpoint: Endpoint) -> None:
    client = endpoint.client()
    messages: list[Any] = [
        {"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}
    ]
    first = client.chat.completions.create(model="harnessd", messages=messages, tools=[WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.tool_calls
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments), dict)

    # The client runs the tool and sends its result back in the next request.
    messages.append(choice.message.model_dump(exclude_none=True))
    result = {"city": "Paris", "temperature_c": 21, "sky": "sunny"}
    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    raw = client.chat.completions.with_raw_response.create(
        model="harnessd", messages=messages, tools=[WEATHER]
    )
    second = raw.parse()
    message = second.choices[0].message
    assert second.choices[0].finish_reason in ("stop", "tool_calls", "length")
    assert message.tool_calls or isinstance(message.content, str)
    # The harness saw the whole conversation: its own call and the client's result.
    [(task,)] = endpoint.rows(
        "SELECT task FROM requests WHERE id=?", int(raw.headers["x-harnessd-request"])
    )
    prompt = json.loads(task)["prompt"]
    assert [m["role"] for m in prompt] == ["user", "assistant", "tool"]
    assert prompt[1]["tool_calls"][0]["id"] == call.id
    assert prompt[2] == {
        "role": "tool",
        "content": json.dumps(result),
        "tool_calls": [],
        "tool_call_id": call.id,
        "name": None,
    }


def test_a_wrong_or_missing_token_is_refused(endpoint: Endpoint) -> None:
    wrong = endpoint.client(api_key="not-the-token-at-all", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.chat.completions.create(model="harnessd", messages=[{"role": "user", "content": "x"}])
    error = _error(caught.value)
    assert error["code"] == "invalid_api_key" and "not-the-token" not in error["message"]
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    with endpoint.raw() as http:
        bare = http.post("/chat/completions", json={"model": "harnessd", "messages": []})
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "invalid_api_key"
    # Nothing reached the live harness.
    assert endpoint.rows("SELECT COUNT(*) FROM requests WHERE task LIKE '%\"x\"%'") == [(0,)]


def test_bad_input_gets_openai_shaped_errors(endpoint: Endpoint) -> None:
    client = endpoint.client(max_retries=0)
    hello = [{"role": "user", "content": "hello"}]
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="gpt-4o", messages=hello)  # type: ignore[arg-type]
    assert _error(missing.value)["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as unknown:
        client.chat.completions.create(
            model="harnessd", messages=hello, extra_body={"frobnicate": True}
        )
    assert _error(unknown.value)["param"] == "frobnicate"
    with pytest.raises(openai.BadRequestError) as role:
        client.chat.completions.create(
            model="harnessd",
            messages=[{"role": "wizard", "content": "x"}],  # type: ignore[list-item,misc]
        )
    assert _error(role.value)["param"] == "messages[0].role"
    with pytest.raises(openai.APIStatusError) as big:
        client.chat.completions.create(
            model="harnessd", messages=[{"role": "user", "content": "x" * (MAX_BODY + 1)}]
        )
    assert big.value.status_code == 413 and _error(big.value)["code"] == "request_too_large"

    auth = {"authorization": f"Bearer {endpoint.token}"}
    with endpoint.raw() as http:
        broken = http.post(
            "/chat/completions",
            content=b'{"model": "harnessd", "messages": [',
            headers=auth | {"content-type": "application/json"},
        )
        assert broken.status_code == 400, broken.text
        assert broken.json()["error"]["code"] == "invalid_json"
        array = http.post("/chat/completions", content=b"[1]", headers=auth)
        assert array.status_code == 400 and array.json()["error"]["type"] == "invalid_request_error"

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts bytes as they come
            for _ in range(MAX_BODY // 1024 + 2):
                yield b" " * 1024

        streamed = http.post("/chat/completions", content=chunks(), headers=auth)
        assert streamed.status_code == 413, streamed.text
        nowhere = http.get("/completions", headers=auth)
        assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "unknown_url"
        wrong_method = http.get("/chat/completions", headers=auth)
        assert wrong_method.status_code == 405 and "error" in wrong_method.json()
    assert "Traceback" not in endpoint.daemon.log.read_text()


def test_the_unix_socket_serves_the_same_api(endpoint: Endpoint) -> None:
    assert stat.S_IMODE(os.stat(endpoint.unix_socket).st_mode) == 0o600
    transport = httpx2.HTTPTransport(uds=str(endpoint.unix_socket))
    with httpx2.Client(transport=transport) as http:
        client = endpoint.client(base_url="http://harnessd/v1", http_client=http)
        assert [m.id for m in client.models.list().data] == ["harnessd"]


def test_the_probes_beside_the_api(endpoint: Endpoint) -> None:
    """Liveness and readiness without the token (a supervisor has none); the metrics only
    with it, counting the endpoint's own requests."""
    base = endpoint.url.removesuffix("/v1")
    auth = {"authorization": f"Bearer {endpoint.token}"}
    with httpx2.Client(base_url=base, timeout=60) as http:
        assert http.get("/healthz").json() == {"status": "alive"}
        ready = http.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}, ready.text
        assert http.get("/metrics").status_code == 401
        assert http.get("/v1/models", headers=auth).status_code == 200
        got = samples(http.get("/metrics", headers=auth).text)
    assert got["harnessd_endpoint_requests_total", (("route", "models"), ("status", "200"))] >= 1
    assert got["harnessd_endpoint_requests_total", (("route", "metrics"), ("status", "401"))] >= 1


@pytest.mark.anyio
async def test_a_client_that_goes_away_cancels_the_run_and_is_charged(
    endpoint: Endpoint,
) -> None:
    client = endpoint.async_client(max_retries=0, timeout=600)
    before = endpoint.rows("SELECT COALESCE(MAX(id), 0) FROM requests")[0][0]
    essay = "Write a very long, detailed essay about the history of the bicycle, in many parts."
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            await client.chat.completions.create(
                model="harnessd", messages=[{"role": "user", "content": essay}]
            )

        tg.start_soon(ask)
        deadline = time.monotonic() + 180
        # Leave only once the model is generating for this request.
        while await anyio.to_thread.run_sync(endpoint.calls_under_way) == 0:
            assert time.monotonic() < deadline, endpoint.daemon.log.read_text()[-3000:]
            await anyio.sleep(0.2)
        await anyio.sleep(1.0)
        tg.cancel_scope.cancel()  # the SDK's connection closes: the client went away
    await client.close()

    request_id, state = await anyio.to_thread.run_sync(endpoint.settled_after, before)
    assert state == "interrupted"
    # The cancelled model call was charged what the local model had counted (not an
    # estimate): the prompt it read and the tokens it wrote before it stopped.
    charged = endpoint.charged(request_id)
    assert charged, "the cancelled call was not charged"
    assert all(estimated == 0 for *_, estimated in charged)
    assert sum(p + c for p, c, _ in charged) > 0
    # Cancelled, not finished: far fewer tokens than the seed's 512 per call.
    assert sum(c for _, c, _ in charged) < 512
    # The daemon still answers.
    again = endpoint.client().chat.completions.create(
        model="harnessd", messages=[{"role": "user", "content": "Say hi."}], max_tokens=8
    )
    assert again.choices[0].message.content is not None


def _readme_example() -> str:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use the live harness from your application", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_example_runs_to_an_answer_or_its_step_limit(
    endpoint: Endpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _readme_example()
    assert "http://127.0.0.1:8642/v1" in example and ".state/endpoint.token" in example
    token_file = endpoint.daemon.state_dir / "endpoint.token"
    code = example.replace("http://127.0.0.1:8642/v1", endpoint.url).replace(
        ".state/endpoint.token", str(token_file)
    )
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    namespace["client"].close()
    printed = capsys.readouterr().out.splitlines()
    limit = namespace["MAX_STEPS"]
    steps = [line for line in printed if line.startswith("step ")]
    assert 1 <= len(steps) <= limit, printed
    assert all("answered by v0001 request" in line for line in steps), printed
    # It ends with the model's answer, or says it stopped at the limit: never more steps.
    last = printed[-1]
    assert last.startswith("answer: ") or (
        len(steps) == limit and last.startswith(f"no answer in {limit} steps")
    ), printed
    # Each step after the first sent the tool results of the step before.
    if len(steps) > 1:
        assert any(m["role"] == "tool" for m in namespace["messages"])
