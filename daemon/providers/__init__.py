"""Model providers behind one contract (:mod:`daemon.providers.base`), chosen by a model string.

=====================  ==========================================================
``anthropic:<model>``  Anthropic Messages API (key: ``[anthropic]`` settings)
``openai:<model>``     OpenAI Chat Completions or any compatible server (``[openai]``)
``local:<name>``       llama.cpp in-process; ``local:smollm2-135m`` is the embedded model
``scripted:<path>``    replies written in a TOML file; tests and demos only
=====================  ==========================================================

:func:`make_provider` builds one; callers cache providers per model string and close them
with ``aclose()``.

Owns: the provider-neutral chat contract (``base``: messages, requests, replies, usage),
the Anthropic Messages (``anthropic_messages``), OpenAI-compatible (``openai_chat``),
embedded llama.cpp (``local_llama``; its reply grammars, and the sampler that checks each
token against them, in ``local_grammar``) and scripted (``scripted``) providers, and the
mapping of HTTP failures to provider errors (``http_errors``).

May import: config (settings, retry policy, secrets and their redaction, pinned assets for
the embedded model) and errors. Never gateway or anything above: budgets and metering wrap
a provider from outside (``daemon.gateway.metering``).
"""

from __future__ import annotations

from pathlib import Path

import anyio

from daemon.config.policy import PROVIDERS, RetryPolicy
from daemon.config.secrets import read_api_key
from daemon.config.settings import KeyedProvider, LoadedSettings
from daemon.errors import ProviderConfigError
from daemon.providers.base import Provider

__all__ = ["Provider", "make_provider", "split_ref"]


def split_ref(ref: str) -> tuple[str, str]:
    """``"provider:model"`` as its two parts, or ProviderConfigError saying what is expected."""
    provider, sep, name = ref.partition(":")
    if not sep or not name or provider not in PROVIDERS:
        raise ProviderConfigError(
            f"model {ref!r}: expected 'provider:model' with provider one of "
            f"{', '.join(PROVIDERS)} (e.g. 'local:smollm2-135m', 'openai:gpt-4o-mini')"
        )
    return provider, name


def _key_hint(section: str, keyed: KeyedProvider, settings: LoadedSettings) -> str:
    if keyed.api_key_file is not None:
        return f"the key file {settings.resolve(keyed.api_key_file)} ({section}.api_key_file)"
    return f"the key in ${keyed.api_key_env} ({section}.api_key_env)"


def make_provider(ref: str, settings: LoadedSettings, retry: RetryPolicy) -> Provider:
    """The provider for model string ``ref``; ProviderConfigError when it cannot be made."""
    kind, name = split_ref(ref)
    s = settings.settings
    # Imported on demand: each SDK takes a noticeable time to import, and most daemons
    # use one or two providers.
    if kind == "anthropic":
        from daemon.providers.anthropic_messages import AnthropicProvider

        return AnthropicProvider(
            ref,
            name,
            api_key=read_api_key("anthropic", s.anthropic, settings, ref),
            key_hint=_key_hint("anthropic", s.anthropic, settings),
            base_url=s.anthropic.base_url,
            retry=retry,
        )
    if kind == "openai":
        from daemon.providers.openai_chat import OpenAIProvider

        return OpenAIProvider(
            ref,
            name,
            api_key=read_api_key("openai", s.openai, settings, ref),
            key_hint=_key_hint("openai", s.openai, settings),
            base_url=s.openai.base_url,
            retry=retry,
            structured_output=s.openai.structured_output,
        )
    if kind == "local":
        from daemon.providers.local_llama import LocalProvider, local_model_path

        return LocalProvider(ref, local_model_path(ref, name, settings), settings)
    from daemon.providers.scripted import ScriptedProvider

    path = settings.resolve(Path(name))
    if not path.is_file():
        raise ProviderConfigError(
            f"{ref}: scripted reply file {path} does not exist (relative paths resolve "
            f"against {settings.base_dir})"
        )
    return ScriptedProvider(ref, path)


async def check_models(refs: list[str], settings: LoadedSettings, retry: RetryPolicy) -> None:
    """Make (and close) each model's provider, so a missing key, file or unknown provider
    stops start-up or a policy reload with its message, not a cycle hours later."""
    for ref in dict.fromkeys(refs):
        # In a worker thread: a provider may import its SDK, read a key file or a model's
        # header.
        provider = await anyio.to_thread.run_sync(make_provider, ref, settings, retry)
        await provider.aclose()
