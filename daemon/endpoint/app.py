"""The ASGI application: ``POST /v1/chat/completions`` and ``GET /v1/models`` (Starlette).

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
"""

from __future__ import annotations

import hmac
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

from daemon.config.settings import EndpointSettings
from daemon.endpoint import wire
from daemon.endpoint.wire import ApiError
from daemon.errors import BudgetExceeded, HarnessdError, NotAccepting, Unavailable
from daemon.live.harness import Served
from daemon.tasks import Task

log = logging.getLogger("harnessd.endpoint")

VERSION_HEADER = "x-harnessd-version"
REQUEST_HEADER = "x-harnessd-request"


class Answerer(Protocol):
    """What answers a checked request: the live harness (:meth:`LiveHarness.chat`)."""

    async def chat(self, task: Task) -> Served: ...


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

    def __init__(self, answerer: Answerer, token: str, settings: EndpointSettings) -> None:
        self.answerer = answerer
        self._token = token.encode()
        self.settings = settings
        self.models = (settings.model_name,)
        self.created = int(time.time())
        self.in_flight = 0
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._guarded(self.chat), methods=["POST"]),
                Route("/v1/models", self._guarded(self.list_models), methods=["GET"]),
            ],
            exception_handlers={HTTPException: self._http_error},
        )

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
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            try:
                self._authenticate(request)
                return await handler(request)
            except ApiError as error:
                return error_response(error)
            except ClientDisconnect:  # gone while sending its body: nobody to answer
                return Response(status_code=499)
            except Exception:  # a bug: logged, never shown to the client
                log.exception("endpoint %s %s failed", request.method, request.url.path)
                return error_response(
                    ApiError(
                        500,
                        "the endpoint failed on this request; see the daemon log",
                        type="server_error",
                    )
                )

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
        self.in_flight += 1
        try:
            served = await self._answer(request, checked.task)
        finally:
            self.in_flight -= 1
        if served is None:  # the client left; nobody reads this
            return Response(status_code=499)
        answer = served.answer
        if answer.get("error") is not None:
            return error_response(_harness_failure(answer))
        try:
            body_out = wire.response_body(
                request=checked,
                request_id=int(answer["request"]),
                output=served.output,
                last_reply=served.last_reply,
                prompt_tokens=int(answer.get("prompt_tokens", 0)),
                completion_tokens=int(answer.get("completion_tokens", 0)),
                version=str(answer["version"]),
            )
        except wire.BadOutput as exc:
            return error_response(
                ApiError(
                    500,
                    f"the harness's answer is not one a chat completion can carry ({exc}); "
                    f"request {answer['request']} on {answer['version']}",
                    type="server_error",
                    code="bad_harness_output",
                    headers=_served_headers(answer),
                )
            )
        return JSONResponse(body_out, headers=_served_headers(answer))

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
