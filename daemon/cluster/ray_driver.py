"""The Ray driver, as a child process of the daemon: ``python -m daemon.cluster.ray_driver ADDR``.

Requests arrive on stdin and replies leave on stdout, one JSON object per line (the daemon
is the only peer; this process trusts it and nothing else). Ray's own output goes to
stderr. If the cluster's head goes away, Ray ends this process; the daemon sees its
stdout close and treats the cluster as unavailable.

Requests: ``{"op": "status"}``, ``{"op": "tree", "digest", "files": [[path, base64]]}``,
``{"op": "forget", "digest"}``, ``{"op": "run", "id", "spec": {...}}``. Replies carry the
request's ``id``. A run the daemon gives up on is not cancelled here: its capability is
revoked, its lease ends and its node stops the container.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import sys
import threading
from dataclasses import asdict
from typing import Any

import ray
import ray.exceptions

from sandbox.bridge import FrontAddress
from sandbox.errors import GatewayUnreachable, SandboxUnavailable
from sandbox.limits import Limits
from sandbox.remote import GuestLaunch, UnitSpec, run_unit_sync
from sandbox.rundir import Tree

RESOURCE = "harnessd_sandbox"
NAMESPACE = "harnessd"
# The errors that mean the unit's node or worker went away, not that the unit failed.
LOST = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.OwnerDiedError,
    ray.exceptions.LocalRayletDiedError,
)


def capacity() -> dict[str, Any]:
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    total = sum(n.get("Resources", {}).get(RESOURCE, 0) for n in nodes)
    workers = [n for n in nodes if n.get("Resources", {}).get(RESOURCE)]
    ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return {"capacity": int(total), "nodes": len(workers), "ip": ip}


def unit_spec(raw: dict[str, Any]) -> UnitSpec:
    return UnitSpec(
        image=raw["image"],
        launch=GuestLaunch(tuple(raw["launch"]["command"]), raw["launch"]["mount"]),
        limits=Limits(**raw["limits"]),
        labels=dict(raw["labels"]),
        harness_digest=raw["harness_digest"],
        guest_digest=raw["guest_digest"],
        endpoint=FrontAddress(**raw["endpoint"]),
        capability=raw["capability"],
    )


def _cause(exc: ray.exceptions.RayTaskError) -> BaseException | None:
    try:
        cause = exc.as_instanceof_cause()  # type: ignore[no-untyped-call]
    except Exception:
        return None
    return cause if isinstance(cause, BaseException) else None


class RayDriver:
    def __init__(self, out: Any) -> None:
        self.out = out
        self.trees: dict[str, ray.ObjectRef[Tree]] = {}
        self.remote = ray.remote(run_unit_sync).options(
            num_cpus=0, resources={RESOURCE: 1}, max_retries=0, retry_exceptions=False
        )

    def reply(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    async def handle(self, request: dict[str, Any]) -> None:
        op, rid = request.get("op"), request.get("id")
        if op == "status":
            self.reply({"id": rid, "ok": True, **await asyncio.to_thread(capacity)})
        elif op == "tree":
            files: Tree = tuple((p, base64.b64decode(b)) for p, b in request["files"])
            self.trees[request["digest"]] = await asyncio.to_thread(ray.put, files)
            self.reply({"id": rid, "ok": True})
        elif op == "forget":
            self.trees.pop(request["digest"], None)
        elif op == "run":
            asyncio.get_running_loop().create_task(self.run(str(rid), request["spec"]))

    async def run(self, rid: str, raw: dict[str, Any]) -> None:
        try:
            spec = unit_spec(raw)
            harness, guest = self.trees[spec.harness_digest], self.trees[spec.guest_digest]
            outcome = await self.remote.remote(spec, harness, guest)
            result: dict[str, Any] = {"ok": True, "outcome": asdict(outcome) if outcome else None}
        except LOST as exc:
            result = {"ok": False, "kind": "lost", "error": str(exc)[:500]}
        except ray.exceptions.TaskCancelledError:
            result = {"ok": False, "kind": "cancelled", "error": "cancelled"}
        except ray.exceptions.RayTaskError as exc:
            cause = _cause(exc)
            kind = "unreachable" if isinstance(cause, GatewayUnreachable) else "failed"
            if isinstance(cause, SandboxUnavailable):
                kind = "lost"  # that node's engine is down: another node may run it
            result = {"ok": False, "kind": kind, "error": str(cause or exc)[-800:]}
        except Exception as exc:  # the cluster itself failed us
            result = {"ok": False, "kind": "lost", "error": f"{type(exc).__name__}: {exc}"[:500]}
        self.reply({"id": rid, **result})


async def serve(driver: RayDriver) -> None:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:  # stdin in a thread: simple, and EOF (the daemon gone) ends us
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read, daemon=True, name="driver-stdin").start()
    while (line := await lines.get()) is not None:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        await driver.handle(request)


def main() -> int:
    # Replies get a private copy of stdout; anything else printed lands on stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    address = sys.argv[1]
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except Exception as exc:
        out.write(json.dumps({"id": "init", "ok": False, "error": f"{exc}"[:500]}) + "\n")
        return 3
    out.write(json.dumps({"id": "init", "ok": True}) + "\n")
    out.flush()
    asyncio.run(serve(RayDriver(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
