"""One exception root for everything harnessd raises on purpose.

Errors a user can cause carry a message that names the file, key or value and what to do;
the CLI prints that message as one line and exits with the error's ``exit_code``.
"""

from __future__ import annotations

from collections.abc import Iterator


class HarnessdError(Exception):
    """Root of every deliberate harnessd error."""

    exit_code = 1


class ConfigError(HarnessdError):
    """A config or policy file (or environment override) is invalid. Nothing was started."""

    exit_code = 2


class SetupError(HarnessdError):
    """The machine is missing something harnessd needs (engine, image, model, data)."""

    exit_code = 3


class AssetError(SetupError):
    """A pinned registry package could not be fetched or failed its hash check."""


class ProviderError(HarnessdError):
    """A model provider failed in a way retries did not fix."""

    def __init__(self, message: str, *, kind: str = "provider", retryable: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class Unavailable(HarnessdError):
    """A dependency the work needs (the Docker engine, a model provider) is down.

    The work was not done, not done wrong: it can be done again once the dependency is
    back. ``dependency`` is ``"engine"`` or the model string; ``fix`` says what a person
    can do about it.
    """

    dependency: str = ""
    fix: str = ""


class ProviderUnavailable(ProviderError, Unavailable):
    """A model provider cannot be reached, or keeps answering 429/5xx after the retries."""

    def __init__(self, message: str, *, ref: str, fix: str = "") -> None:
        ProviderError.__init__(self, message, kind="unavailable", retryable=True)
        self.dependency = ref
        self.fix = fix or f"check that the server behind {ref} is up and reachable"


class ProviderConfigError(ProviderError, ConfigError):
    """A provider is misconfigured: unknown provider, missing key, bad model string."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        ProviderError.__init__(self, message, kind="config", retryable=False)


class BudgetExceeded(HarnessdError):
    """A token budget refuses the call; ``scope``: task, eval, hour, day or proposer."""

    def __init__(self, scope: str, spent: int, limit: int) -> None:
        super().__init__(f"token budget '{scope}' spent: {spent} of {limit} tokens")
        self.scope = scope
        self.spent = spent
        self.limit = limit


class SandboxError(HarnessdError):
    """The sandbox could not run at all (engine gone, image missing), not a harness failure."""


class EngineUnavailable(SandboxError, Unavailable):
    """The Docker engine does not answer (stopped, restarting, socket gone)."""

    dependency = "engine"

    def __init__(self, message: str, *, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


class LineageError(HarnessdError):
    """A lineage operation is impossible (e.g. rollback to the version already live)."""


class UnknownRef(LineageError):
    """No version or candidate answers to the name, id or commit given."""


class NotAwaitingReview(LineageError):
    """A review decision for a candidate that does not await review, or another way of
    deciding one that does (only ``harnessctl approve`` / ``reject`` decide those)."""


class StaleParent(LineageError):
    """A candidate's parent is no longer the live version: its evidence (held-out tests
    against that parent) says nothing about the version live now."""

    def __init__(self, message: str, *, candidate_id: int, parent: str, live: str) -> None:
        super().__init__(message)
        self.candidate_id = candidate_id
        self.parent = parent
        self.live = live


class DaemonNotRunning(HarnessdError):
    """The control socket does not answer."""

    exit_code = 3


class BadRequest(HarnessdError):
    """A request names something in the wrong form (e.g. a task reference without a suite)."""


class NotAccepting(HarnessdError):
    """The daemon is stopping and takes no new requests."""


class ClusterUnavailable(SandboxError, Unavailable):
    """The Ray cluster cannot run units: its head is gone, or no node offers sandbox
    capacity, or a unit was lost twice. Work is not done wrong, only not done."""

    dependency = "cluster"

    def __init__(self, message: str, *, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix or (
            "check that the Ray cluster at the configured address ([executor] address or "
            "RAY_ADDRESS) is up and that its worker nodes were started with "
            "--resources='{\"harnessd_sandbox\": N}'"
        )


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside ``exc``, exception groups (task groups) opened at any depth."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc


def first_outage(exc: BaseException) -> Unavailable | None:
    """The first :class:`Unavailable` in ``exc`` (itself or inside a group), if any."""
    return next((e for e in leaves(exc) if isinstance(e, Unavailable)), None)
