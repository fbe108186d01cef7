"""Logs on stderr: short text lines for people at a terminal, JSON lines for machines.

``log_format`` (settings): ``auto`` (the default) picks text when stderr is a terminal and
JSON lines otherwise (a service manager, a pipe, a file); ``text`` and ``json`` force one.
A text line is ``HH:MM:SS level kind message``, ``kind`` being the event kind (or the
component for plain log lines); a JSON line carries the event's data as well.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None)))


class JsonFormatter(logging.Formatter):
    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return self._redact(json.dumps(entry, default=str))


class TextFormatter(logging.Formatter):
    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        kind = getattr(record, "event", None) or record.name.removeprefix("harnessd.")
        line = f"{stamp} {record.levelname.lower():7} {kind:<22} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return self._redact(line)


def setup_logging(
    fmt: Literal["auto", "json", "text"],
    level: str,
    redact: Callable[[str], str] = lambda s: s,
) -> None:
    """Log to stderr; ``auto`` means text on a terminal and JSON lines otherwise."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(redact) if use_json else TextFormatter(redact))
    root = logging.getLogger("harnessd")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
