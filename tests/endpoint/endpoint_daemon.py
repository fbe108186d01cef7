"""A real daemon with the OpenAI-compatible endpoint on, and the real ``openai`` SDK for it."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import openai

from tests.daemon_process import RunningDaemon, start_daemon

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"],
        },
    },
}
MAX_BODY = 65536
# Short, so a stream on the embedded model shows its keep-alive comments.
KEEPALIVE_S = 0.5


def endpoint_settings(tmp_path: Path, **extra: Any) -> str:
    lines = ["[endpoint]", "enabled = true", "port = 0", f'unix_socket = "{tmp_path / "ep.sock"}"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n" + "\n".join(lines) + "\n"


@dataclass
class Endpoint:
    daemon: RunningDaemon
    url: str
    unix_socket: Path
    token: str
    # Closed by :meth:`close` (an SDK client left open leaks its sockets).
    clients: list[openai.OpenAI] = field(default_factory=list)

    def client(self, **options: Any) -> openai.OpenAI:
        options = {"base_url": self.url, "api_key": self.token} | options
        client = openai.OpenAI(**options)
        self.clients.append(client)
        return client

    def async_client(self, **options: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url, api_key=self.token, **options)

    def close(self) -> int:
        """Close the clients and stop the daemon; its exit code."""
        for client in self.clients:
            client.close()
        return self.daemon.stop()

    def raw(self) -> httpx2.Client:
        return httpx2.Client(base_url=self.url, timeout=120)

    @contextmanager
    def stream(self, body: dict[str, Any]) -> Iterator[httpx2.Response]:
        """A streamed chat completion read as raw lines (its connection closes on exit)."""
        auth = {"authorization": f"Bearer {self.token}"}
        with (
            self.raw() as http,
            http.stream("POST", "/chat/completions", json=body, headers=auth) as response,
        ):
            yield response

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(self.daemon.state_dir / "state.db")
        try:
            return list(db.execute(sql, args))
        finally:
            db.close()

    def calls_under_way(self) -> int:
        """Model calls the daemon is making now (``status``)."""
        with self.daemon.client() as c:
            calls = c.call("status")["model_calls"]
        return sum(int(v["calls"]) for v in calls.values())

    def settled_after(self, before: int, timeout: float = 60) -> tuple[int, str]:
        """The one request newer than id ``before``, once it has ended and no model call is
        under way: its id and state."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows("SELECT id, state FROM requests WHERE id > ?", before)
            if rows and rows[0][1] != "running" and self.calls_under_way() == 0:
                break
            assert time.monotonic() < deadline, (rows, self.daemon.log.read_text()[-3000:])
            time.sleep(0.2)
        [(request_id, state)] = rows
        return int(request_id), str(state)

    def charged(self, request_id: int) -> list[tuple[int, int, int]]:
        """The request's ledger rows: prompt and completion tokens, and whether estimated."""
        return [
            (int(p), int(c), int(e))
            for p, c, e in self.rows(
                "SELECT prompt_tokens, completion_tokens, estimated FROM ledger WHERE run_id=?",
                f"live-{request_id}",
            )
        ]


def start_endpoint(tmp_path: Path, asset_cache: Path, policy: str = "", **extra: Any) -> Endpoint:
    daemon = start_daemon(
        tmp_path, asset_cache, policy, settings_text=endpoint_settings(tmp_path, **extra)
    )
    with daemon.client() as c:
        where = c.call("status")["endpoint"]
    token = (daemon.state_dir / "endpoint.token").read_text().strip()
    return Endpoint(daemon, where["url"], Path(where["unix_socket"]), token)
