"""A real local Ray cluster for tests: one head (no sandbox capacity) and worker nodes,
each its own ``ray start --block`` process group, on free ports and a private temp dir.

Never ``ray stop``: that kills every Ray process on the machine, other users' included.
Each node is stopped by killing its own process group, and teardown checks that none of
its processes is left.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")
RESOURCE = "harnessd_sandbox"
START_TIMEOUT_S = 120.0


def node_ip() -> str:
    """The address Ray's nodes on this machine advertise (not necessarily loopback)."""
    from ray._private.services import get_node_ip_address

    return str(get_node_ip_address())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_args() -> list[str]:
    base = free_port()
    args = [
        f"--node-manager-port={free_port()}",
        f"--object-manager-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
        # Worker ports: a small range near a port that was free a moment ago.
        f"--min-worker-port={base}",
        f"--max-worker-port={base + 40}",
    ]
    return args


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Node:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the node's whole process group (raylet, workers, agents) and wait."""
        with suppress(ProcessLookupError):
            os.killpg(self.pgid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _group_alive(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.1)

    @property
    def alive(self) -> bool:
        return _group_alive(self.pgid)


@dataclass
class LocalCluster:
    address: str
    temp_dir: Path
    env: dict[str, str]
    nodes: list[Node] = field(default_factory=list)

    def _start(self, name: str, args: list[str]) -> Node:
        log = self.temp_dir / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(RAY), "start", "--block", "--disable-usage-stats", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,  # its own process group: killed as one
            )
        node = Node(name, proc, log)
        self.nodes.append(node)
        return node

    def add_worker(self, capacity: int = 2, cpus: int = 2) -> Node:
        resources = json.dumps({RESOURCE: capacity})
        return self._start(
            f"worker{len(self.nodes)}",
            [f"--address={self.address}", f"--num-cpus={cpus}", f"--resources={resources}",
             *_port_args()],
        )  # fmt: skip

    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.name != "head"]

    def capacity(self) -> float:
        """The cluster's live sandbox capacity, as its GCS reports it (a fresh process)."""
        code = (
            "import ray, json;"
            f"ray.init(address={self.address!r}, logging_level='error', log_to_driver=False);"
            f"print(json.dumps(ray.available_resources().get({RESOURCE!r}, 0) and "
            f"sum(n['Resources'].get({RESOURCE!r}, 0) for n in ray.nodes() if n['Alive'])))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=self.env, capture_output=True, timeout=60,
            check=True,
        )  # fmt: skip
        return float(out.stdout.decode().strip().splitlines()[-1])

    def wait_capacity(self, want: float) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.proc.poll() is not None:
                    raise RuntimeError(f"ray node {node.name} exited: {node.log.read_text()}")
            try:
                if self.capacity() >= want:
                    return
            except subprocess.SubprocessError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"the local Ray cluster did not reach capacity {want}")

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
        left = [n.name for n in self.nodes if n.alive]
        if left:
            raise AssertionError(f"ray node processes left after teardown: {left}")


@contextmanager
def local_cluster(workers: int = 1, capacity: int = 2) -> Iterator[LocalCluster]:
    """A head plus ``workers`` worker nodes; every process of it gone afterwards."""
    # A short root: Ray's socket paths live under it and must stay within 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="hr-", dir="/tmp"))
    port = free_port()
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        # Find a dead node in seconds, not the default half minute.
        "RAY_health_check_period_ms": "500",
        "RAY_health_check_failure_threshold": "4",
        "RAY_health_check_initial_delay_ms": "500",
    }
    env.pop("RAY_ADDRESS", None)
    cluster = LocalCluster(f"{node_ip()}:{port}", temp_dir, env)
    try:
        cluster._start(
            "head",
            ["--head", f"--port={port}", "--num-cpus=0",
             "--include-dashboard=false", f"--temp-dir={temp_dir}", *_port_args()],
        )  # fmt: skip
        cluster.wait_capacity(0)
        for n in range(workers):
            cluster.add_worker(capacity)
            cluster.wait_capacity((n + 1) * capacity)
        yield cluster
    finally:
        cluster.stop()
        subprocess.run(["rm", "-rf", str(temp_dir)], check=False)
