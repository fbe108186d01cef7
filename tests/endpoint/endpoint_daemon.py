"""A real daemon with the OpenAI-compatible endpoint on, and the real ``openai`` SDK for it."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import openai

from tests.daemon_process import RunningDaemon, start_daemon


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

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(self.daemon.state_dir / "state.db")
        try:
            return list(db.execute(sql, args))
        finally:
            db.close()


def start_endpoint(tmp_path: Path, asset_cache: Path, policy: str = "", **extra: Any) -> Endpoint:
    daemon = start_daemon(
        tmp_path, asset_cache, policy, settings_text=endpoint_settings(tmp_path, **extra)
    )
    with daemon.client() as c:
        where = c.call("status")["endpoint"]
    token = (daemon.state_dir / "endpoint.token").read_text().strip()
    return Endpoint(daemon, where["url"], Path(where["unix_socket"]), token)
