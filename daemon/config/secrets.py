"""Provider API keys and the endpoint's token: where they come from, and keeping them out of
everything we write.

A key is read from the file named by ``api_key_file`` when that is set, otherwise from the
environment variable named by ``api_key_env``. Every key read here (and every value
:func:`register_configured_secrets` finds) joins a process-wide set that :func:`redact`
scrubs from text; the logger and the event writer pass everything through it.

Values shorter than :data:`MIN_SECRET_LENGTH` are not treated as secrets: local
OpenAI-compatible servers accept placeholders such as ``none``, and scrubbing a short
common word from every log line would make the logs unreadable without protecting anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import threading
from pathlib import Path

from daemon.config.settings import KeyedProvider, LoadedSettings
from daemon.errors import ConfigError, ProviderConfigError

MIN_SECRET_LENGTH = 8
REDACTED = "[redacted]"

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()


def register_secret(value: str) -> None:
    """Add ``value`` to the set :func:`redact` removes (ignored when too short to be a key)."""
    global _secrets
    value = value.strip()
    if len(value) < MIN_SECRET_LENGTH:
        return
    with _lock:
        _secrets = _secrets | {value}


def known_secret_count() -> int:
    return len(_secrets)


def redact(text: str) -> str:
    """``text`` with every known key value replaced by ``[redacted]``."""
    current = _secrets  # one snapshot: registration may happen concurrently
    if not current:
        return text
    # Longest first, so a key that contains another key is removed whole.
    for secret in sorted(current, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _read_key_file(path: Path, where: str) -> str:
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ProviderConfigError(
            f"{where}: key file {path} does not exist (create it, or unset api_key_file "
            "to read the key from the environment)"
        ) from None
    except OSError as exc:
        raise ProviderConfigError(
            f"{where}: key file {path} cannot be read: {exc.strerror}"
        ) from None
    if not value:
        raise ProviderConfigError(f"{where}: key file {path} is empty (put the API key in it)")
    return value


def read_api_key(section: str, keyed: KeyedProvider, settings: LoadedSettings, ref: str) -> str:
    """The API key for provider settings ``[section]``, registered for redaction.

    ``ref`` (the policy's model string) is named in the error so the user knows which
    model needed the key.
    """
    where = f"{ref} ({_config_name(settings)} [{section}])"
    if keyed.api_key_file is not None:
        value = _read_key_file(settings.resolve(keyed.api_key_file), where)
    else:
        value = os.environ.get(keyed.api_key_env, "").strip()
        if not value:
            raise ProviderConfigError(
                f"{where}: no API key: environment variable {keyed.api_key_env} is not set; "
                f"export it, or name a key file with {section}.api_key_file (servers that "
                "need no key accept any placeholder value)"
            )
    register_secret(value)
    return value


def register_configured_secrets(settings: LoadedSettings) -> None:
    """Register every key the settings point at, used or not, so none can reach a log.

    Missing variables and files are not errors here: only a provider that needs its key
    complains, when it is made.
    """
    s = settings.settings
    for keyed in (s.anthropic, s.openai):
        value = os.environ.get(keyed.api_key_env, "")
        if value:
            register_secret(value)
        if keyed.api_key_file is not None:
            with contextlib.suppress(OSError):
                register_secret(settings.resolve(keyed.api_key_file).read_text(encoding="utf-8"))
    with contextlib.suppress(OSError):
        register_secret(settings.endpoint_token_file.read_text(encoding="utf-8"))


def endpoint_token(settings: LoadedSettings) -> str:
    """The endpoint's bearer token, registered for redaction (blocking: reads a file).

    From ``[endpoint] token_file`` when set (it must exist); else the state dir's
    ``endpoint.token``, made with a random token (0600) the first time. A token file others
    can read is refused: whoever reads it can spend the daemon's model budget.
    """
    path = settings.endpoint_token_file
    where = f"{_config_name(settings)} [endpoint] token_file"
    explicit = settings.settings.endpoint.token_file is not None
    if not path.exists() and not explicit:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    try:
        mode = path.stat().st_mode
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigError(
            f"{where}: {path} does not exist (put a token in it, e.g. the output of "
            "'python3 -c \"import secrets; print(secrets.token_urlsafe(32))\"', or unset "
            "token_file to have one made in the state dir)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{where}: {path} cannot be read: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{where}: {path} can be read by other users (mode {stat.S_IMODE(mode):o}); "
            f"make it private: chmod 600 {path}"
        )
    if len(value) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"{where}: the token in {path} is shorter than {MIN_SECRET_LENGTH} characters; "
            "use a long random one"
        )
    register_secret(value)
    return value


def _config_name(settings: LoadedSettings) -> str:
    return str(settings.config_path) if settings.config_path is not None else "settings"


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs known keys from a record's message and arguments.

    For handlers that do not format through :func:`redact` themselves (e.g. a library's
    own handler); harnessd's formatters already redact their output.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if _secrets:
            record.msg = redact(record.getMessage())
            record.args = None
        return True
