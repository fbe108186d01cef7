"""Editing the policy file: invalid edits are reported and ignored, valid ones apply live."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from tests.daemon_process import RunningDaemon


def _collect(daemon: RunningDaemon) -> queue.Queue[dict[str, Any]]:
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


def _wait_for(
    events: queue.Queue[dict[str, Any]], kind: str, timeout: float = 30
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = events.get(timeout=0.5)
        except queue.Empty:
            continue
        if event["kind"] == kind:
            return event
    raise AssertionError(f"no {kind} event within {timeout} s")


def test_invalid_edit_keeps_old_policy_and_valid_edit_applies(
    running_daemon: RunningDaemon,
) -> None:
    events = _collect(running_daemon)
    policy = running_daemon.policy
    policy.write_text("[loop]\nenabled = false\n[sandbox]\nmemory_mb = 'huge'\n")
    bad = _wait_for(events, "policy.invalid")
    assert str(policy) in bad["message"]
    assert "key 'sandbox.memory_mb'" in bad["message"]
    assert bad["level"] == "error"
    with running_daemon.client() as c:
        assert c.call("policy_show")["policy"]["sandbox"]["memory_mb"] == 512

    # Editors often replace the file by renaming a new one over it.
    tmp = policy.with_suffix(".new")
    tmp.write_text("[loop]\nenabled = false\n[sandbox]\nmemory_mb = 256\n")
    tmp.replace(policy)
    _wait_for(events, "policy.applied")
    with running_daemon.client() as c:
        assert c.call("policy_show")["policy"]["sandbox"]["memory_mb"] == 256


def test_sighup_rereads_config_and_policy(running_daemon: RunningDaemon) -> None:
    import signal

    events = _collect(running_daemon)
    other = running_daemon.policy.with_name("other.toml")
    other.write_text("[loop]\nenabled = false\n[sandbox]\ncpus = 0.5\n")
    config = running_daemon.config.read_text()
    running_daemon.config.write_text(
        config.replace(f'policy = "{running_daemon.policy}"', f'policy = "{other}"')
    )
    running_daemon.proc.send_signal(signal.SIGHUP)
    _wait_for(events, "config.sighup")
    _wait_for(events, "config.applied")
    _wait_for(events, "policy.applied")
    with running_daemon.client() as c:
        shown = c.call("policy_show")
    assert shown["path"] == str(other)
    assert shown["policy"]["sandbox"]["cpus"] == 0.5
