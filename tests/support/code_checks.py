"""A code checker for suites whose rules must never need one."""

from __future__ import annotations

from daemon.suites.base import CheckVerdict, CodeCheck


class NoCodeChecks:
    """Host rules never reach a code check; a test fails if one does."""

    async def check_code(self, check: CodeCheck) -> CheckVerdict:
        raise AssertionError("a host rule asked for a code check")
