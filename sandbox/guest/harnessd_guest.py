"""harnessd guest runtime: runs one harness on one task inside the sandbox container.

Stdlib only. The protocol is in PROTOCOL.md next to this file; the trust design in the
docstring of ``harnessd_lockdown``. Three threads:

* the **keeper** (a thread of its own, so that no frame of the main thread, which signal
  handlers receive, holds anything): connects to the gateway, says ``hello`` (receiving
  the task and the run's sealing key), compiles the harness files with one line number per
  statement (``harnessd_statements``), locks the process down (``harnessd_lockdown``),
  starts the harness thread, waits for it, and submits the answer with the coverage,
  sealed with the key so that nothing else in the process can submit in its name;
* the **harness thread**, traced line by line (its frames are the only traced ones), which
  imports ``/harness/harness.py`` and calls ``solve(task, ctx)``; ``ctx`` talks to the
  gateway over a second connection;
* the main thread, which only waits.

Everything the keeper does after harness code starts uses functions and methods bound
before it started (locals, closures, default arguments): harness code may patch modules and
builtins, but not those bindings. If ``solve`` raises, the submission carries ``error`` and
the process exits 1.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import threading
from typing import Any

GUEST_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, GUEST_DIR)

import harnessd_lockdown  # noqa: E402
import harnessd_seal  # noqa: E402
import harnessd_statements  # noqa: E402
from harnessd_context import (  # noqa: E402 - ctx's API, also for hosts that drive a guest
    BudgetExhausted,
    Context,
    Gateway,
    GatewayError,
    Model,
    ModelError,
    ToolError,
    Tools,
)

__all__ = [
    "BudgetExhausted",
    "Context",
    "Gateway",
    "GatewayError",
    "Model",
    "ModelError",
    "ToolError",
    "Tools",
    "main",
]

SOCKET_PATH = "/run/harnessd/gateway.sock"
HARNESS_DIR = "/harness"
SCRATCH_DIR = "/work"
PROTOCOL_VERSION = 1
SANDBOX_UID = 65534
DEFAULT_MAX_FRAME = 1 << 20
ERROR_CHARS = 2000
REPLY_WAIT_S = 10.0

EXIT_OK = 0
EXIT_SOLVE_FAILED = 1
EXIT_NO_GATEWAY = 2
EXIT_GATEWAY_FAILED = 3


# -- set-up, before any harness code exists -------------------------------------------------


def _drop_root() -> None:
    """Become uid/gid 65534 with no capabilities, if started as root (the sandbox starts the
    guest so, with only CAP_SETUID and CAP_SETGID). Changing the effective uid makes the
    kernel mark the process non-dumpable: no other process of the sandbox user, such as a
    program the harness starts, can then read this process's memory, file descriptors or
    environment, where the sealing key lives. Run before anything else."""
    if os.getuid() != 0:
        return
    os.setgroups([])
    os.setgid(SANDBOX_UID)
    os.setuid(SANDBOX_UID)
    if os.getuid() != SANDBOX_UID or os.geteuid() != SANDBOX_UID:
        raise SystemExit("harnessd guest: could not drop root")


def _harness_sources(root: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, "rb") as handle:
                    found[path] = handle.read()
    return found


def _numbered_code(sources: dict[str, bytes]) -> dict[str, Any]:
    """Each harness file compiled with one line number per statement (files that do not
    parse are left to the import system, which reports the error)."""
    code: dict[str, Any] = {}
    for path, data in sources.items():
        try:
            tree, _ = harnessd_statements.parse_numbered(data.decode("utf-8"), path)
            code[path] = compile(tree, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
            continue
    return code


def _install_loader(sources: dict[str, bytes], code: dict[str, Any]) -> None:
    """Imports from the harness directory get the numbered code objects."""

    class HarnessLoader(importlib.machinery.SourceFileLoader):
        def source_to_code(self, data: Any, path: Any, *, _optimize: int = -1) -> Any:  # type: ignore[override]
            compiled = code.get(path)
            if compiled is not None and bytes(data) == sources.get(path):
                return compiled
            return super().source_to_code(data, path)

    def path_hook(path: str) -> importlib.machinery.FileFinder:
        real = os.path.normpath(path)
        if real != HARNESS_DIR and not real.startswith(HARNESS_DIR + "/"):
            raise ImportError("not a harness directory")
        return importlib.machinery.FileFinder(path, (HarnessLoader, [".py"]))

    sys.path_hooks.insert(0, path_hook)
    sys.path_importer_cache.clear()
    sys.path.insert(0, HARNESS_DIR)


def _code_objects(code: Any) -> list[Any]:
    found = [code]
    for const in code.co_consts:
        if isinstance(const, type(code)):
            found.extend(_code_objects(const))
    return found


def _tracer(code: dict[str, Any]) -> tuple[Any, dict[str, set[int]]]:
    """A trace function recording which numbered statements of the harness files run.

    Only the code objects the guest compiled itself count, recognised by identity: code that
    harness code compiles at run time under a harness file's name (from an AST with made-up
    line numbers, say) is not one of them, so it cannot make a statement look run. The
    function is reachable only from the harness thread's state and the ``f_trace`` of its
    frames, and frames are refused to harness code (see harnessd_lockdown).
    """
    lines: dict[str, set[int]] = {path: set() for path in code}
    by_identity: dict[int, tuple[Any, Any]] = {}

    def local_for(ran: set[int]) -> Any:
        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                ran.add(frame.f_lineno)
            return local

        return local

    for path, module_code in code.items():
        local = local_for(lines[path])
        for each in _code_objects(module_code):
            by_identity[id(each)] = (each, local)  # holds the object: its id stays unique

    def global_tracer(frame: Any, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        found = by_identity.get(id(frame.f_code))
        if found is None or found[0] is not frame.f_code:
            return None
        return found[1]

    return global_tracer, lines


class _Runner:
    """The harness thread's body: import the harness, call solve, hand the result back."""

    def __init__(self, task: dict[str, Any], ctx: Context, box: list[Any], release: Any) -> None:
        self.task = task
        self.ctx = ctx
        self.box = box
        self.release = release

    def run(self) -> None:
        threading._trace_hook = None  # type: ignore[attr-defined]  # only this thread is traced
        try:
            module = __import__("harness")
            solve = getattr(module, "solve", None)
            if not callable(solve):
                raise AttributeError(f"{HARNESS_DIR}/harness.py does not define solve(task, ctx)")
            self.box[0] = ("ok", solve(self.task, self.ctx))
        except BaseException as exc:  # SystemExit and KeyboardInterrupt are failures too
            text = _describe(exc)
            self.box[0] = ("error", text)
            # No traceback: walking one needs frames, which harness code may not have.
            print(f"harnessd guest: solve() raised {text}", file=sys.stderr, flush=True)
        finally:
            self.release()


def _describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:
        text = "an exception whose message could not be shown"
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


def _keep() -> None:
    exit_now = os._exit
    try:
        gateway = Gateway.connect(SOCKET_PATH)
        harness_link = Gateway.connect(SOCKET_PATH)
    except OSError as exc:
        print(f"harnessd guest: cannot reach the gateway at {SOCKET_PATH}: {exc}", file=sys.stderr)
        exit_now(EXIT_NO_GATEWAY)
    try:
        hello = gateway.request("hello", {})
        task = hello["task"]
        seal = harnessd_seal.make_sealer(bytes.fromhex(hello["key"]))
        max_frame = int(hello.get("limits", {}).get("max_frame", DEFAULT_MAX_FRAME))
    except (OSError, ValueError, KeyError, TypeError, GatewayError) as exc:
        print(f"harnessd guest: gateway exchange failed: {_describe(exc)}", file=sys.stderr)
        exit_now(EXIT_GATEWAY_FAILED)
    sources = _harness_sources(HARNESS_DIR)
    numbered = _numbered_code(sources)
    _install_loader(sources, numbered)
    os.chdir(SCRATCH_DIR)
    trace, lines = _tracer(numbered)
    check = harnessd_seal.make_answer_check()
    done = threading.Lock()
    done.acquire()
    box: list[Any] = [None]
    runner = _Runner(task, Context(harness_link, task), box, done.release)
    harness_thread = threading.Thread(target=runner.run, name="harness", daemon=True)
    finish = _finisher(
        seal=seal,
        check=check,
        lines=lines,
        box=box,
        send=gateway._sock.sendall,
        receive=gateway._sock.recv,
        set_timeout=gateway._sock.settimeout,
        flush=sys.stderr.flush,
        max_frame=max_frame,
        cut=len(HARNESS_DIR) + 1,
    )
    wait = done.acquire
    events, allow_trace = harnessd_lockdown.install(harness_root=HARNESS_DIR, sources=sources)
    allow_trace(1)  # the harness thread's own sys.settrace, in threading's bootstrap
    threading.settrace(trace)
    harness_thread.start()
    # From here on, harness code runs: only the bindings above are used.
    wait()
    exit_now(finish(events))


def _finisher(
    *,
    seal: Any,
    check: Any,
    lines: dict[str, set[int]],
    box: list[Any],
    send: Any,
    receive: Any,
    set_timeout: Any,
    flush: Any,
    max_frame: int,
    cut: int,
    _type: Any = type,
    _tuple: Any = tuple,
    _str: Any = str,
    _len: Any = len,
    _sorted: Any = sorted,
    _base: Any = BaseException,
    _unsealable: Any = harnessd_seal.Unsealable,
    _version: int = PROTOCOL_VERSION,
    _ok: int = EXIT_OK,
    _failed: int = EXIT_SOLVE_FAILED,
    _gateway_failed: int = EXIT_GATEWAY_FAILED,
    _wait_s: float = REPLY_WAIT_S,
) -> Any:
    """The keeper's last step, bound before harness code runs (see the module doc): the
    answer and coverage, sealed and submitted; returns the exit code."""

    def answer_fields() -> dict[str, Any]:
        result = box[0]
        if _type(result) is not _tuple or _len(result) != 2:
            return {"error": "RuntimeError: the harness thread left no answer"}
        kind, value = result
        if _type(kind) is _str and kind == "ok":
            try:
                fields: dict[str, Any] = check(value)
                return fields
            except _unsealable as exc:
                return {"error": f"ValueError: {exc}"}
        if _type(value) is _str:
            return {"error": value}
        return {"error": "RuntimeError: the harness thread left no answer"}

    def sealed(events: list[tuple[str, str]]) -> tuple[str, str, bool]:
        fields = {"output": None, "claimed_success": False, **answer_fields()}
        fields["coverage"] = {path[cut:]: _sorted(ran) for path, ran in lines.items() if ran}
        fields["tamper"] = [detail for what, detail in events if what == "tamper"]
        fields["refused"] = [detail for what, detail in events if what != "tamper"]
        try:
            payload, mac = seal(fields)
        except _unsealable as exc:
            fields.update(output=None, claimed_success=False, error=f"ValueError: {exc}")
            payload, mac = seal(fields)
        if _len(payload) + 300 > max_frame:
            size = _len(payload)
            fields.update(output=None, claimed_success=False)
            fields["error"] = (
                f"ValueError: the answer is {size} bytes, over the {max_frame}-byte limit"
            )
            payload, mac = seal(fields)
        return payload, mac, "error" in fields

    def finish(events: list[tuple[str, str]]) -> int:
        try:
            payload, mac, failed = sealed(events)
        except _base:  # anything the harness left half-changed: a bare failure, still sealed
            payload, mac = seal(
                {
                    "output": None,
                    "claimed_success": False,
                    "error": "RuntimeError: the answer could not be read",
                    "tamper": [d for w, d in events if w == "tamper"],
                }
            )
            failed = True
        frame, _ = seal(
            {
                "v": _version,
                "id": "submit",
                "op": "submit",
                "args": {"payload": payload, "mac": mac},
            }
        )
        code = _failed if failed else _ok
        try:
            send((frame + "\n").encode("utf-8"))
            set_timeout(_wait_s)
            receive(65536)  # the gateway's acknowledgement (or nothing, if it never comes)
        except _base:
            code = _gateway_failed
        try:  # noqa: SIM105 - contextlib would be looked up by name, after harness code ran
            flush()
        except _base:
            pass
        return code

    return finish


def main() -> int:
    _drop_root()
    keeper = threading.Thread(target=_keep, name="keeper")
    keeper.start()
    keeper.join()
    return EXIT_GATEWAY_FAILED  # the keeper ends the process itself; reaching here is a failure


if __name__ == "__main__":
    os._exit(main())
