"""Fixtures for the improvement tests: the in-process runtime of the evaluation tests."""

from tests.evaluation.conftest import runtime_factory

__all__ = ["runtime_factory"]
