"""The gateway over TCP, for units that run on other machines (the ``ray`` executor).

A remote unit's container still has only its Unix socket and no network. On its node a
bridge (``sandbox.bridge``) carries each connection the container opens to this front, over
TLS pinned to the daemon's own certificate (``tls``). A connection's first line presents
the run's **capability**: 32 random bytes minted for one run of one task, bound to that
run's session and handler (so to its charge and budget), and revoked when the run ends. It
is the only credential that travels; provider keys, ground truth and the verifier never
leave the daemon. The bridge numbers connections in the order the container opened them
(the guest runtime's first), so the session's rules (``hello`` and ``submit`` only on the
first, the sealed submission) hold exactly as on a local socket. Connection 0 is the
bridge's lease: it stays open while the run is wanted, and its end tells the node to stop
the container. A peer without a live capability learns nothing and is disconnected.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from anyio.abc import ByteStream, TaskGroup
from anyio.streams.tls import TLSListener

from daemon.gateway.session import GatewayHandler, GatewayRecord, Session, open_session
from daemon.gateway.tls import Identity
from daemon.tasks import Task

log = logging.getLogger("harnessd.gateway.front")

HANDSHAKE_S = 10.0  # TLS and the capability line each; a silent peer is dropped
MAX_HANDSHAKE_LINE = 256
MAX_PENDING = 64  # connections not yet authenticated, at once
MAX_CONNECTION_NUMBER = 1 << 20


@dataclass
class _Run:
    session: Session
    seen: set[int] = field(default_factory=set)
    scopes: set[anyio.CancelScope] = field(default_factory=set)


def _digest(capability: str) -> bytes:
    # Looked up by digest, so the lookup's timing says nothing about the table's tokens.
    return hashlib.sha256(capability.encode("ascii", "replace")).digest()


async def _read_line(stream: ByteStream) -> bytes | None:
    """The handshake line, or None if it is too long or the peer stopped. The peer sends
    nothing more until it is answered, so nothing read here belongs to the protocol."""
    data = b""
    while b"\n" not in data:
        chunk = await stream.receive(MAX_HANDSHAKE_LINE)
        data += chunk
        if len(data) > MAX_HANDSHAKE_LINE:
            return None
    line, _, rest = data.partition(b"\n")
    return None if rest else line


def _parse_hello(line: bytes) -> tuple[str, int] | None:
    try:
        hello = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(hello, dict) or set(hello) != {"cap", "conn"}:
        return None
    cap, conn = hello["cap"], hello["conn"]
    if not isinstance(cap, str) or type(conn) is not int:
        return None
    if not 0 <= conn <= MAX_CONNECTION_NUMBER:
        return None
    return cap, conn


class GatewayFront:
    """One TCP+TLS listener serving the sessions of every remote run of a runtime."""

    def __init__(self, host: str, port: int, identity: Identity) -> None:
        self.host = host
        self.port = port
        self.identity = identity
        self._runs: dict[bytes, _Run] = {}
        self._pending = anyio.Semaphore(MAX_PENDING)
        self.refused = 0  # connections turned away (bad or stale capability), for tests

    @asynccontextmanager
    async def session(
        self, task: Task, handler: GatewayHandler
    ) -> AsyncIterator[tuple[GatewayRecord, str]]:
        """A run's session reachable with the capability yielded; revoked on the way out
        (its connections, the lease included, are closed)."""
        session, record = open_session(task, handler)
        capability = secrets.token_hex(32)
        run = _Run(session)
        self._runs[_digest(capability)] = run
        try:
            yield record, capability
        finally:
            del self._runs[_digest(capability)]
            for scope in run.scopes:
                scope.cancel()

    async def handle(self, stream: ByteStream) -> None:
        async with stream:
            try:
                await self._handle(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass
            except Exception:
                log.exception("gateway front connection failed")

    async def _handle(self, stream: ByteStream) -> None:
        async with self._pending:
            line = None
            with anyio.move_on_after(HANDSHAKE_S):
                line = await _read_line(stream)
            hello = _parse_hello(line) if line is not None else None
            run = self._runs.get(_digest(hello[0])) if hello is not None else None
            if hello is None or run is None or hello[1] in run.seen:
                self.refused += 1
                await stream.send(b'{"ok": false, "error": "refused"}\n')
                return
            number = hello[1]
            run.seen.add(number)
            await stream.send(b'{"ok": true}\n')
        with anyio.CancelScope() as scope:
            run.scopes.add(scope)
            try:
                if number == 0:
                    await _hold_lease(stream)
                else:
                    await run.session.serve(stream, number)
            finally:
                run.scopes.discard(scope)


async def _hold_lease(stream: ByteStream) -> None:
    """Keep the lease open until the run ends here (cancelled) or the bridge lets go."""
    while True:
        await stream.receive(64)  # the bridge sends nothing; EOF ends the lease


@asynccontextmanager
async def open_front(
    bind_host: str, advertise_host: str, port: int, identity: Identity
) -> AsyncIterator[GatewayFront]:
    """Listen on ``bind_host:port`` (0: any free port) while the body runs."""
    listener = await anyio.create_tcp_listener(local_host=bind_host, local_port=port)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    front = GatewayFront(advertise_host, bound, identity)
    tls = TLSListener(
        listener,
        identity.server_context(),
        standard_compatible=False,
        handshake_timeout=HANDSHAKE_S,
    )
    failure: Exception | None = None
    async with tls, anyio.create_task_group() as tg:
        tg.start_soon(_serve, tls, front, tg)
        try:
            yield front
        except Exception as exc:
            failure = exc  # re-raised below as itself, not inside the task group's
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def _serve(tls: TLSListener, front: GatewayFront, tg: TaskGroup) -> None:
    await tls.serve(front.handle, task_group=tg)
