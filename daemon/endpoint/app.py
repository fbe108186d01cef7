"""The ASGI application: ``POST /v1/chat/completions`` and ``GET /v1/models`` (Starlette),
and the probes a supervisor and a monitoring system use (``/healthz``, ``/readyz``, and
``/metrics`` behind the token), when the daemon hands them over.

Each request is checked in the order that spends least on a bad one: the bearer token
(compared in constant time), the body's size (its ``Content-Length``, then the bytes as
they arrive), the concurrency limit, then the JSON (:mod:`daemon.endpoint.wire`). Every
refusal, and every failure after it, is an OpenAI-shaped error body; nothing a client sends
reaches it as a traceback (a bug is logged and answered with a plain ``server_error``).

The live harness answers on the version current when the request reached it; the response
names it in ``x-harnessd-version`` (and its ``requests`` row in ``x-harnessd-request``).
While it runs, the client's connection is watched: a client that goes away cancels the
harness run (its container is removed, its model calls charged what the provider counted,
its row recorded ``interrupted``).

A streamed request (``"stream": true``, :class:`ChatStream`) is answered with status 200
and the role chunk as soon as its run has started (a refusal before that, an outage or a
stop, is a plain error response with its status), then a keep-alive comment every
``[endpoint] keepalive_s`` while the harness works, then the answer's chunks and
``data: [DONE]``. A run that fails after the stream began ends it with an OpenAI-shaped
``data: {"error": ...}`` event, which the SDKs raise as an error.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from daemon.config.settings import EndpointSettings
from daemon.endpoint import wire
from daemon.endpoint.wire import ApiError
from daemon.errors import BudgetExceeded, HarnessdError, NotAccepting, Unavailable
from daemon.live.harness import OnStart, Served, Started
from daemon.tasks import Task

log = logging.getLogger("harnessd.endpoint")

VERSION_HEADER = "x-harnessd-version"
REQUEST_HEADER = "x-harnessd-request"


class Answerer(Protocol):
    """What answers a checked request: the live harness (:meth:`LiveHarness.chat`)."""

    async def chat(self, task: Task, on_start: OnStart | None = None) -> Served: ...


class RequestObserver(Protocol):
    """Told of every request the endpoint answered (the daemon's metrics): its route, the
    status it ended with (499: the client left first) and its wall seconds."""

    def request_done(self, route: str, status: int, seconds: float) -> None: ...


class Probes(Protocol):
    """The daemon's probes, served beside the API: liveness and readiness without the
    token (a supervisor has none), the metrics with it."""

    async def healthz(self, request: Request) -> Response: ...

    async def readyz(self, request: Request) -> Response: ...

    async def metrics(self, request: Request) -> Response: ...


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def _served_headers(answer: dict[str, Any]) -> dict[str, str]:
    return {VERSION_HEADER: str(answer.get("version")), REQUEST_HEADER: str(answer.get("request"))}


def _harness_failure(answer: dict[str, Any]) -> ApiError:
    """The run ended badly (the harness timed out, crashed, ran out of budget...)."""
    error = answer.get("error")
    detail = f": {answer['detail']}" if answer.get("detail") else ""
    where = f"request {answer.get('request')} on {answer.get('version')}"
    if error == "budget":
        return ApiError(
            429,
            f"the token budget ran out during the harness run ({where}){detail}",
            type="insufficient_quota",
            code="budget_exceeded",
            headers=_served_headers(answer),
        )
    return ApiError(
        500,
        f"the harness run ended with {error} ({where}){detail}",
        type="server_error",
        code=f"harness_{error}",
        headers=_served_headers(answer),
    )


def _daemon_error(exc: HarnessdError) -> ApiError:
    if isinstance(exc, NotAccepting | Unavailable):
        return ApiError(
            503, str(exc), type="server_error", code="unavailable", headers={"retry-after": "5"}
        )
    if isinstance(exc, BudgetExceeded):
        return ApiError(429, str(exc), type="insufficient_quota", code="budget_exceeded")
    return ApiError(500, str(exc), type="server_error", code="harnessd_error")


class EndpointApp:
    """The application's state: the answerer, the token, the limits."""

    def __init__(
        self,
        answerer: Answerer,
        token: str,
        settings: EndpointSettings,
        *,
        observer: RequestObserver | None = None,
        probes: Probes | None = None,
    ) -> None:
        self.answerer = answerer
        self._token = token.encode()
        self.settings = settings
        self.observer = observer
        self.models = (settings.model_name,)
        self.created = int(time.time())
        self.in_flight = 0
        routes = [
            Route("/v1/chat/completions", self._guarded("chat", self.chat), methods=["POST"]),
            Route("/v1/models", self._guarded("models", self.list_models), methods=["GET"]),
        ]
        if probes is not None:
            routes += [
                Route("/healthz", probes.healthz, methods=["GET"]),
                Route("/readyz", probes.readyz, methods=["GET"]),
                Route("/metrics", self._guarded("metrics", probes.metrics), methods=["GET"]),
            ]
        self.app = Starlette(routes=routes, exception_handlers={HTTPException: self._http_error})

    def observe(self, route: str, status: int, began: float) -> None:
        if self.observer is not None:
            self.observer.request_done(route, status, time.monotonic() - began)

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        """Starlette's own refusals (no such route, wrong method), worded as OpenAI's."""
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = (
            f"{request.method} {request.url.path} is not allowed here"
            if status == 405
            else f"no route {request.method} {request.url.path}; this endpoint serves "
            "POST /v1/chat/completions and GET /v1/models"
        )
        return error_response(ApiError(status, message, code="unknown_url"))

    def _guarded(
        self, route: str, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            began = time.monotonic()
            response = await answered(request)
            if not isinstance(response, ChatStream):  # a stream counts itself when it ends
                self.observe(route, response.status_code, began)
            return response

        async def answered(request: Request) -> Response:
            try:
                self._authenticate(request)
                return await handler(request)
            except ApiError as error:
                return error_response(error)
            except ClientDisconnect:  # gone while sending its body: nobody to answer
                return Response(status_code=499)
            except Exception:  # a bug: logged, never shown to the client
                log.exception("endpoint %s %s failed", request.method, request.url.path)
                return error_response(_endpoint_bug())

        return guarded

    def _authenticate(self, request: Request) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self._token
        ):
            # Never echo what was sent: it may be a real key meant for somewhere else.
            raise ApiError(
                401,
                "Incorrect or missing API key: send 'Authorization: Bearer <token>' with the "
                "token from the daemon's endpoint token file",
                code="invalid_api_key",
                headers={"www-authenticate": "Bearer"},
            )

    async def _body(self, request: Request) -> bytes:
        limit = self.settings.max_body_bytes
        too_big = ApiError(
            413,
            f"the request body is larger than this endpoint's limit of {limit} bytes "
            "([endpoint] max_body_bytes)",
            code="request_too_large",
        )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_big
        chunks = bytearray()
        async for chunk in request.stream():
            chunks.extend(chunk)
            if len(chunks) > limit:
                raise too_big
        return bytes(chunks)

    async def list_models(self, request: Request) -> Response:
        return JSONResponse(wire.models_body(self.models, self.created))

    async def chat(self, request: Request) -> Response:
        body = await self._body(request)
        if self.in_flight >= self.settings.max_concurrent:
            raise ApiError(
                429,
                f"{self.in_flight} requests are being answered, this endpoint's limit "
                "([endpoint] max_concurrent); retry shortly",
                type="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"retry-after": "1"},
            )
        checked = wire.parse_request(wire.parse_json(body), self.models)
        if checked.stream:
            return ChatStream(self, checked)
        self.in_flight += 1
        try:
            served = await self._answer(request, checked.task)
        finally:
            self.in_flight -= 1
        if served is None:  # the client left; nobody reads this
            return Response(status_code=499)
        try:
            body_out = completion_body(checked, served)
        except ApiError as error:
            return error_response(error)
        return JSONResponse(body_out, headers=_served_headers(served.answer))

    async def _answer(self, request: Request, task: Task) -> Served | None:
        """The live harness's answer, or None if the client went away first (the run is
        cancelled then)."""
        outcome: list[Served | HarnessdError] = []
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    outcome.append(await self.answerer.chat(task))
                except HarnessdError as exc:
                    outcome.append(exc)
                finally:
                    tg.cancel_scope.cancel()

            async def watch() -> None:
                # The body is read, so the next message is the client leaving.
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                log.info("endpoint: the client left before its answer; cancelling the run")
                tg.cancel_scope.cancel()

            tg.start_soon(run)
            tg.start_soon(watch)
        if not outcome:
            return None
        result = outcome[0]
        if isinstance(result, HarnessdError):
            raise _daemon_error(result)
        return result


def _endpoint_bug() -> ApiError:
    return ApiError(
        500, "the endpoint failed on this request; see the daemon log", type="server_error"
    )


def completion_body(checked: wire.CompletionRequest, served: Served) -> dict[str, Any]:
    """The chat completion for a finished run (ApiError for a run that failed, or for an
    output no completion can carry)."""
    answer = served.answer
    if answer.get("error") is not None:
        raise _harness_failure(answer)
    try:
        return wire.response_body(
            request=checked,
            request_id=int(answer["request"]),
            output=served.output,
            last_reply=served.last_reply,
            prompt_tokens=int(answer.get("prompt_tokens", 0)),
            completion_tokens=int(answer.get("completion_tokens", 0)),
            version=str(answer["version"]),
        )
    except wire.BadOutput as exc:
        raise ApiError(
            500,
            f"the harness's answer is not one a chat completion can carry ({exc}); "
            f"request {answer['request']} on {answer['version']}",
            type="server_error",
            code="bad_harness_output",
            headers=_served_headers(answer),
        ) from None


def _event(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


KEEPALIVE = b": keep-alive\n\n"


class _ClientGone(Exception):
    """The client's connection closed (noticed while writing to it)."""


class ChatStream(Response):
    """One streamed chat completion, as an ASGI response that owns its harness run: the
    run, the watch on the client's connection and the writing of the chunks share one task
    group, so a client that leaves at any point cancels the run."""

    def __init__(self, endpoint: EndpointApp, checked: wire.CompletionRequest) -> None:
        super().__init__(status_code=200)
        self.endpoint = endpoint
        self.checked = checked

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoint
        endpoint.in_flight += 1
        began = time.monotonic()
        status = 499  # until it is known: the client left first
        try:
            status = await self._serve(scope, receive, send)
        finally:
            endpoint.in_flight -= 1
            endpoint.observe("chat", status, began)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> int:
        """The status the request ended with (an error inside the stream counts as its own
        status; 499: the client left)."""
        started: list[Started] = []
        begun, finished = anyio.Event(), anyio.Event()
        outcome: list[Served | ApiError] = []
        status = 499

        def on_start(event: Started) -> None:
            started.append(event)
            begun.set()

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    outcome.append(await self.endpoint.answerer.chat(self.checked.task, on_start))
                except HarnessdError as exc:
                    outcome.append(_daemon_error(exc))
                except Exception:
                    log.exception("endpoint: a streamed request failed")
                    outcome.append(_endpoint_bug())
                finally:
                    begun.set()
                    finished.set()

            async def watch() -> None:
                # The body is read, so the next message is the client leaving.
                while (await receive())["type"] != "http.disconnect":
                    pass
                log.info("endpoint: the client left a stream before its end; cancelling the run")
                tg.cancel_scope.cancel()

            tg.start_soon(run)
            tg.start_soon(watch)
            await begun.wait()
            try:
                if not started:  # refused before it began: a plain error with its status
                    error = outcome[0]
                    assert isinstance(error, ApiError)
                    await error_response(error)(scope, receive, send)
                    status = error.status
                else:
                    status = await self._stream(send, started[0], finished, outcome)
            except _ClientGone:
                status = 499
            tg.cancel_scope.cancel()  # the watch (and a run the client left) end here
        return status

    async def _stream(
        self,
        send: Send,
        started: Started,
        finished: anyio.Event,
        outcome: list[Served | ApiError],
    ) -> int:
        checked = self.checked
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "x-accel-buffering": "no",  # a proxy in front must not hold the chunks back
            VERSION_HEADER: started.version,
            REQUEST_HEADER: str(started.request),
        }
        await self._send(
            send,
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
            },
        )
        created = int(time.time())
        head = wire.stream_head(checked, started.request, started.version, created)
        await self._write(send, _event(head))
        while not finished.is_set():
            with anyio.move_on_after(self.endpoint.settings.keepalive_s):
                await finished.wait()
            if not finished.is_set():
                await self._write(send, KEEPALIVE)
        result = outcome[0]
        status = 200
        try:
            if isinstance(result, ApiError):
                raise result
            body = completion_body(checked, result)
            body["created"] = created
            chunks = [
                *map(_event, wire.stream_rest(body, include_usage=checked.include_usage)),
                _event("[DONE]"),
            ]
        except ApiError as error:
            chunks, status = [_event(error.body())], error.status
        await self._write(send, b"".join(chunks), more=False)
        return status

    async def _write(self, send: Send, data: bytes, *, more: bool = True) -> None:
        await self._send(send, {"type": "http.response.body", "body": data, "more_body": more})

    @staticmethod
    async def _send(send: Send, message: dict[str, Any]) -> None:
        try:
            await send(message)
        except OSError:  # the server's word for a client that has gone (ClientDisconnected)
            raise _ClientGone from None
