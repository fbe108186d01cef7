"""Cluster tests reuse the sandbox tests' real image, engine and clean-up checks."""

from tests.sandbox.conftest import image, runs_dir, sandbox

__all__ = ["image", "runs_dir", "sandbox"]
