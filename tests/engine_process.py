"""A private Docker engine (its own dockerd, data and socket) that a test may stop and start.

Engine-loss tests stop dockerd for real. Doing that to the machine's engine would kill every
container on it, other people's included, so they get an engine of their own instead: a
second dockerd (no bridge network, no iptables changes) under a short temporary folder,
reached through ``DOCKER_HOST``, with the sandbox image copied over from the main engine.
Stopping it is what an upgrade or a crash does: SIGTERM to dockerd, then waiting until it
no longer answers. It is stopped and removed at the end whatever happened.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from sandbox.image import image_tag
from tests.support.heavy import refuse_in_unit_tests


@dataclass
class PrivateEngine:
    root: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    def answers(self) -> bool:
        """``GET /_ping`` on the engine's socket answers OK (``docker info`` would too).
        Asked by hand: the SDK leaks its socket when a Unix engine socket refuses."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(str(self.root / "docker.sock"))
                s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
                reply = s.recv(4096)
        except OSError:
            return False
        return reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0]

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host, timeout=60)

    def start(self) -> None:
        """Start dockerd (as ``scripts/docker-engine`` does: in the background) and wait
        until it answers."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        log = (self.root / "dockerd.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "pid"),
                "-H",
                self.host,
                "--bridge=none",
                "--iptables=false",
                "--ip-masq=false",
                "--ip-forward=false",
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 90
        while not self.answers():
            assert self.proc.poll() is None, (self.root / "dockerd.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the private dockerd did not answer in 90 s"
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM dockerd and wait until it no longer answers and has exited."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        while self.answers() and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)

    def load_image_from_main_engine(self) -> str:
        tag = image_tag()
        main = docker.from_env(timeout=300)
        if not main.api.images(name=tag):
            pytest.skip(f"the sandbox image {tag} is not built (harnessd image build)")
        archive = self.root / "image.tar"
        with archive.open("wb") as out:
            for chunk in main.api.get_image(tag):
                out.write(chunk)
        main.close()
        client = self.client()
        with archive.open("rb") as data:
            client.api.load_image(data)
        client.close()
        archive.unlink()
        return tag


@contextmanager
def private_engine() -> Iterator[PrivateEngine]:
    refuse_in_unit_tests("a private Docker engine (tests/engine_process.py)")
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("a private Docker engine needs root and dockerd")
    # Short: containerd's sockets live under the exec root, and Unix socket paths are short.
    engine = PrivateEngine(Path(tempfile.mkdtemp(prefix="hd-eng-", dir="/tmp")))
    try:
        engine.start()
        engine.load_image_from_main_engine()
        yield engine
    finally:
        engine.stop()
        shutil.rmtree(engine.root, ignore_errors=True)
