"""systemd's notify protocol against real Unix datagram sockets (a path and an abstract
name), and what the environment says about the watchdog."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.ops.sdnotify import Notifier

pytestmark = pytest.mark.unit


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "notify.sock"
    sock.bind(str(path))
    sock.settimeout(5)
    yield sock, str(path)
    sock.close()


def test_states_go_out_as_one_datagram_and_the_socket_leaves_the_environment(
    listener: tuple[socket.socket, str],
) -> None:
    sock, path = listener
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "3000000", "OTHER": "kept"}
    notifier = Notifier(env)
    notifier.notify("READY=1", "STATUS=live version v0001")
    assert sock.recv(4096) == b"READY=1\nSTATUS=live version v0001"
    # What the daemon starts must not talk to systemd in its name.
    assert env == {"OTHER": "kept"}
    assert notifier.ping_every_s == 1.5


def test_an_abstract_socket_name_starts_with_an_at_sign() -> None:
    name = f"harnessd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        Notifier({"NOTIFY_SOCKET": "@" + name}).notify("STOPPING=1")
        assert sock.recv(4096) == b"STOPPING=1"


@pytest.mark.parametrize(
    ("env", "every"),
    [
        ({}, None),  # not under systemd
        ({"WATCHDOG_USEC": "3000000"}, None),  # a watchdog with no socket to ping
        ({"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "0"}, None),
        ({"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),
        (
            {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "{pid}"},
            15.0,
        ),
    ],
)
def test_the_watchdog_is_for_this_process_only(env: dict[str, str], every: float | None) -> None:
    env = {k: v.format(pid=os.getpid()) for k, v in env.items()}
    assert Notifier(env).ping_every_s == every


def test_no_socket_or_a_gone_one_is_never_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Notifier({}).notify("READY=1")  # nothing to do
    assert not Notifier({"NOTIFY_SOCKET": "vsock:2:999"}).enabled
    Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}).notify("READY=1")
    assert "could not notify the service manager (READY=1)" in caplog.text
