"""make_provider's errors, where keys come from, and redaction."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from provider_helpers import KEY_ENV, SECRET_KEY, MakeSettings

from daemon.config import secrets
from daemon.config.policy import RetryPolicy
from daemon.config.settings import LoadedSettings, LocalSettings, OpenAISettings, Settings
from daemon.errors import ProviderConfigError
from daemon.providers import make_provider

pytestmark = [pytest.mark.anyio, pytest.mark.unit]


def test_unknown_provider_names_the_model_string(make_settings: MakeSettings) -> None:
    with pytest.raises(ProviderConfigError, match=r"'gemini:pro'.*one of anthropic, openai"):
        make_provider("gemini:pro", make_settings(), RetryPolicy())
    with pytest.raises(ProviderConfigError, match="expected 'provider:model'"):
        make_provider("local", make_settings(), RetryPolicy())


def test_missing_key_names_the_variable_and_the_setting(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ProviderConfigError) as caught:
        make_provider("anthropic:claude-x", make_settings(), RetryPolicy())
    message = str(caught.value)
    assert "anthropic:claude-x" in message
    assert KEY_ENV in message and "anthropic.api_key_file" in message


async def test_key_file_is_read_and_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-file-0123456789abcdefghijklmnopqrstuv"
    (tmp_path / "openai.key").write_text(key + "\n")
    settings = Settings(
        state_dir=tmp_path / "state",
        openai=OpenAISettings(api_key_env="HD_UNSET_VAR", api_key_file=Path("openai.key")),
    )
    loaded = LoadedSettings(
        settings=settings, config_path=tmp_path / "harnessd.toml", base_dir=tmp_path
    )
    provider = make_provider("openai:gpt-x", loaded, RetryPolicy())
    try:
        assert secrets.redact(f"header: Bearer {key}") == f"header: Bearer {secrets.REDACTED}"
    finally:
        await provider.aclose()


def test_missing_and_empty_key_files_are_named(tmp_path: Path) -> None:
    def settings(name: str) -> LoadedSettings:
        s = Settings(
            state_dir=tmp_path / "state",
            openai=OpenAISettings(api_key_env="HD_UNSET_VAR", api_key_file=Path(name)),
        )
        return LoadedSettings(settings=s, config_path=None, base_dir=tmp_path)

    with pytest.raises(ProviderConfigError, match=r"key file .*nope\.key does not exist"):
        make_provider("openai:gpt-x", settings("nope.key"), RetryPolicy())
    (tmp_path / "empty.key").write_text("\n")
    with pytest.raises(ProviderConfigError, match=r"empty\.key is empty"):
        make_provider("openai:gpt-x", settings("empty.key"), RetryPolicy())


def test_scripted_file_must_exist(make_settings: MakeSettings, tmp_path: Path) -> None:
    with pytest.raises(
        ProviderConfigError, match=r"scripted reply file .*missing\.toml does not exist"
    ):
        make_provider("scripted:missing.toml", make_settings(), RetryPolicy())


def test_local_model_names(make_settings: MakeSettings, tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError, match="local:smollm2-135m"):
        make_provider("local:llama-70b", make_settings(), RetryPolicy())
    s = Settings(state_dir=tmp_path, local=LocalSettings(model_path=Path("models/none.gguf")))
    loaded = LoadedSettings(settings=s, config_path=None, base_dir=tmp_path)
    with pytest.raises(ProviderConfigError, match=r"model_path .*none\.gguf is not a file"):
        make_provider("local:mine", loaded, RetryPolicy())


def test_redact_removes_every_known_key_and_ignores_short_values() -> None:
    secrets.register_secret("sk-alpha-111111111111")
    secrets.register_secret("sk-alpha-111111111111-longer")
    secrets.register_secret("none")  # a placeholder a local server accepts: not a secret
    text = "a=sk-alpha-111111111111 b=sk-alpha-111111111111-longer c=none"
    assert secrets.redact(text) == "a=[redacted] b=[redacted] c=none"


def test_configured_secrets_are_registered_even_if_unused(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET_KEY + "-unused")
    secrets.register_configured_secrets(make_settings())
    assert SECRET_KEY + "-unused" not in secrets.redact(f"x {SECRET_KEY}-unused y")


def test_redacting_filter_scrubs_records(caplog: pytest.LogCaptureFixture) -> None:
    secrets.register_secret(SECRET_KEY)
    logger = logging.getLogger("hd.test.redaction")
    logger.addFilter(secrets.RedactingFilter())
    try:
        with caplog.at_level(logging.INFO, logger="hd.test.redaction"):
            logger.info("sending key %s", SECRET_KEY)
    finally:
        logger.filters.clear()
    assert SECRET_KEY not in caplog.text
    assert "sending key [redacted]" in caplog.text
