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

from tests.support.heavy import refuse_in_unit_tests

RAY = Path(sys.executable).with_name("ray")
RESOURCE = "harnessd_sandbox"
START_TIMEOUT_S = 120.0
# A node that misses Ray's fixed start-up windows (15 s for its agents to report, 30 s to
# register) on a loaded machine is started again, this many times at most.
ATTEMPTS = 6


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


@dataclass
class Node:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def processes(self) -> set[int]:
        """Every live process of the node: its process group, and the descendants of its
        raylet (Ray puts each worker in a process group of its own)."""
        parents: dict[int, int] = {}
        groups: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)], groups[int(entry.name)] = int(fields[1]), int(fields[2])
        found = {pid for pid, group in groups.items() if group == self.pgid}
        grew = True
        while grew:
            more = {pid for pid, parent in parents.items() if parent in found} - found
            found |= more
            grew = bool(more)
        return found

    def kill(self) -> None:
        """SIGKILL every process of the node (raylet, agents, workers) and wait."""
        deadline = time.monotonic() + 30
        while (pids := self.processes()) and time.monotonic() < deadline:
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    @property
    def alive(self) -> bool:
        return bool(self.processes())


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
                # No log monitor: one Python process less starting on a loaded machine.
                [
                    str(RAY),
                    "start",
                    "--block",
                    "--disable-usage-stats",
                    "--include-log-monitor=false",
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,  # its own process group: killed as one
            )
        node = Node(name, proc, log)
        self.nodes.append(node)
        return node

    def _started(self, node: Node) -> bool:
        """Wait for ``ray start`` to say the node is up; False if it gave up."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if "Ray runtime started" in node.log.read_text(errors="replace"):
                return True
            if node.proc.poll() is not None:
                node.kill()
                self.nodes.remove(node)
                return False
            time.sleep(0.2)
        raise TimeoutError(f"ray node {node.name} did not start: {node.log.read_text()[-2000:]}")

    def add_worker(self, capacity: int = 2, cpus: int = 2) -> Node:
        """Start a worker node and wait until it is up (one more try if it times out)."""
        resources = json.dumps({RESOURCE: capacity})
        for attempt in range(ATTEMPTS):
            node = self._start(
                f"worker{len(self.nodes)}-{attempt}",
                [
                    f"--address={self.address}",
                    f"--num-cpus={cpus}",
                    f"--resources={resources}",
                    *_port_args(),
                ],
            )
            if self._started(node):
                return node
        raise RuntimeError(f"ray worker node did not start: {node.log.read_text()[-2000:]}")

    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.name != "head"]

    def wait_capacity(self, want: float) -> None:
        """Wait until the live nodes offer ``want`` sandbox slots (one polling driver)."""
        code = (
            "import ray, time, sys\n"
            f"ray.init(address={self.address!r}, logging_level='error', log_to_driver=False)\n"
            "while sum(n['Resources'].get(sys.argv[1], 0) for n in ray.nodes() if n['Alive'])"
            " < float(sys.argv[2]):\n"
            "    time.sleep(0.3)\n"
        )
        try:
            subprocess.run(
                [sys.executable, "-c", code, RESOURCE, str(want)],
                env=self.env,
                capture_output=True,
                timeout=START_TIMEOUT_S,
                check=True,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            logs = "\n".join(f"{n.name}: {n.log.read_text()[-2000:]}" for n in self.nodes)
            raise RuntimeError(
                f"the local Ray cluster did not reach capacity {want}: {exc}\n{logs}"
            ) from exc

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
        left = [n.name for n in self.nodes if n.alive]
        if left:
            raise AssertionError(f"ray node processes left after teardown: {left}")


@contextmanager
def local_cluster(workers: int = 1, capacity: int = 2) -> Iterator[LocalCluster]:
    """A head plus ``workers`` worker nodes; every process of it gone afterwards."""
    refuse_in_unit_tests("a Ray cluster (tests/cluster/ray_cluster.py)")
    # A short root: Ray's socket paths live under it and must stay within 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="hr-", dir="/tmp"))
    port = free_port()
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        # Find a dead node in seconds, not the default half minute, yet never mistake a
        # node starved of CPU on a loaded machine for a dead one.
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_failure_threshold": "10",
        "RAY_health_check_initial_delay_ms": "1000",
        # A raylet waits for its agents (Python processes) to start; slow when loaded.
        "RAY_agent_register_timeout_ms": "180000",
        "RAY_worker_register_timeout_seconds": "180",
    }
    env.pop("RAY_ADDRESS", None)
    cluster = LocalCluster(f"{node_ip()}:{port}", temp_dir, env)
    try:
        for attempt in range(ATTEMPTS):
            head = cluster._start(
                "head",
                [
                    f"--port={port}",
                    "--head",
                    "--num-cpus=0",
                    "--include-dashboard=false",
                    f"--temp-dir={temp_dir}",
                    *_port_args(),
                ],
            )
            if cluster._started(head):
                break
            if attempt == ATTEMPTS - 1:
                raise RuntimeError(f"the Ray head did not start: {head.log.read_text()[-2000:]}")
        for _ in range(workers):
            cluster.add_worker(capacity)
        cluster.wait_capacity(workers * capacity)
        yield cluster
    finally:
        cluster.stop()
        subprocess.run(["rm", "-rf", str(temp_dir)], check=False)
