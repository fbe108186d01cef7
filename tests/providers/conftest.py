"""Fixtures for provider tests: settings pointing at local servers, and a realistic key."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from provider_helpers import KEY_ENV, SECRET_KEY, MakeSettings

from daemon.config.settings import AnthropicSettings, LoadedSettings, OpenAISettings, Settings


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET_KEY)
    return SECRET_KEY


@pytest.fixture
def make_settings(tmp_path: Path, asset_cache: Path) -> MakeSettings:
    def make(
        *,
        anthropic_url: str | None = None,
        openai_url: str | None = None,
        structured_output: Literal["json_schema", "json_object"] = "json_schema",
    ) -> LoadedSettings:
        settings = Settings(
            state_dir=tmp_path / "state",
            cache_dir=asset_cache,
            anthropic=AnthropicSettings(api_key_env=KEY_ENV, base_url=anthropic_url),
            openai=OpenAISettings(
                api_key_env=KEY_ENV, base_url=openai_url, structured_output=structured_output
            ),
        )
        return LoadedSettings(settings=settings, config_path=None, base_dir=tmp_path)

    return make
