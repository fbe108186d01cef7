"""Turn a hosted provider's final HTTP failure into harnessd's errors, one rule for all SDKs.

The SDKs have already retried timeouts, 408, 409, 429 and 5xx ``max_retries`` times with
backoff (honouring ``retry-after``) before anything reaches this module.
"""

from __future__ import annotations

from daemon.config.secrets import redact
from daemon.errors import ProviderConfigError, ProviderError

_DETAIL_LIMIT = 300


def clean_detail(text: object) -> str:
    """A server's error text, safe to show: keys removed, whitespace folded, length capped."""
    folded = " ".join(redact(str(text)).split())
    return folded if len(folded) <= _DETAIL_LIMIT else folded[: _DETAIL_LIMIT - 3] + "..."


def status_error(
    ref: str, status: int, detail: str, *, key_hint: str, retries: int
) -> ProviderError:
    """The error for an HTTP ``status`` the SDK gave up on."""
    shown = f"HTTP {status}: {clean_detail(detail)}"
    if status in (401, 403):
        return ProviderConfigError(
            f"{ref}: the provider rejected the API key ({shown}); check {key_hint}"
        )
    if status == 404:
        return ProviderConfigError(
            f"{ref}: the provider does not know this model or endpoint ({shown}); check the "
            "model name in the policy and the provider's base_url in the settings"
        )
    if status in (408, 409, 429) or status >= 500:
        return ProviderError(
            f"{ref}: provider unavailable after {retries} retries ({shown})",
            kind="unavailable",
            retryable=True,
        )
    if status in (400, 413, 422):
        return ProviderError(
            f"{ref}: the provider rejected the request ({shown})", kind="bad_request"
        )
    return ProviderError(f"{ref}: provider error ({shown})", kind="provider")


def transport_error(ref: str, detail: str, *, retries: int) -> ProviderError:
    """The error for a connection failure or timeout that survived every retry."""
    return ProviderError(
        f"{ref}: provider unreachable after {retries} retries ({clean_detail(detail)})",
        kind="unavailable",
        retryable=True,
    )


def bad_response(ref: str, what: str) -> ProviderError:
    return ProviderError(f"{ref}: unusable provider response: {what}", kind="bad_response")
