"""The worker's main loop: one episode (or one catalogue) per process, JSON lines on stdio.

Started by :mod:`daemon.suites.envworker` as ``python -s -P -B -c <boot>``; the boot code loads
this folder as the package ``harnessd_toolenv`` and calls :func:`main`. The protocol runs
on a private copy of stdout, and stdout itself is pointed at stderr, so nothing the
simulated APIs print can corrupt a reply. Requests (see ``worker_protocol``):

* ``start`` ``{"kind": "bfcl"|"agentdojo", "memory_mb", "cpu_s", ...}``: set this process's
  limits, then build the episode (``bfcl``: ``wheel``, ``sha256``, ``cache_dir``,
  ``category``, ``task``; ``agentdojo``: the same paths, ``suite``, ``user_task``,
  ``injection_task``, ``injections``);
* ``call`` ``{"name", "arguments"}`` -> ``{"text"}``; ``record_timeout`` (a call the
  parent cut off, recorded with its error text and never run again); ``next_turn`` ->
  the next turn's ``{"messages", "tools"}`` or ``{"done": true}``; ``finish``
  ``{"output"}`` -> ``{"passed", "detail", ...}``;
* ``catalogue`` ``{"wheel", "sha256", "cache_dir", "suites"}`` (AgentDojo only).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from .worker_protocol import MAX_LINE, READY, encode

# What a harness sees of one result; the checker keeps the whole text.
RESULT_CHARS = 50_000


class Simulation(Protocol):
    """The worker's side of one episode: the simulated APIs themselves, run in this process
    (the daemon's :class:`~daemon.suites.base.Episode` reaches it over the pipe)."""

    def call(self, name: str, arguments: Any) -> str: ...
    def record_timeout(self, name: str, arguments: Any, text: str) -> None: ...
    def next_turn(self) -> dict[str, Any]: ...
    def finish(self, output: Any) -> dict[str, Any]: ...


def _limit(memory_mb: int, cpu_s: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))


def _paths(args: dict[str, Any]) -> tuple[Path, str, Path]:
    return Path(args["wheel"]), str(args["sha256"]), Path(args["cache_dir"])


def _start(args: dict[str, Any]) -> Simulation:
    _limit(int(args["memory_mb"]), int(args["cpu_s"]))
    wheel, sha256, cache_dir = _paths(args)
    if args["kind"] == "bfcl":
        from .bfcl_api import BfclWheel
        from .bfcl_data import load_func_docs, load_tasks
        from .bfcl_run import BfclSimulation

        bfcl = BfclWheel(wheel, sha256, cache_dir)
        tasks = [t for t in load_tasks(bfcl.read, args["category"]) if t.id == args["task"]]
        if not tasks:
            raise ValueError(f"no task {args['task']!r} in {args['category']}")
        task = tasks[0]
        return BfclSimulation(
            task, bfcl.api_classes(task.involved_classes), load_func_docs(bfcl.read)
        )
    if args["kind"] == "agentdojo":
        from .agentdojo_run import AgentDojo, AgentDojoSimulation

        dojo = AgentDojo(wheel, sha256, cache_dir)
        return AgentDojoSimulation(
            dojo,
            args["suite"],
            args["user_task"],
            args.get("injection_task"),
            args.get("injections") or {},
        )
    raise ValueError(f"unknown environment kind {args['kind']!r}")


def _catalogue(args: dict[str, Any]) -> dict[str, Any]:
    from .agentdojo_run import AgentDojo, catalogue

    dojo = AgentDojo(*_paths(args))
    return {name: catalogue(dojo, name) for name in args["suites"]}


def _serve(out: BinaryIO, inp: BinaryIO) -> None:
    simulation: Simulation | None = None
    out.write(encode(READY))
    out.flush()
    while True:
        line = inp.readline(MAX_LINE + 1)
        if not line:
            return
        try:
            request = json.loads(line)
            op, args = request["op"], request.get("args") or {}
            value: Any
            if op == "start":
                simulation = _start(args)
                value = "started"
            elif op == "catalogue":
                value = _catalogue(args)
            elif simulation is None:
                raise RuntimeError(f"{op!r} before 'start'")
            elif op == "call":
                text = simulation.call(str(args["name"]), args.get("arguments"))
                if len(text) > RESULT_CHARS:
                    text = text[:RESULT_CHARS] + f"... [{len(text) - RESULT_CHARS} more characters]"
                value = {"text": text}
            elif op == "record_timeout":
                simulation.record_timeout(
                    str(args["name"]), args.get("arguments"), str(args["text"])
                )
                value = None
            elif op == "next_turn":
                value = simulation.next_turn()
            elif op == "finish":
                value = simulation.finish(args.get("output"))
            else:
                raise ValueError(f"unknown op {op!r}")
            reply = encode({"ok": True, "value": value})
        except Exception as exc:  # reported to the parent, which decides; keep serving
            reply = encode({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        out.write(reply)
        out.flush()


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _serve(out, sys.stdin.buffer)
