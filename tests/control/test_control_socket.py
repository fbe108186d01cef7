"""The control socket: private, versioned, and impossible to knock over from a client."""

from __future__ import annotations

import json
import socket
import stat
import threading
from pathlib import Path

import pytest

from daemon.control.protocol import MAX_MESSAGE, ControlError, ErrorCode
from daemon.errors import DaemonNotRunning
from tests.daemon_process import RunningDaemon, start_daemon


def _raw(daemon: RunningDaemon, payload: bytes) -> list[dict[str, object]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(daemon.socket))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


@pytest.mark.docker
def test_socket_and_state_dir_are_private(shared_daemon: RunningDaemon) -> None:
    assert stat.S_IMODE(shared_daemon.state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(shared_daemon.socket.stat().st_mode) == 0o600


@pytest.mark.docker
def test_garbage_oversize_and_unknown_verbs_get_errors_and_daemon_stays_up(
    shared_daemon: RunningDaemon,
) -> None:
    replies = _raw(
        shared_daemon,
        b"this is not json\n"
        b"[1, 2, 3]\n"
        + b"x" * (MAX_MESSAGE + 10)
        + b"\n"
        + b'{"v": 1, "id": 7, "verb": "explode", "args": {}}\n'
        + b'{"v": 99, "id": 8, "verb": "status", "args": {}}\n'
        + b'{"v": 1, "id": 9, "verb": "show", "args": []}\n'
        + b'{"v": 1, "id": 10, "verb": "status", "args": {}}\n',
    )
    codes = [r.get("error", {}).get("code") if not r["ok"] else "ok" for r in replies]  # type: ignore[union-attr]
    assert codes == [
        "bad_frame",
        "bad_frame",
        "too_large",
        "unknown_verb",
        "unsupported_version",
        "bad_args",
        "ok",
    ]
    assert replies[-1]["id"] == 10
    with shared_daemon.client() as c:
        assert c.call("status")["pid"] == shared_daemon.proc.pid


@pytest.mark.docker
def test_many_clients_at_once(shared_daemon: RunningDaemon) -> None:
    errors: list[BaseException] = []

    def hammer() -> None:
        try:
            with shared_daemon.client() as c:
                for _ in range(20):
                    c.call("status")
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors


@pytest.mark.docker
def test_policy_check_verb_names_the_problem(shared_daemon: RunningDaemon) -> None:
    with shared_daemon.client(timeout=None) as c:  # power: seconds of CPU, more when loaded
        ok = c.call("policy_check", name="p.toml", text="[sandbox]\ncpus = 2.0\n")
        assert ok["valid"] and ok["policy"]["sandbox"]["cpus"] == 2.0
        first = ok["power"][0]
        assert first["candidate"] == "epoch 1, candidate 1" and first["gain_no_losses"] <= 0.05
        assert any("power 0.8" in line for line in ok["power_text"])
        with pytest.raises(ControlError) as info:
            c.call("policy_check", name="p.toml", text="[sandbox]\ncpuz = 2\n")
    assert info.value.code is ErrorCode.INVALID_POLICY
    assert "p.toml: unknown key 'sandbox.cpuz'" in str(info.value)


@pytest.mark.docker
def test_second_daemon_on_same_state_dir_is_refused(
    shared_daemon: RunningDaemon, tmp_path: Path, asset_cache: Path
) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(shared_daemon.config), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 4
    assert f"another harnessd (pid {shared_daemon.proc.pid}) holds the state dir" in proc.stderr


@pytest.mark.unit
def test_unreachable_daemon_says_how_to_start(tmp_path: Path) -> None:
    with pytest.raises(DaemonNotRunning, match="start it with 'scripts/run'"):
        from daemon.control.client import ControlClient

        ControlClient(tmp_path / "control.sock")


@pytest.mark.docker
def test_sigterm_stops_cleanly(tmp_path: Path, asset_cache: Path) -> None:
    daemon = start_daemon(tmp_path, asset_cache)
    assert daemon.stop() == 0
    assert not daemon.socket.exists()
    log = daemon.log.read_text()
    assert "harnessd stopped" in log


@pytest.mark.docker
def test_a_peer_with_another_uid_is_refused(asset_cache: Path) -> None:
    """Defence in depth: even if the 0700 dir and 0600 socket were loosened, the daemon
    checks the peer's uid (SO_PEERCRED) and answers anyone else with ``forbidden``."""
    import os
    import shutil
    import subprocess
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="hd-peer-", dir="/tmp"))
    base.chmod(0o711)  # pytest's own tmp dirs are private to root
    daemon = start_daemon(base, asset_cache)
    try:
        daemon.state_dir.chmod(0o711)
        daemon.socket.chmod(0o666)
        # The daemon answers a stranger at once and hangs up, without reading a request.
        code = (
            "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]);"
            "print(s.makefile().readline())"
        )
        proc = subprocess.run(
            ["/usr/bin/python3", "-c", code, str(daemon.socket)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            preexec_fn=lambda: os.setuid(65534),
        )
        assert proc.returncode == 0, proc.stderr
        reply = json.loads(proc.stdout)
        assert reply["ok"] is False and reply["error"]["code"] == "forbidden"
        with daemon.client() as c:  # the owner still gets in
            assert c.call("status")["pid"] == daemon.proc.pid
    finally:
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.docker
def test_state_without_its_lineage_folder_is_a_clear_error(
    tmp_path: Path, asset_cache: Path
) -> None:
    """The database records versions whose trees live in harnesses_dir; pointing the
    daemon at a folder without them (a re-clone, a moved repo) must say so plainly."""
    import shutil
    import subprocess
    import sys

    daemon = start_daemon(tmp_path, asset_cache)
    assert daemon.stop() == 0
    shutil.rmtree(tmp_path / "harnesses")
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(daemon.config), "serve"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert f"the lineage in {tmp_path / 'harnesses'} does not match the state" in proc.stderr
    assert "start with an empty state_dir" in proc.stderr
