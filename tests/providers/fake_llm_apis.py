"""Local HTTP servers that answer like the Anthropic Messages and OpenAI Chat Completions APIs.

The bodies follow the real wire formats (field names, nesting, error envelopes), so the
real SDKs parse them exactly as they would parse the hosted APIs' replies. Each server
answers requests with the next reply from a list (the last one repeats) and records every
request it received.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeAPI:
    """``answer``: a reply made from each request instead (a scripted model that reads what
    it was sent, e.g. a proposer acting on the failures in its prompt)."""

    def __init__(
        self, replies: list[Reply], answer: Callable[[Received], Reply] | None = None
    ) -> None:
        self.replies = list(replies)
        self.answer = answer
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self.url = ""
        self.models_status = 200  # what a model listing (GET) answers

    def next_reply(self, request: Received) -> Reply:
        with self._lock:
            self.received.append(request)
            if self.answer is not None:
                return self.answer(request)
            return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


def _handler(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = api.next_reply(Received("POST", self.path, headers, body))
            if reply.delay_s:
                time.sleep(reply.delay_s)
            payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def do_GET(self) -> None:
            # Model listings (what the daemon's probe of a provider asks for).
            headers = {k.lower(): v for k, v in self.headers.items()}
            api.received.append(Received("GET", self.path, headers, None))
            payload = json.dumps({"object": "list", "data": MODELS}).encode()
            self.send_response(api.models_status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


MODELS = [{"id": "gpt-test", "object": "model", "created": 0, "owned_by": "test"}]


@contextmanager
def serve(
    replies: list[Reply], port: int = 0, answer: Callable[[Received], Reply] | None = None
) -> Iterator[FakeAPI]:
    api = FakeAPI(replies, answer)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(api))
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- Anthropic Messages API ------------------------------------------------------------


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    input_tokens: int,
    output_tokens: int,
    stop_reason: str = "end_turn",
    model: str = "claude-test-1",
    cache_read: int = 0,
    cache_creation: int = 0,
) -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation,
            "cache_read_input_tokens": cache_read,
            "service_tier": "standard",
        },
    }


def anthropic_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, body, {"request-id": "req_011CTest", **headers})


# -- OpenAI Chat Completions -----------------------------------------------------------


def openai_completion(
    *,
    content: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    model: str = "gpt-test-2025-01-01",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
        "service_tier": "default",
        "system_fingerprint": "fp_test",
    }


def openai_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_error(
    status: int, kind: str, message: str, code: str | None = None, **headers: str
) -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply(status, body, {"x-request-id": "req_test", **headers})
