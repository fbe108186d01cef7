"""Daemon settings: a TOML file (``harnessd.toml`` or ``--config PATH``) plus ``HARNESSD_*``.

Precedence, highest first: ``HARNESSD_*`` environment variables (nested keys with ``__``,
e.g. ``HARNESSD_LOCAL__N_CTX=2048``), then the TOML file, then the defaults below.
Relative paths set in the file resolve against the file's folder; defaults (``policies/
default.toml``, ``seeds/minimal``, ``harnesses``) against the project root.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from daemon.config.validation import ClosedModel, describe_validation_error, read_toml
from daemon.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # daemon/config/settings.py
ENV_PREFIX = "HARNESSD_"
CONFIG_ENV = "HARNESSD_CONFIG"
DEFAULT_CONFIG_NAME = "harnessd.toml"


# The state (SQLite, sockets, cache) sits beside the lineage in ``harnesses/`` by default:
# the database records versions whose trees and git history live there, so the two must
# travel together (a re-clone gets a fresh pair, never a database without its trees).
DEFAULT_STATE_DIR = Path(".state")
TOKEN_NAME = "endpoint.token"  # the endpoint's bearer token, in the state dir by default


class KeyedProvider(ClosedModel):
    """Where a hosted provider's key comes from. The key itself never sits in a config file."""

    api_key_env: str
    api_key_file: Path | None = None
    base_url: str | None = None


class AnthropicSettings(KeyedProvider):
    api_key_env: str = "ANTHROPIC_API_KEY"


class OpenAISettings(KeyedProvider):
    api_key_env: str = "OPENAI_API_KEY"
    # How a response schema is sent: "json_schema" (OpenAI, vLLM, Ollama, llama.cpp's own
    # llama-server) or "json_object" with the schema beside it (llama-cpp-python's server,
    # which refuses "json_schema").
    structured_output: Literal["json_schema", "json_object"] = "json_schema"


class LocalSettings(ClosedModel):
    # None: the embedded SmolLM2-135M-Instruct GGUF, taken from its pinned wheel.
    model_path: Path | None = None
    # The context window in tokens. None: the length the model was trained on, read from its
    # GGUF (``<arch>.context_length``), at most providers.local_llama.CONTEXT_CAP.
    n_ctx: Annotated[int, Field(ge=512, le=131072)] | None = None
    n_threads: Annotated[int, Field(ge=1, le=256)] | None = None
    # Instances of the model loaded side by side, each serving one call at a time (the
    # held-out stage's parent and candidate at once). None: two on a machine of two cores or
    # more, one otherwise. Each costs the model's memory and its own KV cache.
    instances: Annotated[int, Field(ge=1, le=16)] | None = None
    seed: int = 0


class ExecutorSettings(ClosedModel):
    """Where evaluation units run: here (``local``) or on a Ray cluster (``ray``)."""

    type: Literal["local", "ray"] = "local"
    # The head of an existing Ray cluster, "host:port". None: Ray's own RAY_ADDRESS.
    address: str | None = None
    # The address the cluster's nodes reach this daemon's gateway on (it listens there).
    # None: this machine's address as Ray sees it.
    gateway_host: str | None = None
    gateway_port: Annotated[int, Field(ge=0, le=65535)] = 0  # 0: any free port


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost`` or a loopback address)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def _loopback_or_allowed(host: str, allowed: bool, what: str) -> None:
    if not allowed and not is_loopback(host):
        raise ValueError(
            f"host {host!r} is not a loopback address: {what} would be reachable from other "
            "machines; use 127.0.0.1, or set allow_non_loopback = true if that is what you want"
        )


class EndpointSettings(ClosedModel):
    """``[endpoint]``: the OpenAI-compatible endpoint (:mod:`daemon.endpoint`), off by default.

    Clients authenticate with a bearer token read from ``token_file`` (default: the file
    ``endpoint.token`` in the state dir, made with a random token, 0600, on the first start
    with the endpoint on); the token never sits in this file.
    """

    enabled: bool = False
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8642  # 0: any free port (status shows it)
    # Listening beyond this machine exposes the live harness (and its model budget) to the
    # network: refused unless asked for in so many words.
    allow_non_loopback: bool = False
    # Also (or, with ``tcp = false``, only) a Unix socket, made 0600.
    unix_socket: Path | None = None
    tcp: bool = True
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    max_concurrent: Annotated[int, Field(ge=1, le=1024)] = 16
    token_file: Path | None = None
    # The model name clients send (and GET /v1/models lists).
    model_name: Annotated[str, Field(min_length=1, max_length=64)] = "harnessd"
    # Seconds between keep-alive comments on a stream while the harness works: proxies and
    # load balancers drop a connection that stays silent for long.
    keepalive_s: Annotated[float, Field(gt=0, le=300)] = 5.0

    @model_validator(mode="after")
    def _where(self) -> EndpointSettings:
        if self.tcp:
            _loopback_or_allowed(self.host, self.allow_non_loopback, "the endpoint")
        if not self.tcp and self.unix_socket is None:
            raise ValueError("tcp = false needs a unix_socket to listen on")
        return self


class MetricsSettings(ClosedModel):
    """``[metrics]``: the daemon's Prometheus metrics and its ``/healthz`` and ``/readyz``
    probes on a port of their own (:mod:`daemon.ops`), off by default. Unauthenticated, so
    on loopback unless ``allow_non_loopback``. With the endpoint on, the same probes are
    also on its server (``/metrics`` there behind its token)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8643  # 0: any free port (status shows it)
    allow_non_loopback: bool = False

    @model_validator(mode="after")
    def _where(self) -> MetricsSettings:
        _loopback_or_allowed(self.host, self.allow_non_loopback, "the metrics")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    state_dir: Path = DEFAULT_STATE_DIR
    # Pinned registry packages (model, task data). None: "cache" inside the state dir.
    cache_dir: Path | None = None
    harnesses_dir: Path = Path("harnesses")
    policy: Path = Path("policies/default.toml")
    seed: Path = Path("seeds/minimal")
    image: str | None = None
    log_format: Literal["auto", "json", "text"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    anthropic: AnthropicSettings = AnthropicSettings()
    openai: OpenAISettings = OpenAISettings()
    local: LocalSettings = LocalSettings()
    executor: ExecutorSettings = ExecutorSettings()
    endpoint: EndpointSettings = EndpointSettings()
    metrics: MetricsSettings = MetricsSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file arrives as init kwargs; the environment overrides it.
        return (env_settings, init_settings)


class LoadedSettings(BaseModel):
    """Settings plus where they came from, so errors and reloads can name the file."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    settings: Settings
    config_path: Path | None
    base_dir: Path

    def resolve(self, path: Path, field: str | None = None) -> Path:
        """A path from the settings: relative to the config file's folder when the file (or
        the environment) set it, relative to the project root when it is a default."""
        path = path.expanduser()
        if path.is_absolute():
            return path
        explicit = field is None or field in self.settings.model_fields_set
        return ((self.base_dir if explicit else PROJECT_ROOT) / path).resolve()

    @property
    def state_dir(self) -> Path:
        return self.resolve(self.settings.state_dir, "state_dir")

    @property
    def cache_dir(self) -> Path:
        explicit = self.settings.cache_dir
        return self.resolve(explicit) if explicit is not None else self.state_dir / "cache"

    @property
    def policy_path(self) -> Path:
        return self.resolve(self.settings.policy, "policy")

    @property
    def harnesses_dir(self) -> Path:
        return self.resolve(self.settings.harnesses_dir, "harnesses_dir")

    @property
    def seed_dir(self) -> Path:
        return self.resolve(self.settings.seed, "seed")

    @property
    def endpoint_token_file(self) -> Path:
        explicit = self.settings.endpoint.token_file
        return self.resolve(explicit) if explicit is not None else self.state_dir / TOKEN_NAME

    @property
    def endpoint_socket(self) -> Path | None:
        path = self.settings.endpoint.unix_socket
        return self.resolve(path) if path is not None else None


def find_config(explicit: Path | None) -> Path | None:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file not found: {explicit} (check --config)")
        return explicit.resolve()
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        path = Path(from_env)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (named by {CONFIG_ENV})")
        return path.resolve()
    local = Path.cwd() / DEFAULT_CONFIG_NAME
    return local.resolve() if local.is_file() else None


def _check_unknown_env() -> None:
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields} | {CONFIG_ENV}
    for name in os.environ:
        if not name.startswith(ENV_PREFIX) or name in known:
            continue
        head = name.split("__", 1)[0]
        if head in known and "__" in name:
            continue  # nested override; its inner key is validated by the model
        allowed = ", ".join(sorted(known))
        raise ConfigError(f"environment: unknown variable {name} (allowed: {allowed})")


def _source_of(exc: ValidationError, data: dict[str, Any], config_path: Path | None) -> str:
    first = exc.errors()[0]["loc"]
    top = str(first[0]) if first else ""
    env_name = ENV_PREFIX + top.upper()
    if any(k == env_name or k.startswith(env_name + "__") for k in os.environ):
        return f"environment {env_name}"
    if config_path is not None and top in data:
        return str(config_path)
    return str(config_path) if config_path is not None else "settings"


def load_settings(config: Path | None = None) -> LoadedSettings:
    """Load settings or raise ConfigError with one line naming the file (or variable) and key."""
    path = find_config(config)
    data = read_toml(path, what="config") if path is not None else {}
    _check_unknown_env()
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        raise ConfigError(
            describe_validation_error(exc, Settings, _source_of(exc, data, path))
        ) from None
    base = path.parent if path is not None else PROJECT_ROOT
    return LoadedSettings(settings=settings, config_path=path, base_dir=base)
