"""Errors the sandbox raises when it cannot do its job (never for a harness misbehaving).

A harness that crashes, loops or floods output is a *result* (see ``ContainerOutcome``);
these exceptions mean the machinery itself failed: no engine, no image, an engine refusal.
``sandbox`` does not import ``daemon``; the daemon maps these onto its own error root.
"""

from __future__ import annotations


class SandboxFailure(Exception):
    """Root of everything the sandbox raises on purpose. The message says what to do."""


class SandboxUnavailable(SandboxFailure):
    """No Docker engine answers, or it stopped answering mid-run."""


class ImageUnavailable(SandboxFailure):
    """The sandbox image is missing and could not be built."""


class ContainerFailure(SandboxFailure):
    """The engine refused or failed an operation on a container (not the harness's fault)."""


class GatewayUnreachable(SandboxFailure):
    """A remote unit's node could not reach the daemon's gateway, or was turned away (the
    daemon no longer wants the run: it ended, or was cancelled)."""
