"""The node side of a remote unit's gateway: the container's Unix socket, carried to the
daemon's gateway front (``daemon.gateway.front``) over TLS.

The container keeps no network; this process, trusted code of the project on the node,
listens on the run's socket and opens one TLS connection to the front for each connection
the container makes, numbered in the order the container made them (the guest runtime's
first). Each presents the run's capability; nothing else (no key, no setting) is known
here. A lease connection (number 0) is opened first and held: when the daemon ends or
abandons the run it closes the lease, and :func:`bridge` reports it so the container stops.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteStream, TaskGroup

from sandbox.errors import GatewayUnreachable
from sandbox.unix import RawUnixStream, accept_unix, bind_unix

CONNECT_S = 15.0
MAX_REPLY = 256
# Connections one run may open over its life; the front serves 4 at once, this bounds churn.
MAX_CONNECTIONS = 64


@dataclass(frozen=True)
class FrontAddress:
    """Where the daemon's gateway front listens, and its certificate (pinned, public)."""

    host: str
    port: int
    cert_pem: str


def client_context(cert_pem: str) -> ssl.SSLContext:
    """Trust exactly ``cert_pem`` (the front's own certificate), TLS 1.3 only. The name is
    not checked: the pin is stronger than any name, and the host may be a bare address."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=cert_pem)
    return ctx


async def connect(endpoint: FrontAddress, capability: str, number: int) -> ByteStream:
    """A connection to the front, authenticated as connection ``number`` of the run."""
    try:
        with anyio.fail_after(CONNECT_S):
            stream = await anyio.connect_tcp(
                endpoint.host,
                endpoint.port,
                ssl_context=client_context(endpoint.cert_pem),
                tls_standard_compatible=False,
            )
            try:
                hello = json.dumps({"cap": capability, "conn": number}) + "\n"
                await stream.send(hello.encode())
                reply = b""
                while b"\n" not in reply and len(reply) <= MAX_REPLY:
                    reply += await stream.receive(MAX_REPLY)
            except BaseException:
                await stream.aclose()
                raise
    except (
        OSError,
        TimeoutError,
        ssl.SSLError,
        anyio.BrokenResourceError,
        anyio.EndOfStream,
    ) as exc:
        where = f"{endpoint.host}:{endpoint.port}"
        raise GatewayUnreachable(f"cannot reach the daemon's gateway at {where}: {exc}") from exc
    if reply.strip() != b'{"ok": true}':
        await stream.aclose()
        raise GatewayUnreachable("the daemon's gateway turned the run away (it has ended)")
    return stream


async def _pipe(source: ByteStream, sink: ByteStream, done: anyio.CancelScope) -> None:
    with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        while True:
            await sink.send(await source.receive())
    done.cancel()  # either side ending ends the connection (TLS has no half-close)


async def _carry(
    local: RawUnixStream, endpoint: FrontAddress, capability: str, number: int
) -> None:
    async with local:
        try:
            remote = await connect(endpoint, capability, number)
        except GatewayUnreachable:
            return  # the container sees its connection closed
        async with remote, anyio.create_task_group() as tg:
            tg.start_soon(_pipe, local, remote, tg.cancel_scope)
            tg.start_soon(_pipe, remote, local, tg.cancel_scope)


async def _accept(
    listener: socket.socket, endpoint: FrontAddress, capability: str, tg: TaskGroup
) -> None:
    number = 0
    while True:
        conn = await accept_unix(listener)
        number += 1  # numbered here, in the order the container connected
        if number > MAX_CONNECTIONS:
            conn.close()
            continue
        tg.start_soon(_carry, RawUnixStream(conn), endpoint, capability, number)


async def _watch_lease(lease: ByteStream, lost: anyio.Event) -> None:
    with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        while True:
            await lease.receive(64)
    lost.set()


@asynccontextmanager
async def bridge(
    socket_path: Path, endpoint: FrontAddress, capability: str
) -> AsyncIterator[anyio.Event]:
    """Serve the run's socket at ``socket_path`` while the body runs, carried to the front.
    Yields an event set when the daemon lets go of the run (the lease ended)."""
    lease = await connect(endpoint, capability, 0)
    lost = anyio.Event()
    async with lease:
        listener = bind_unix(socket_path, 0o666)  # the guest runs as uid 65534
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_lease, lease, lost)
                tg.start_soon(_accept, listener, endpoint, capability, tg)
                try:
                    yield lost
                finally:
                    tg.cancel_scope.cancel()
        finally:
            listener.close()
            with suppress(FileNotFoundError):
                os.unlink(socket_path)
