"""The gateway front's door: only a live capability, over TLS pinned to the daemon's
certificate, gets a run's session; each connection number once; revoked with the run."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from daemon.gateway.front import GatewayFront, open_front
from daemon.gateway.tls import Identity, make_identity
from sandbox.bridge import FrontAddress, client_context, connect
from sandbox.errors import GatewayUnreachable
from tests.sandbox.conftest import StandInModel, make_task

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@pytest.fixture
async def front(tmp_path: Path) -> AsyncIterator[GatewayFront]:
    identity = make_identity(tmp_path / "tls")
    async with open_front("127.0.0.1", "127.0.0.1", 0, identity) as f:
        yield f


def endpoint(front: GatewayFront, cert_pem: str | None = None) -> FrontAddress:
    return FrontAddress(front.host, front.port, cert_pem or front.identity.cert_pem)


async def hello(stream: anyio.abc.ByteStream) -> bytes:
    await stream.send(b'{"v": 1, "id": 1, "op": "hello", "args": {}}\n')
    return await stream.receive()


async def test_a_live_capability_reaches_its_session_and_nothing_else_does(
    front: GatewayFront,
) -> None:
    task = make_task()
    async with front.session(task, StandInModel()) as (record, capability):
        stream = await connect(endpoint(front), capability, 1)
        async with stream:
            reply = await hello(stream)
        assert task.id.encode() in reply and b'"key"' in reply
        # Guessing: a capability of the right shape that was never minted.
        with pytest.raises(GatewayUnreachable, match="turned the run away"):
            await connect(endpoint(front), "0" * 64, 2)
        # Replaying a connection number: the guest's place cannot be taken twice.
        with pytest.raises(GatewayUnreachable, match="turned the run away"):
            await connect(endpoint(front), capability, 1)
    # Revoked with the run.
    with pytest.raises(GatewayUnreachable, match="turned the run away"):
        await connect(endpoint(front), capability, 2)
    assert front.refused == 3
    assert record.connections == 1


async def test_the_front_is_tls_pinned_to_its_own_certificate(
    front: GatewayFront, tmp_path: Path
) -> None:
    other: Identity = make_identity(tmp_path / "other")
    async with front.session(make_task(), StandInModel()) as (_, capability):
        # A bridge pinned to another certificate (a daemon impersonated) refuses the peer.
        with pytest.raises(GatewayUnreachable, match="cannot reach"):
            await connect(endpoint(front, other.cert_pem), capability, 1)
        # Plain TCP gets no session: the first bytes are not a TLS handshake.
        async with await anyio.connect_tcp(front.host, front.port) as raw:
            await raw.send(f'{{"cap": "{capability}", "conn": 1}}\n'.encode())
            with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                while True:
                    assert b'"ok": true' not in await raw.receive()
    assert isinstance(client_context(front.identity.cert_pem), ssl.SSLContext)


async def test_the_lease_closes_when_the_run_ends(front: GatewayFront) -> None:
    async with front.session(make_task(), StandInModel()) as (_, capability):
        lease = await connect(endpoint(front), capability, 0)
    with anyio.fail_after(10), pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
        await lease.receive()
    await lease.aclose()
