"""Log lines: text for a person at a terminal, JSON lines for everything else (``auto``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.config.settings import load_settings
from daemon.errors import ConfigError

pytestmark = pytest.mark.unit

# Sets up logging as ``harnessd serve`` does, then logs one event-like line.
LOG_ONE = """
import logging, sys
from daemon.config.logs import setup_logging
setup_logging(sys.argv[1], "info")
logging.getLogger("harnessd.events").info(
    "candidate c3: heldout", extra={"event": "candidate.stage", "data": {"candidate": 3}}
)
"""


def _stderr_of(fmt: str, *, terminal: bool) -> str:
    """What that program writes to stderr, a pseudo-terminal's or a pipe's."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    if not terminal:
        done = subprocess.run(
            [sys.executable, "-c", LOG_ONE, fmt],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        return done.stderr
    main, child = os.openpty()
    try:
        subprocess.run(
            [sys.executable, "-c", LOG_ONE, fmt],
            stderr=child,
            stdout=subprocess.DEVNULL,
            env=env,
            check=True,
            timeout=60,
        )
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(main)


def test_auto_is_the_default_and_writes_text_on_a_terminal_json_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no harnessd.toml here: the defaults
    monkeypatch.delenv("HARNESSD_LOG_FORMAT", raising=False)
    assert load_settings(None).settings.log_format == "auto"
    text = _stderr_of("auto", terminal=True)
    assert "candidate.stage" in text and "candidate c3: heldout" in text
    assert not text.lstrip().startswith("{")
    [line] = _stderr_of("auto", terminal=False).splitlines()
    entry = json.loads(line)
    assert entry["event"] == "candidate.stage" and entry["data"] == {"candidate": 3}
    # Forced either way, whatever stderr is.
    assert _stderr_of("json", terminal=True).lstrip().startswith("{")
    assert not _stderr_of("text", terminal=False).startswith("{")


def test_a_bad_log_format_is_refused_naming_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "harnessd.toml"
    config.write_text('log_format = "pretty"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    message = str(caught.value)
    assert str(config) in message and "log_format" in message and "'auto'" in message
