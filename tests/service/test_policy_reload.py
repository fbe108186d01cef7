"""Editing the policy file: invalid edits are reported and ignored, valid ones apply live."""

from __future__ import annotations

import pytest

from tests.daemon_process import RunningDaemon, collect_events, wait_for_event

pytestmark = pytest.mark.docker


def test_invalid_edit_keeps_old_policy_and_valid_edit_applies(
    running_daemon: RunningDaemon,
) -> None:
    events = collect_events(running_daemon)
    policy = running_daemon.policy
    policy.write_text("[loop]\nenabled = false\n[sandbox]\nmemory_mb = 'huge'\n")
    bad = wait_for_event(events, "policy.invalid")
    assert str(policy) in bad["message"]
    assert "key 'sandbox.memory_mb'" in bad["message"]
    assert bad["level"] == "error"
    with running_daemon.client() as c:
        assert c.call("policy_show")["policy"]["sandbox"]["memory_mb"] == 512

    # Editors often replace the file by renaming a new one over it.
    tmp = policy.with_suffix(".new")
    tmp.write_text("[loop]\nenabled = false\n[sandbox]\nmemory_mb = 256\n")
    tmp.replace(policy)
    wait_for_event(events, "policy.applied")
    with running_daemon.client() as c:
        assert c.call("policy_show")["policy"]["sandbox"]["memory_mb"] == 256


def test_sighup_rereads_config_and_policy(running_daemon: RunningDaemon) -> None:
    import signal

    events = collect_events(running_daemon)
    other = running_daemon.policy.with_name("other.toml")
    other.write_text("[loop]\nenabled = false\n[sandbox]\ncpus = 0.5\n")
    config = running_daemon.config.read_text()
    running_daemon.config.write_text(
        config.replace(f'policy = "{running_daemon.policy}"', f'policy = "{other}"')
    )
    running_daemon.proc.send_signal(signal.SIGHUP)
    wait_for_event(events, "config.sighup")
    wait_for_event(events, "config.applied")
    wait_for_event(events, "policy.applied")
    with running_daemon.client() as c:
        shown = c.call("policy_show")
    assert shown["path"] == str(other)
    assert shown["policy"]["sandbox"]["cpus"] == 0.5
