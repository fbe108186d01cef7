"""What a supervisor sees of a real daemon: systemd's notify protocol on a real datagram
socket (READY=1 only once ``harnessctl status`` answers, the watchdog's pings, STOPPING=1
at a stop), and the metrics port's ``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import itertools
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.control.client import ControlClient
from daemon.errors import DaemonNotRunning
from tests.daemon_process import ctl, start_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow]

WATCHDOG_S = 2.0


@dataclass
class NotifyListener:
    """The service manager's side: a datagram socket, read by a thread that runs
    ``harnessctl status`` the moment READY=1 arrives."""

    sock: socket.socket
    state_dir: Path
    messages: list[tuple[float, str]] = field(default_factory=list)
    status_at_ready: int | None = None
    live_at_ready: str | None = None
    started_at_ready: int = 0
    ready: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return  # closed at the end of the test
            self.messages.append((time.monotonic(), data.decode()))
            if "READY=1" in data.decode().splitlines() and not self.ready.is_set():
                self.at_ready()
                self.ready.set()

    def at_ready(self) -> None:
        """What is true the moment READY=1 arrives: the control socket answers status (at
        once, in this process, then as harnessctl), and the daemon said it is up."""
        try:
            with ControlClient(self.state_dir / "control.sock", timeout=10) as c:
                self.live_at_ready = str(c.call("status")["live"]["version"])
        except DaemonNotRunning as exc:
            self.live_at_ready = str(exc)
        self.status_at_ready = ctl(self.state_dir, "status").returncode
        db = sqlite3.connect(self.state_dir / "state.db")
        try:
            self.started_at_ready = db.execute(
                "SELECT COUNT(*) FROM events WHERE kind = 'daemon.started'"
            ).fetchone()[0]
        finally:
            db.close()

    def states(self, state: str) -> list[float]:
        return [when for when, text in self.messages if state in text.splitlines()]


def test_readiness_watchdog_and_stop_on_a_notify_socket(tmp_path: Path, asset_cache: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    listener = NotifyListener(sock, tmp_path / "state")
    threading.Thread(target=listener.run, daemon=True).start()
    env = {
        "NOTIFY_SOCKET": str(tmp_path / "notify.sock"),
        "WATCHDOG_USEC": str(int(WATCHDOG_S * 1e6)),
    }
    try:
        daemon = start_daemon(
            tmp_path, asset_cache, env=env, settings_text="\n[metrics]\nenabled = true\nport = 0\n"
        )
        try:
            assert listener.ready.wait(60), listener.messages
            # The moment READY=1 arrived, harnessctl status answered.
            assert listener.live_at_ready == "v0001", listener.live_at_ready
            assert listener.status_at_ready == 0, daemon.log.read_text()[-3000:]
            assert listener.started_at_ready == 1  # after everything started
            ready_text = next(t for _, t in listener.messages if "READY=1" in t.splitlines())
            assert "STATUS=live version v0001" in ready_text

            with daemon.client() as c:
                url = c.call("status")["metrics"]["url"]
            with httpx2.Client(base_url=url, timeout=30) as http:
                assert http.get("/healthz").json() == {"status": "alive"}
                ready = http.get("/readyz")
                assert ready.status_code == 200, ready.text
                scrape = http.get("/metrics")
            assert scrape.headers["content-type"].startswith("text/plain")
            names = {f.name for f in text_string_to_metric_families(scrape.text)}
            assert {"harnessd_candidates", "harnessd_tokens", "harnessd_live_version_info"} <= names

            # Pings at half the watchdog's period, while the daemon answers.
            time.sleep(WATCHDOG_S * 2.5)
            pings = listener.states("WATCHDOG=1")
            assert len(pings) >= 3, listener.messages
            gaps = [b - a for a, b in itertools.pairwise(pings)]
            assert max(gaps) < WATCHDOG_S, gaps
            assert not listener.states("STOPPING=1")
        finally:
            assert daemon.stop() == 0, daemon.log.read_text()[-3000:]
        [stopping] = listener.states("STOPPING=1")
        assert stopping > listener.states("READY=1")[0]
        # The daemon's children never saw systemd's socket (it left the environment).
        assert "NOTIFY_SOCKET" not in daemon.log.read_text()
    finally:
        sock.close()
