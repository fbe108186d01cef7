"""Constants and types shared by the provider tests (imported by the tests and conftest)."""

from __future__ import annotations

from collections.abc import Callable

from daemon.config.settings import LoadedSettings

KEY_ENV = "HD_PROVIDER_TEST_KEY"
# Shaped like a real key, so a leak would be recognisable in any output.
SECRET_KEY = "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZyXwVuTs"

MakeSettings = Callable[..., LoadedSettings]
