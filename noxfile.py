"""nox sessions: lint, typecheck, tests (the whole suite, real Docker and the real model, on
two workers), and fast (the unit tests alone: no Docker, no daemon, no model; the inner
loop, about two CPU-minutes).

They run in the environment nox itself runs in (the project's ``.venv`` made by
``scripts/setup``), not in fresh per-session virtualenvs: llama-cpp-python compiles from
source for minutes, and a second copy would test a different install than the daemon uses.
"""

from __future__ import annotations

import sys

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PY = sys.executable

# Two pytest-xdist workers, one per core. The suite spends most of its time waiting (a
# container starting, a daemon coming up, the model's server answering a test on the other
# side of a socket): run one at a time it used about a quarter of the machine's two cores.
# A file's tests stay on one worker (--dist loadfile), so module fixtures (a shared daemon,
# a Ray cluster) start once. Everything a test starts is its own (free ports, temp dirs, a
# container label per instance), so two files never share a resource. `-n 0` in the
# session's arguments runs everything in one process again.
WORKERS = ("-n", "2", "--dist", "loadfile")


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    session.run(PY, "-m", "ruff", "check", ".")
    session.run(PY, "-m", "ruff", "format", "--check", ".")


@nox.session(venv_backend="none")
def typecheck(session: nox.Session) -> None:
    session.run(PY, "-m", "mypy")


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    session.run(PY, "-m", "pytest", *WORKERS, *session.posargs)


@nox.session(venv_backend="none")
def fast(session: nox.Session) -> None:
    """Unit tests only: gates, stats, patches, config, suites' checkers, ledger, providers
    against local fakes. A test marked ``unit`` that touches Docker, starts a daemon or loads
    the model fails, and so does a test with no marker (tests/conftest.py)."""
    marks = "unit and not docker and not model"
    session.run(PY, "-m", "pytest", *WORKERS, "-m", marks, "-q", *session.posargs)
