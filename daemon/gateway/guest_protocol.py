"""The guest protocol's host side: its version and reply frames (``sandbox/guest/PROTOCOL.md``).

The guest runtime (stdlib only, inside the container) speaks the same version from its own
copy of these constants; frames travel as bounded JSON lines (:mod:`daemon.jsonlines`).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from daemon.jsonlines import error_frame, ok_frame

PROTOCOL_VERSION = 1
MAX_FRAME = 1 << 20  # 1 MiB per frame, both directions


def ok_reply(req_id: Any, result: Any) -> dict[str, Any]:
    return ok_frame(PROTOCOL_VERSION, req_id, result)


def error_reply(req_id: Any, code: str, message: str) -> dict[str, Any]:
    return error_frame(PROTOCOL_VERSION, req_id, code, message)


def seal_ok(key: bytes, payload: str) -> str:
    """The seal the guest runtime puts on a submission: HMAC-SHA256 of the payload's UTF-8
    bytes with the run's key, as hex (``harnessd_seal`` computes the same in the guest)."""
    return hmac.new(key, payload.encode("utf-8"), hashlib.sha256).hexdigest()
