"""Turn a hosted provider's final HTTP failure into harnessd's errors, one rule for all SDKs.

The SDKs have already retried timeouts, 408, 409, 429 and 5xx ``max_retries`` times with
backoff (honouring ``retry-after``) before anything reaches this module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from daemon.config.secrets import redact
from daemon.errors import ProviderConfigError, ProviderError, ProviderUnavailable

_DETAIL_LIMIT = 300
# A probe asks once (no SDK retries), and not for long: the caller retries with backoff.
PROBE_TIMEOUT_S = 10.0


def clean_detail(text: object) -> str:
    """A server's error text, safe to show: keys removed, whitespace folded, length capped."""
    folded = " ".join(redact(str(text)).split())
    return folded if len(folded) <= _DETAIL_LIMIT else folded[: _DETAIL_LIMIT - 3] + "..."


def unreachable_fix(ref: str, base_url: str) -> str:
    """What a person can do when ``ref``'s server does not answer."""
    return (
        f"check that the server at {base_url} is up and reachable (base_url in the settings' "
        f"provider table); harnessd retries {ref} on its own"
    )


def is_outage_status(status: int) -> bool:
    """Statuses that say "not now" (overloaded, rate-limited, failing), not "never"."""
    return status in (408, 409, 429) or status >= 500


def status_error(
    ref: str, status: int, detail: str, *, key_hint: str, retries: int, base_url: str
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
    if is_outage_status(status):
        return ProviderUnavailable(
            f"{ref}: provider unavailable after {retries} retries ({shown})",
            ref=ref,
            fix=unreachable_fix(ref, base_url),
        )
    if status in (400, 413, 422):
        return ProviderError(
            f"{ref}: the provider rejected the request ({shown})", kind="bad_request"
        )
    return ProviderError(f"{ref}: provider error ({shown})", kind="provider")


def transport_error(ref: str, detail: str, *, retries: int, base_url: str) -> ProviderError:
    """The error for a connection failure or timeout that survived every retry."""
    return ProviderUnavailable(
        f"{ref}: provider unreachable after {retries} retries ({clean_detail(detail)})",
        ref=ref,
        fix=unreachable_fix(ref, base_url),
    )


def bad_response(ref: str, what: str) -> ProviderError:
    return ProviderError(f"{ref}: unusable provider response: {what}", kind="bad_response")


@dataclass(frozen=True)
class SdkErrors:
    """An official SDK's error types (the Anthropic and OpenAI SDKs are generated from one
    template and raise the same four): an HTTP status, a connection failure (or timeout), a
    reply that failed the SDK's own validation, and their common base."""

    status: type[Exception]
    connection: type[Exception]
    validation: type[Exception]
    base: type[Exception]


def _message(exc: Exception) -> str:
    # The server's own message where the SDK extracts one (Anthropic's ``api_message``).
    return str(getattr(exc, "api_message", None) or getattr(exc, "message", exc))


@dataclass(frozen=True)
class SdkFailures:
    """How one SDK-backed provider's failures become harnessd's errors."""

    ref: str
    errors: SdkErrors
    key_hint: str  # where the key came from, named when the provider rejects it
    retries: int
    base_url: str  # without any credentials the URL may carry

    @contextmanager
    def mapped(self) -> Iterator[None]:
        """Run one request; whatever the SDK gave up on leaves as a ProviderError."""
        errors = self.errors
        try:
            yield
        except errors.status as exc:
            raise status_error(
                self.ref,
                int(getattr(exc, "status_code", 500)),
                _message(exc),
                key_hint=self.key_hint,
                retries=self.retries,
                base_url=self.base_url,
            ) from None
        except errors.connection as exc:
            raise transport_error(
                self.ref, _message(exc), retries=self.retries, base_url=self.base_url
            ) from None
        except errors.validation as exc:
            raise bad_response(self.ref, _message(exc)) from None

    async def probe(self, ask: Callable[[], Awaitable[object]]) -> None:
        """Ask once (``ask``: a model listing, no retries): any answer but 429/5xx means the
        server is back; otherwise ProviderUnavailable."""
        try:
            await ask()
        except self.errors.status as exc:
            status = int(getattr(exc, "status_code", 500))
            if is_outage_status(status):
                raise _probe_failure(self.ref, f"HTTP {status}", self.base_url) from None
        except self.errors.connection as exc:
            raise _probe_failure(self.ref, _message(exc), self.base_url) from None
        except self.errors.base:
            pass  # it answered, with something this SDK did not expect: it is there


def _probe_failure(ref: str, detail: str, base_url: str) -> ProviderUnavailable:
    return ProviderUnavailable(
        f"{ref}: provider still unavailable ({clean_detail(detail)})",
        ref=ref,
        fix=unreachable_fix(ref, base_url),
    )
