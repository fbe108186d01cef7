"""The endpoint's server: uvicorn on a loopback TCP address and/or a Unix socket, inside
the daemon's task group (:func:`serve_app` serves the metrics port the same way).

The sockets are bound here (so ``port = 0`` can report the port it got, and the Unix socket
is born 0600), then handed to uvicorn, which serves until the daemon stops. uvicorn's own
signal handling is left out: SIGTERM and SIGINT belong to the daemon, which drains the live
harness (requests in flight are answered or told it is stopping) and then cancels this
task; cancellation asks uvicorn to finish, and waits for it (bounded) before the sockets
close.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn
from anyio.abc import TaskStatus
from starlette.types import ASGIApp

from daemon.config.settings import EndpointSettings
from daemon.endpoint.app import Answerer, EndpointApp, Probes, RequestObserver
from daemon.errors import SetupError

log = logging.getLogger("harnessd.endpoint")

# How long requests still open at a stop get to finish before uvicorn cancels them (the
# live harness has already been drained by then, so they are only writing their replies).
SHUTDOWN_GRACE_S = 3


@dataclass(frozen=True)
class Listening:
    """Where the endpoint answers: its base URL (TCP) and/or its Unix socket."""

    url: str | None
    unix_socket: Path | None

    def describe(self) -> str:
        where = [w for w in (self.url, str(self.unix_socket) if self.unix_socket else None) if w]
        return " and ".join(where)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon owns the signals


def tcp_socket(section: str, host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``section``: the settings table that named it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise SetupError(
            f"[{section}] host {host!r} port {port}: cannot listen there ({exc.strerror}); "
            "pick another port (0: any free one) or stop what holds it"
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _unix_socket(path: Path) -> socket.socket:
    if path.exists() and not path.is_socket():
        raise SetupError(f"[endpoint] unix_socket {path}: a file that is not a socket is there")
    path.unlink(missing_ok=True)  # ours from an earlier run: the state-dir lock is held
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # born 0600: no window where others can connect
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise SetupError(f"[endpoint] unix_socket {path}: cannot listen ({exc.strerror})") from None
    finally:
        os.umask(old_umask)
    sock.listen(128)
    sock.setblocking(False)
    return sock


def base_url(sock: socket.socket) -> str:
    """``http://host:port`` of a listening TCP socket."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


async def serve_endpoint(
    settings: EndpointSettings,
    unix_socket: Path | None,
    answerer: Answerer,
    token: str,
    *,
    observer: RequestObserver | None = None,
    probes: Probes | None = None,
    task_status: TaskStatus[Listening] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; ``task_status.started`` gets where it listens."""
    sockets: list[socket.socket] = []
    try:
        if settings.tcp:
            sockets.append(tcp_socket("endpoint", settings.host, settings.port))
        if unix_socket is not None:
            sockets.append(_unix_socket(unix_socket))
        url = base_url(sockets[0]) + "/v1" if settings.tcp else None
        endpoint = EndpointApp(answerer, token, settings, observer=observer, probes=probes)
        await serve_app(
            endpoint.app, sockets, started=lambda: task_status.started(Listening(url, unix_socket))
        )
    finally:
        for sock in sockets:
            sock.close()
        if unix_socket is not None:
            unix_socket.unlink(missing_ok=True)


async def serve_app(
    app: ASGIApp, sockets: list[socket.socket], started: Callable[[], None]
) -> None:
    """Serve ``app`` with uvicorn on ``sockets`` (listening already) until cancelled;
    ``started`` is called once it accepts connections. The sockets stay the caller's."""
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,  # harnessd's logging stays as it is
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    server = _Server(config)
    done = anyio.Event()

    async def run() -> None:
        try:
            # Stopped by ``should_exit``, not by cancellation, so it closes its connections
            # and listeners itself.
            with anyio.CancelScope(shield=True):
                await server.serve(sockets=sockets)
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        while not server.started:
            if done.is_set():
                raise SetupError("an HTTP server of harnessd stopped while starting; see the log")
            await anyio.sleep(0.02)
        started()
        try:
            await anyio.sleep_forever()
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(SHUTDOWN_GRACE_S + 5):
                    await done.wait()
                server.force_exit = True
                await done.wait()
