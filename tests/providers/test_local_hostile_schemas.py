"""Schemas come from harnesses, so they are untrusted: none may crash or stall the daemon.

llama-cpp-python hands a grammar llama.cpp refuses to its sampler as a null pointer and the
process dies (SIGSEGV). Each case runs in a child process so a regression shows up as that
crash, reported here, instead of taking the whole test run down.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

CHILD = """
import json, sys, anyio
from pathlib import Path
from daemon.config.policy import RetryPolicy
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, Message
from daemon.config.settings import LoadedSettings, Settings

schema = json.loads(sys.argv[1])
settings = LoadedSettings(
    settings=Settings(state_dir=Path(sys.argv[2]) / "state", cache_dir=Path(sys.argv[3])),
    config_path=None, base_dir=Path(sys.argv[2]),
)

async def main():
    provider = make_provider("local:smollm2-135m", settings, RetryPolicy())
    request = ChatRequest(
        messages=[Message(role="user", content="Say hi as JSON.")],
        max_tokens=24, response_schema=schema,
    )
    reply = await provider.chat(request)
    await provider.aclose()
    print(json.dumps({"content": reply.content, "tokens": reply.usage.completion_tokens}))

anyio.run(main)
"""

HOSTILE = {
    # Bounds that llama.cpp's grammar parser refuses ("exceeds sane defaults").
    "huge_max_length": {
        "type": "object",
        "properties": {"r": {"type": "string", "maxLength": 2500}},
        "required": ["r"],
    },
    "huge_items": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 10**6},
    # Deep nesting.
    "deep": json.loads(
        '{"type":"object","properties":{"a":' * 60 + '{"type":"string"}' + "}}" * 60
    ),
    # Nonsense the converter cannot read at all.
    "nonsense": {"type": "object", "properties": {"x": {"$ref": "#/nowhere"}}},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_schema_is_relaxed_not_fatal(name: str, tmp_path: Path, asset_cache: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(HOSTILE[name]), str(tmp_path), str(asset_cache)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reply["tokens"] >= 1
