"""The control verbs: what ``harnessctl`` can ask of a running daemon."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import anyio

from daemon.control import ControlError
from daemon.errors import ConfigError
from daemon.policy import parse_policy
from daemon.protocol import ErrorCode

if TYPE_CHECKING:
    from daemon.service import Daemon


def _arg(args: dict[str, Any], name: str, kind: type, *, required: bool = True) -> Any:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind):
        raise ControlError(ErrorCode.BAD_ARGS, f"argument '{name}' must be a {kind.__name__}")
    return value


class ControlApi:
    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon

    def subscribe(self) -> AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[Any]]:
        return self.d.bus.subscribe()

    async def call(self, verb: str, args: dict[str, Any]) -> Any:
        method = getattr(self, f"verb_{verb}", None)
        if method is None:
            raise ControlError(
                ErrorCode.UNAVAILABLE, f"'{verb}' is not available in this daemon yet"
            )
        return await method(args)

    async def verb_status(self, args: dict[str, Any]) -> Any:
        return self.d.status()

    async def verb_events(self, args: dict[str, Any]) -> Any:
        limit = _arg(args, "limit", int, required=False) or 50
        return await anyio.to_thread.run_sync(lambda: self.d.bus.recent(min(limit, 1000)))

    async def verb_pause(self, args: dict[str, Any]) -> Any:
        if not self.d.paused:
            self.d.paused = True
            await self.d.bus.emit("loop.paused", "improvement loop paused by harnessctl")
        return {"paused": True}

    async def verb_resume(self, args: dict[str, Any]) -> Any:
        if self.d.paused:
            self.d.paused = False
            await self.d.bus.emit("loop.resumed", "improvement loop resumed by harnessctl")
        return {"paused": False}

    async def verb_policy_show(self, args: dict[str, Any]) -> Any:
        return {"path": str(self.d.policy.path), "policy": self.d.policy.get().model_dump()}

    async def verb_policy_check(self, args: dict[str, Any]) -> Any:
        name = _arg(args, "name", str)
        text = _arg(args, "text", str)
        try:
            policy = parse_policy(text, name)
        except ConfigError as exc:
            raise ControlError(ErrorCode.INVALID_POLICY, str(exc)) from None
        return {"name": name, "valid": True, "policy": policy.model_dump()}

    async def verb_stop(self, args: dict[str, Any]) -> Any:
        self.d.stop_requested.set()
        return {"stopping": True}
