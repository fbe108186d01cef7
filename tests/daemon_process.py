"""A real ``harnessd serve`` process in a temporary state dir (service, control, loop tests)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.control.client import ControlClient
from tests.support.heavy import refuse_in_unit_tests

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class RunningDaemon:
    proc: subprocess.Popen[str]
    state_dir: Path
    config: Path
    policy: Path
    log: Path

    @property
    def socket(self) -> Path:
        return self.state_dir / "control.sock"

    def client(self, timeout: float | None = 30.0) -> ControlClient:
        return ControlClient(self.socket, timeout=timeout)

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


def start_daemon(
    tmp_path: Path,
    asset_cache: Path,
    policy_text: str = "",
    *,
    seed: Path | None = None,
    env: dict[str, str] | None = None,
    settings_text: str = "",
    loop_watch: bool = False,
) -> RunningDaemon:
    """``settings_text``: more of ``harnessd.toml`` (provider tables), after the defaults.
    ``loop_watch``: run it under asyncio's debug mode, every step that holds the event loop
    too long reported in its log (``tests/support/loop_watch.py``)."""
    refuse_in_unit_tests("a harnessd daemon (tests/daemon_process.py)")
    state = tmp_path / "state"
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text or "[loop]\nenabled = false\n")
    config = tmp_path / "harnessd.toml"
    seed = seed or ROOT / "seeds" / "minimal"
    config.write_text(
        f'state_dir = "{state}"\ncache_dir = "{asset_cache}"\npolicy = "{policy}"\n'
        f'harnesses_dir = "{tmp_path / "harnesses"}"\nseed = "{seed}"\n'
        'log_format = "json"\n' + settings_text
    )
    log = tmp_path / "daemon.log"
    watch = [str(ROOT / "tests" / "support" / "loop_watch.py")]
    launcher = [sys.executable, *(watch if loop_watch else ["-m", "daemon.cli"])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSD_")} | (env or {})
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [*launcher, "--config", str(config), "serve"],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            text=True,
            env=env,
            cwd=tmp_path,
        )
    daemon = RunningDaemon(proc, state, config, policy, log)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"harnessd exited {proc.returncode}:\n{log.read_text()}")
        if daemon.socket.exists():
            try:
                with daemon.client() as c:
                    c.call("status")
                return daemon
            except Exception:
                pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"harnessd did not come up:\n{log.read_text()}")


def ctl(daemon: RunningDaemon | Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``harnessctl --state-dir ... args`` as a user runs it (its own process, wide columns)."""
    state = daemon.state_dir if isinstance(daemon, RunningDaemon) else daemon
    return subprocess.run(
        [sys.executable, "-m", "daemon.control.ctl", "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"COLUMNS": "200"},
    )


def collect_events(daemon: RunningDaemon) -> queue.Queue[dict[str, Any]]:
    """The daemon's event stream (``watch``), read into a queue by a background thread."""
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    ready = threading.Event()

    def run() -> None:
        with daemon.client(timeout=None) as c:
            stream = c.watch()
            ready.set()
            for event in stream:
                events.put(event)

    threading.Thread(target=run, daemon=True).start()
    assert ready.wait(30)
    return events


def wait_for_event(
    events: queue.Queue[dict[str, Any]], kind: str, timeout: float = 30
) -> dict[str, Any]:
    """The next event of ``kind`` from ``collect_events``'s queue (earlier ones dropped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = events.get(timeout=0.5)
        except queue.Empty:
            continue
        if event["kind"] == kind:
            return event
    raise AssertionError(f"no {kind} event within {timeout} s")


def stored_events(state_dir: Path, kind: str) -> list[dict[str, Any]]:
    """The data of every stored event of ``kind`` in a daemon's state dir, oldest first."""
    import json
    import sqlite3

    db = sqlite3.connect(state_dir / "state.db")
    try:
        rows = db.execute("SELECT data FROM events WHERE kind = ? ORDER BY id", (kind,))
        return [json.loads(r[0]) for r in rows.fetchall()]
    finally:
        db.close()
