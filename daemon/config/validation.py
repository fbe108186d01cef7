"""Models of what a user writes, and their validation errors as one line that names the file,
the key and the fix."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from daemon.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class ClosedModel(BaseModel):
    """A table of a file a user writes: an unknown key is an error (a typo never passes
    silently), and the value read is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def read_toml(path: Path, *, what: str) -> dict[str, Any]:
    """Read a TOML file, naming the file and line in any error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{what} file not found: {path} (create it or pass another path)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{what} file {path} cannot be read: {exc.strerror}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _allowed_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The field names valid at ``loc``'s parent, to suggest in an unknown-key error."""
    current: Any = model
    for part in loc[:-1]:
        fields = getattr(current, "model_fields", None)
        if fields is None or not isinstance(part, str) or part not in fields:
            return []
        annotation = fields[part].annotation
        current = annotation
    fields = getattr(current, "model_fields", None)
    return sorted(fields) if fields else []


def _describe(err: Any, model: type[BaseModel]) -> str:
    loc: tuple[str | int, ...] = tuple(err["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, loc)
        hint = f" (allowed here: {', '.join(allowed)})" if allowed else ""
        return f"unknown key '{key}'{hint}"
    value = err.get("input")
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"key '{key}': {err['msg']}, got {shown}"


def describe_validation_error(exc: ValidationError, model: type[BaseModel], source: str) -> str:
    """One line: ``SOURCE: key 'a.b': <what is expected>, got <value>``; several joined by '; '."""
    parts = [_describe(e, model) for e in exc.errors()]
    return f"{source}: " + "; ".join(parts)


def validate_model(model: type[M], data: dict[str, Any], source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, model, source)) from None
