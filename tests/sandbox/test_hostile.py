"""Hostile harnesses against real Docker: each is contained and reported as a clean failure.

Every test also checks (through the ``sandbox`` fixture) that no container with its label
and no per-run directory is left behind.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from daemon.evaluation.taskrun import TaskRun
from tests.sandbox.conftest import SHORT_WALL, SMALL, Sandbox, StandInModel, make_task

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

SHORT = dataclasses.replace(SMALL, wall_s=SHORT_WALL)

# Runs every function in ATTEMPTS; any that does not raise is an escape.
BLOCKED_OR_ESCAPED = """
def solve(task, ctx):
    blocked = []
    for attempt in ATTEMPTS:
        try:
            attempt(task["meta"])
        except Exception as exc:
            blocked.append(f"{attempt.__name__}: {type(exc).__name__}: {exc}")
            continue
        return {"output": "ESCAPED via " + attempt.__name__, "claimed_success": True}
    raise PermissionError("all blocked: " + " | ".join(blocked))
"""


def attempts(body: str, names: list[str]) -> str:
    return body + f"\nATTEMPTS = [{', '.join(names)}]\n" + BLOCKED_OR_ESCAPED


class HostListener:
    """A TCP listener on every host address that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[HostListener]:
    found = HostListener()
    yield found
    found.close()


def host_addresses() -> list[str]:
    """Loopback, the Docker bridge gateway and the host's outward address."""
    found = ["127.0.0.1"]
    inspect = subprocess.run(
        ["docker", "network", "inspect", "bridge", "--format", "{{json .IPAM.Config}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    for entry in json.loads(inspect.stdout or "[]") or []:
        if entry.get("Gateway"):
            found.append(entry["Gateway"])
        elif entry.get("Subnet", "").count(".") == 3:
            base = entry["Subnet"].split("/")[0].rsplit(".", 1)[0]
            found.append(base + ".1")
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent; this only picks a route
        found.append(probe.getsockname()[0])
    except OSError:
        pass
    finally:
        probe.close()
    return sorted(set(found))


def assert_crash(run: TaskRun, *fragments: str) -> None:
    """The run failed: a crash, or ``tamper`` where the guest itself refused part of the
    attempt (reading /proc, importing ctypes) before the kernel had to."""
    assert run.error in ("crash", "tamper"), (run.error, run.submission, run.outcome.output[-2000:])
    assert run.submission is not None and run.submission.error is not None
    for fragment in fragments:
        assert fragment in run.submission.error, run.submission.error
    assert "ESCAPED" not in json.dumps(run.submission.output)


async def test_network_to_internet_is_unreachable(sandbox: Sandbox) -> None:
    body = """
import socket
def tcp_public_ip(meta):
    socket.create_connection(("1.1.1.1", 80), timeout=2).close()
def udp_dns_query(meta):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"\\x00" * 12, ("8.8.8.8", 53))
    s.recvfrom(512)
def resolve_name(meta):
    socket.getaddrinfo("example.com", 443)
def ipv6(meta):
    socket.create_connection(("2606:4700:4700::1111", 80), timeout=2).close()
"""
    run = await sandbox.run(
        attempts(body, ["tcp_public_ip", "udp_dns_query", "resolve_name", "ipv6"])
    )
    assert_crash(run, "all blocked", "tcp_public_ip", "resolve_name")


async def test_network_to_host_bridge_and_loopback_is_unreachable(
    sandbox: Sandbox, listener: HostListener
) -> None:
    addresses = host_addresses()
    body = """
import socket
def host_addresses(meta):
    for address in meta["addresses"]:
        try:
            socket.create_connection((address, meta["port"]), timeout=2).close()
        except OSError:
            continue
        return
    raise OSError("no host address answered")
def loopback(meta):
    socket.create_connection(("127.0.0.1", meta["port"]), timeout=2).close()
def docker_api_over_tcp(meta):
    for address in meta["addresses"]:
        for port in (2375, 2376):
            try:
                socket.create_connection((address, port), timeout=2).close()
            except OSError:
                continue
            return
    raise OSError("no docker API port answered")
"""
    task = make_task(addresses=addresses, port=listener.port)
    code = attempts(body, ["host_addresses", "loopback", "docker_api_over_tcp"])
    run = await sandbox.run(code, task=task)
    assert_crash(run, "all blocked")
    assert listener.accepted == 0
    # The listener itself works: the host can reach it.
    socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()


async def test_docker_socket_is_not_reachable(sandbox: Sandbox) -> None:
    body = """
import socket, os
def unix_docker_socket(meta):
    for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
        except OSError:
            continue
        return
    raise FileNotFoundError("no engine socket")
def find_any_socket(meta):
    found = []
    for root, dirs, files in os.walk("/"):
        if root.startswith(("/proc", "/sys")):
            dirs[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            try:
                if os.path.exists(path) and __import__("stat").S_ISSOCK(os.stat(path).st_mode):
                    found.append(path)
            except OSError:
                pass
    others = [p for p in found if p != "/run/harnessd/gateway.sock"]
    if not others:
        raise FileNotFoundError("no engine socket found; sockets seen: " + ", ".join(found))
"""
    run = await sandbox.run(attempts(body, ["unix_docker_socket", "find_any_socket"]))
    assert_crash(run, "all blocked", "no engine socket found")


async def test_host_files_outside_mounts_are_invisible(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = "canary-" + secrets.token_hex(16)
    canary = tmp_path / "canary" / "secret.txt"
    canary.parent.mkdir()
    canary.write_text(secret)
    before = canary.stat()
    body = """
import os
def direct_path(meta):
    print(open(meta["canary"]).read())
def through_proc_root(meta):
    print(open("/proc/1/root" + meta["canary"]).read())
def up_from_harness(meta):
    print(open("/harness/../.." + meta["canary"]).read())
def host_shadow(meta):
    print(open("/etc/shadow").read())
def host_root_listing(meta):
    entries = set(os.listdir("/"))
    if "work" in entries and os.path.exists(meta["canary_dir"]):
        return
    raise FileNotFoundError("host dirs not visible")
"""
    task = make_task(canary=str(canary), canary_dir=str(canary.parent))
    names = [
        "direct_path",
        "through_proc_root",
        "up_from_harness",
        "host_shadow",
        "host_root_listing",
    ]
    run = await sandbox.run(attempts(body, names), task=task)
    assert_crash(run, "all blocked")
    assert secret not in run.outcome.output
    assert secret not in json.dumps(run.submission.model_dump() if run.submission else None)
    after = canary.stat()
    assert canary.read_text() == secret
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_ino,
    )


async def test_api_keys_of_the_daemon_never_reach_the_container(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "sk-test-canary-" + secrets.token_hex(12)
    monkeypatch.setenv("ANTHROPIC_API_KEY", canary)
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    harness = """
import os, glob
def solve(task, ctx):
    seen = dict(os.environ)
    for path in glob.glob("/proc/*/environ"):
        try:
            seen[path] = open(path, "rb").read().decode(errors="replace")
        except OSError:
            pass
    print(sorted(os.environ))
    keys = [k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k]
    if not keys:
        raise LookupError("no keys; environment: " + ", ".join(sorted(os.environ)))
    return {"output": seen, "claimed_success": True}
"""
    run = await sandbox.run(harness)
    assert_crash(run, "LookupError: no keys")
    everything = run.outcome.output + json.dumps(
        run.submission.model_dump() if run.submission else None
    )
    assert canary not in everything
    assert run.submission is not None and run.submission.error is not None
    names = run.submission.error.split("environment: ")[1].split(", ")
    assert set(names) <= {"PATH", "HOME", "LANG", "TMPDIR", "HOSTNAME"}


async def test_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    harness = """
import os
def solve(task, ctx):
    while True:
        try:
            os.fork()
        except OSError:
            pass
"""
    run = await sandbox.run(harness, limits=SHORT)
    assert run.error == "timeout", (run.error, run.outcome)
    assert run.outcome.exit_code is None
    # The host still starts processes normally.
    assert (await anyio.run_process(["true"])).returncode == 0


async def test_thread_bomb_hits_the_pids_limit(sandbox: Sandbox) -> None:
    harness = """
import threading, time
def solve(task, ctx):
    started = 0
    while True:
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
        started += 1
"""
    run = await sandbox.run(harness)
    assert_crash(run, "can't start new thread")


async def test_memory_past_the_limit_is_oom(sandbox: Sandbox) -> None:
    harness = """
def solve(task, ctx):
    hoard = []
    while True:
        hoard.append(b"x" * (16 << 20))
"""
    run = await sandbox.run(harness)
    assert run.error == "oom", (run.error, run.outcome, run.submission)
    assert run.outcome.exit_code not in (None, 0)


async def test_an_allocation_that_fails_outright_is_oom_too(sandbox: Sandbox) -> None:
    run = await sandbox.run("def solve(task, ctx):\n    return bytearray(1 << 46)\n")
    assert run.error == "oom", (run.error, run.submission)
    assert run.submission is not None and (run.submission.error or "").startswith("MemoryError")


async def test_filling_the_tmpfs_fails_inside_only(sandbox: Sandbox) -> None:
    harness = """
import os
def solve(task, ctx):
    for root in ("/work", "/tmp", "/dev/shm"):
        try:
            with open(os.path.join(root, "fill"), "wb") as f:
                while True:
                    f.write(b"x" * (1 << 20))
                    f.flush()
        except OSError as exc:
            ctx.log(root, exc)
    many = 0
    while True:
        open(f"/work/f{many}", "w").close()
        many += 1
"""
    run = await sandbox.run(harness)
    assert_crash(run, "No space left on device")
    assert "/work [Errno 28]" in run.outcome.output
    assert "/tmp [Errno 28]" in run.outcome.output


async def test_endless_loop_times_out(sandbox: Sandbox) -> None:
    run = await sandbox.run("def solve(task, ctx):\n    while True:\n        pass\n", limits=SHORT)
    assert run.error == "timeout"
    assert run.submission is None
    assert run.outcome.wall_s >= SHORT_WALL


async def test_sleeping_past_the_wall_clock_times_out(sandbox: Sandbox) -> None:
    harness = """
import signal, time
def solve(task, ctx):
    try:  # harness code runs in a thread of its own, where Python refuses this anyway
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:
        pass
    time.sleep(3600)
    return {"output": "woke", "claimed_success": True}
"""
    run = await sandbox.run(harness, limits=SHORT)
    assert run.error == "timeout"
    assert run.submission is None


async def test_harness_cannot_write_its_own_directory(sandbox: Sandbox) -> None:
    source = """
import os
def append_to_harness(meta):
    with open("/harness/harness.py", "a") as f:
        f.write("# patched\\n")
def new_file_in_harness(meta):
    open("/harness/evil.py", "w").close()
def chmod_harness(meta):
    os.chmod("/harness/harness.py", 0o777)
def tamper_guest_runtime(meta):
    open("/opt/harnessd/harnessd_guest.py", "a").close()
def file_in_socket_dir(meta):
    open("/run/harnessd/extra", "w").close()
def write_root(meta):
    open("/usr/bin/evil", "w").close()
"""
    names = [
        "append_to_harness",
        "new_file_in_harness",
        "chmod_harness",
        "tamper_guest_runtime",
        "file_in_socket_dir",
        "write_root",
    ]
    folder = sandbox.harness(attempts(source, names))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    run = await sandbox.run(folder)
    assert_crash(run, "all blocked", "Read-only file system")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


async def test_printing_100_mb_hits_the_output_limit(sandbox: Sandbox) -> None:
    harness = """
import sys
def solve(task, ctx):
    line = "y" * (1 << 20)
    for _ in range(100):
        sys.stdout.write(line)
    return {"output": "done", "claimed_success": True}
"""
    run = await sandbox.run(harness)
    assert run.error == "output_limit"
    assert len(run.outcome.output) <= SMALL.output_bytes
    assert run.outcome.output_bytes > SMALL.output_bytes


async def test_escalation_attempts_fail(sandbox: Sandbox) -> None:
    # ctypes is refused to harness code (tamper); the kernel would refuse these anyway.
    body = """
import os
def setuid_root(meta):
    os.setuid(0)
def new_user_namespace(meta):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare refused")
def mount_proc(meta):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"none", b"/work", b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount refused")
def raw_socket(meta):
    import socket
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
"""
    names = ["setuid_root", "new_user_namespace", "mount_proc", "raw_socket"]
    run = await sandbox.run(attempts(body, names))
    assert_crash(run, "all blocked")


async def test_exit_without_submitting_is_a_crash(sandbox: Sandbox) -> None:
    run = await sandbox.run("import os\ndef solve(task, ctx):\n    os._exit(0)\n")
    assert run.error == "crash"
    assert run.submission is None
    assert run.outcome.exit_code == 0


async def test_killing_the_guest_is_a_crash(sandbox: Sandbox) -> None:
    harness = "import os, signal\ndef solve(task, ctx):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    run = await sandbox.run(harness)
    assert run.error == "crash"
    assert run.outcome.exit_code not in (None, 0)


async def test_garbage_on_the_socket_is_a_protocol_failure(sandbox: Sandbox) -> None:
    harness = """
import socket, time
def solve(task, ctx):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/harnessd/gateway.sock")
    for _ in range(100):
        s.sendall(b"not json at all\\n")
    time.sleep(0.5)
    return {"output": "fine", "claimed_success": True}
"""
    run = await sandbox.run(harness)
    assert run.error == "protocol"
    assert run.gateway.protocol_violation
    assert run.gateway.bad_frames >= 16


async def test_oversized_or_unserialisable_answers_are_crashes(sandbox: Sandbox) -> None:
    big = "def solve(task, ctx):\n    return {'output': 'z' * (2 << 20), 'claimed_success': True}\n"
    weird = "def solve(task, ctx):\n    return {'output': {1, 2}, 'claimed_success': True}\n"
    not_dict = "def solve(task, ctx):\n    return 'just text'\n"
    nan = "def solve(task, ctx):\n    return {'output': float('nan'), 'claimed_success': True}\n"
    deep = (
        "def solve(task, ctx):\n    x = []\n    for _ in range(100000):\n        x = [x]\n"
        "    return {'output': x, 'claimed_success': True}\n"
    )
    for harness, fragment in [
        (big, "byte limit"),
        (weird, "not plain JSON data"),
        (not_dict, "must return a dict"),
        (nan, "NaN or infinite"),
        (deep, "nested too deeply"),
    ]:
        run = await sandbox.run(harness)
        assert_crash(run, fragment)


async def test_budget_loop_ends_with_budget(sandbox: Sandbox) -> None:
    harness = """
def solve(task, ctx):
    while True:
        try:
            ctx.model.chat(task["prompt"])
        except ctx.BudgetExhausted:
            return {"output": [], "claimed_success": True}
"""
    model = StandInModel(budget=100)
    run = await sandbox.run(harness, handler=model)
    assert run.error == "budget"
    assert run.gateway.budget_refused
    assert model.spent <= 100 + 15


async def test_no_state_leaks_from_one_task_to_the_next(sandbox: Sandbox) -> None:
    first = """
import os, subprocess
def solve(task, ctx):
    open("/work/marker", "w").write("left")
    open("/tmp/marker", "w").write("left")
    subprocess.Popen(["sleep", "600"], start_new_session=True)
    return {"output": "planted", "claimed_success": True}
"""
    # Opening files under /proc is refused to harness code, so look at executables' links.
    second = """
import os
def solve(task, ctx):
    found = [p for p in ("/work/marker", "/tmp/marker") if os.path.exists(p)]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if "sleep" in os.readlink(f"/proc/{pid}/exe"):
                    found.append("sleep process " + pid)
            except OSError:
                pass
    return {"output": found, "claimed_success": True}
"""
    planted = await sandbox.run(first)
    assert planted.error is None, planted
    checked = await sandbox.run(second)
    assert checked.error is None, checked
    assert checked.submission is not None and checked.submission.output == []


async def test_host_process_table_is_unaffected_after_a_hostile_run(sandbox: Sandbox) -> None:
    # A harness that leaves a detached process behind: it must die with the container.
    harness = """
import subprocess
def solve(task, ctx):
    subprocess.Popen(["sleep", "987654"], start_new_session=True)
    return {"output": "ok", "claimed_success": True}
"""
    run = await sandbox.run(harness)
    assert run.error is None
    survivors = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and _cmdline(pid).startswith(b"sleep\x00987654")
    ]
    assert survivors == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
