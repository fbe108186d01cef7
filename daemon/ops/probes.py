"""The probes: ``/healthz`` (liveness), ``/readyz`` (readiness) and ``/metrics``
(Prometheus), on the metrics port (``[metrics]``) and, with the endpoint on, on its server
too (there ``/metrics`` asks for the endpoint's token).

``/healthz`` answers 200 whenever the daemon's event loop does: a supervisor that gets no
answer has a hung or dead process. ``/readyz`` answers 200 only while the control socket
answers ``status``, the live version's tree is there and no outage stops the live harness
from answering; otherwise 503 with the reasons (a load balancer sends requests elsewhere
meanwhile). Both are JSON.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskStatus
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from daemon.config.settings import MetricsSettings
from daemon.endpoint.server import base_url, serve_app, tcp_socket
from daemon.ops.metrics import DaemonMetrics

# What stops the daemon from being ready, as reasons (none: ready).
Readiness = Callable[[], Awaitable[list[str]]]


class DaemonProbes:
    """The three probes (:class:`daemon.endpoint.app.Probes`)."""

    def __init__(self, metrics: DaemonMetrics, readiness: Readiness) -> None:
        self._metrics = metrics
        self._readiness = readiness

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(self, request: Request) -> Response:
        reasons = await self._readiness()
        if reasons:
            return JSONResponse({"status": "not ready", "reasons": reasons}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def metrics(self, request: Request) -> Response:
        body = await anyio.to_thread.run_sync(self._metrics.render)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    def app(self) -> Starlette:
        """The metrics port's application: the probes alone, no token."""
        return Starlette(
            routes=[
                Route("/healthz", self.healthz, methods=["GET"]),
                Route("/readyz", self.readyz, methods=["GET"]),
                Route("/metrics", self.metrics, methods=["GET"]),
            ]
        )


async def serve_probes(
    settings: MetricsSettings,
    probes: DaemonProbes,
    *,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the probes on ``[metrics] host:port`` until cancelled; ``task_status.started``
    gets the base URL."""
    sock: socket.socket = tcp_socket("metrics", settings.host, settings.port)
    try:
        url = base_url(sock)
        await serve_app(probes.app(), [sock], started=lambda: task_status.started(url))
    finally:
        sock.close()
