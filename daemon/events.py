"""The daemon's event log: every notable happening is stored in SQLite and broadcast.

Owner of the ``events`` table.

Subscribers (``harnessctl watch``) get a bounded buffer each. A subscriber too slow to keep
up loses events rather than slowing the daemon; it is told how many it missed. Every kind
is listed, with when it happens, in the README's events table (a test keeps the two equal).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from daemon.store import Store

log = logging.getLogger("harnessd.events")

SUBSCRIBER_BUFFER = 1024
Event = dict[str, Any]
# How a component reports an event: :meth:`EventBus.emit`'s signature, ``emit(kind, message,
# *, level=..., persist=..., **data)``, so a component is handed the bus's method, not the bus.
Emit = Callable[..., Awaitable[Any]]


def make_event(
    event_id: int, kind: str, level: str, message: str, data: dict[str, Any], ts: float = 0.0
) -> Event:
    return {
        "id": event_id,
        "ts": ts or time.time(),
        "kind": kind,
        "level": level,
        "message": message,
        "data": data,
    }


def insert_event(
    store: Store,
    kind: str,
    message: str,
    *,
    level: str = "info",
    data: dict[str, Any] | None = None,
) -> int:
    """Store one event; returns its id. Synchronous: call it from a worker thread."""
    with store.tx() as conn:
        cur = conn.execute(
            "INSERT INTO events(ts, kind, level, message, data) VALUES (?,?,?,?,?)",
            (time.time(), kind, level, message, json.dumps(data or {}, sort_keys=True)),
        )
        return int(cur.lastrowid or 0)


def recent_events(store: Store, limit: int = 50) -> list[Event]:
    """The newest ``limit`` events, oldest first."""
    rows = store.query(
        "SELECT id, ts, kind, level, message, data FROM events ORDER BY id DESC LIMIT ?",
        (limit,),
    )
    return [
        make_event(r["id"], r["kind"], r["level"], r["message"], json.loads(r["data"]), r["ts"])
        for r in reversed(rows)
    ]


def count_by(store: Store, kind: str, key: str) -> dict[str, int]:
    """How many stored events of ``kind`` there are, by the value of their data's ``key``
    (e.g. outages by dependency)."""
    rows = store.query(
        "SELECT json_extract(data, '$.' || ?) AS k, COUNT(*) AS n FROM events WHERE kind = ? "
        "GROUP BY k ORDER BY k",
        (key, kind),
    )
    return {str(r["k"]): int(r["n"]) for r in rows}


@dataclass
class _Subscriber:
    send: MemoryObjectSendStream[Event]
    dropped: int = 0


@dataclass
class EventBus:
    store: Store
    redact: Callable[[str], str] = field(default=lambda text: text)
    _subscribers: dict[int, _Subscriber] = field(default_factory=dict)

    async def emit(
        self, kind: str, message: str, *, level: str = "info", persist: bool = True, **data: Any
    ) -> Event:
        """Store the event, log it, and hand it to every subscriber.

        ``persist=False`` is for high-rate progress ticks: broadcast, but neither stored
        nor logged.
        """
        message = self.redact(message)
        clean: dict[str, Any] = json.loads(self.redact(json.dumps(data, default=str)))
        event_id = 0
        if persist:
            event_id = await anyio.to_thread.run_sync(
                lambda: insert_event(self.store, kind, message, level=level, data=clean)
            )
            log.log(
                logging.getLevelName(level.upper()), message, extra={"event": kind, "data": clean}
            )
        event = make_event(event_id, kind, level, message, clean)
        self._broadcast(event)
        return event

    def _broadcast(self, event: Event) -> None:
        for sub in list(self._subscribers.values()):
            try:
                if sub.dropped:
                    notice = f"{sub.dropped} events dropped (slow subscriber)"
                    sub.send.send_nowait(
                        make_event(0, "dropped", "warning", notice, {"count": sub.dropped})
                    )
                    sub.dropped = 0
                sub.send.send_nowait(event)
            except anyio.WouldBlock:
                sub.dropped += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
        send, receive = anyio.create_memory_object_stream[Event](SUBSCRIBER_BUFFER)
        key = id(send)
        self._subscribers[key] = _Subscriber(send)
        try:
            yield receive
        finally:
            self._subscribers.pop(key, None)
            send.close()
            receive.close()

    def recent(self, limit: int = 50) -> list[Event]:
        return recent_events(self.store, limit)
