"""llama.cpp's own OpenAI-compatible server (llama-cpp-python's ``server`` extra) serving the
embedded model on a free localhost port, for tests of the ``openai:`` provider against a
real server rather than a hand-written fake.

Started with the ``chatml-function-calling`` chat format (SmolLM2's template is ChatML), so
it answers plain chat, tool calls and grammar-constrained JSON. Its one quirk: structured
output must be sent as ``{"type": "json_object", "schema": ...}`` (``[openai]
structured_output = "json_object"``); it refuses ``json_schema``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from daemon.config import assets
from tests.support.heavy import refuse_in_unit_tests

MODEL_ALIAS = "smollm2"
KEY_ENV = "LLAMA_SERVER_TEST_KEY"  # any value: the server is started without a key
START_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class LlamaServer:
    url: str  # the API base, ".../v1"
    model: str  # the model name it serves ("openai:<model>" in a policy)
    log: Path

    @property
    def ref(self) -> str:
        return f"openai:{self.model}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=5) as reply:
            models = json.loads(reply.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return any(m.get("id") == MODEL_ALIAS for m in models.get("data", []))


@contextmanager
def llama_server(cache_dir: Path, log: Path) -> Iterator[LlamaServer]:
    """Start the server, wait until it lists its model, and stop it afterwards."""
    refuse_in_unit_tests("the local model's server (tests/llama_server.py)")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(assets.embedded_model(cache_dir)),
        "--model_alias",
        MODEL_ALIAS,
        "--chat_format",
        "chatml-function-calling",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--seed",
        "0",
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(url):
            if proc.poll() is not None:
                raise AssertionError(
                    f"the llama.cpp server exited {proc.returncode}:\n{log.read_text()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"the llama.cpp server did not answer:\n{log.read_text()}")
            time.sleep(0.5)
        yield LlamaServer(url=url, model=MODEL_ALIAS, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
