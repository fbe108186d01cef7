"""``[endpoint]`` in harnessd.toml and the endpoint's token file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from daemon.config.secrets import endpoint_token, redact
from daemon.config.settings import LoadedSettings, is_loopback, load_settings
from daemon.errors import ConfigError

pytestmark = pytest.mark.unit


def _load(tmp_path: Path, body: str) -> LoadedSettings:
    config = tmp_path / "harnessd.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n[endpoint]\n{body}\n')
    return load_settings(config)


def test_off_by_default_on_loopback() -> None:
    settings = load_settings(None).settings.endpoint
    assert not settings.enabled and settings.host == "127.0.0.1"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("::", False),
        ("example.com", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_host_is_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, 'enabled = true\nhost = "0.0.0.0"')
    message = str(caught.value)
    assert "harnessd.toml" in message and "endpoint" in message
    assert "'0.0.0.0' is not a loopback address" in message and "allow_non_loopback" in message
    allowed = _load(tmp_path, 'enabled = true\nhost = "0.0.0.0"\nallow_non_loopback = true')
    assert allowed.settings.endpoint.host == "0.0.0.0"


def test_unknown_keys_and_bad_limits_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"endpoint\.prot"):
        _load(tmp_path, "prot = 80")
    with pytest.raises(ConfigError, match=r"endpoint\.max_body_bytes"):
        _load(tmp_path, "max_body_bytes = 10")
    with pytest.raises(ConfigError, match="unix_socket"):
        _load(tmp_path, "tcp = false")


def test_the_token_is_made_private_once_and_kept_out_of_logs(tmp_path: Path) -> None:
    loaded = _load(tmp_path, "enabled = true")
    token = endpoint_token(loaded)
    path = tmp_path / "state" / "endpoint.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) >= 32 and endpoint_token(loaded) == token  # made once, then read
    assert redact(f"Authorization: Bearer {token}") == "Authorization: Bearer [redacted]"


def test_a_token_file_others_can_read_or_that_is_missing_is_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    loaded = _load(tmp_path, f'enabled = true\ntoken_file = "{token_file}"')
    with pytest.raises(ConfigError, match="does not exist"):
        endpoint_token(loaded)
    token_file.write_text("a-long-enough-token-value\n")
    os.chmod(token_file, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        endpoint_token(loaded)
    os.chmod(token_file, 0o600)
    assert endpoint_token(loaded) == "a-long-enough-token-value"
    token_file.write_text("short")
    with pytest.raises(ConfigError, match="shorter than"):
        endpoint_token(loaded)
