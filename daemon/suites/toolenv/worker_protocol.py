"""The worker's wire format, shared by the daemon (parent) and the worker (child).

One JSON object per line: requests ``{"op": str, "args": {...}}`` on the worker's stdin,
replies ``{"ok": true, "value": ...}`` or ``{"ok": false, "error": str}`` on its stdout.
The parent never unpickles anything from the worker.
"""

from __future__ import annotations

import json
from typing import Any

MAX_LINE = 8 << 20  # a reply can carry an episode's record; a request one tool call
READY = {"ok": True, "value": "ready"}
TIMEOUT_RESULT = "Error during execution: the tool call exceeded the {limit:g} s time limit"


def encode(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
