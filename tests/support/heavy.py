"""The refusal of heavy resources (a daemon, a Docker engine, a Ray cluster, the model's
server) while a test marked ``unit`` runs.

tests/conftest.py sets the refusal for the duration of each ``unit`` test; the helpers that
start those resources (tests/daemon_process.py, tests/engine_process.py,
tests/llama_server.py, tests/cluster/ray_cluster.py) call :func:`refuse_in_unit_tests` first,
so a test that starts one through them fails with what marker to add instead of running the
resource under the fast session's name.
"""

from __future__ import annotations

_refusal: str | None = None  # the message while a unit test runs, None otherwise


def refusing(message: str | None) -> None:
    """Set (a message) or clear (None) the refusal; only tests/conftest.py calls this."""
    global _refusal
    _refusal = message


def refuse_in_unit_tests(what: str) -> None:
    """Raise if a test marked ``unit`` is running: it is about to start ``what``."""
    if _refusal is not None:
        raise AssertionError(f"a test marked 'unit' tried to start {what}: {_refusal}")
