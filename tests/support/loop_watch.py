"""Run ``harnessd`` with asyncio's debug mode on and a slow-callback threshold, so a test can
check that nothing holds the daemon's event loop.

``python tests/support/loop_watch.py <harnessd arguments>`` runs ``daemon.cli`` as
``python -m daemon.cli`` would. Every callback or task step that keeps the loop busy longer
than ``SLOW_S`` is reported by asyncio's own debug check (``Executing <what> took N
seconds``) on stderr, marked with ``MARK``; :func:`slow_steps` reads the reports back from
the daemon's log. (A script, not a module of ``tests``: the daemon runs in a folder of its
own, where the ``tests`` package is not importable.)
"""

from __future__ import annotations

import asyncio
import logging
import re
import runpy
import sys

# Long enough that a busy two-core machine does not stretch a plain step past it, short
# enough for a blocking read of a data wheel, an SDK import or a model file's header.
SLOW_S = 0.25
MARK = "[loop-watch] "


class _DebugLoopPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        loop.set_debug(True)  # anyio.run leaves it alone (its ``debug`` option is unset)
        loop.slow_callback_duration = SLOW_S
        return loop


# What names harnessd's own code in a report: a task anyio started for one of its functions
# (named by the function's module and qualified name) or a callback in one of its files.
_OURS = re.compile(r"name='(daemon|sandbox)\.|/(daemon|sandbox)/")


def slow_steps(log_text: str) -> list[str]:
    """The slow-step reports in a daemon's log that name harnessd's own code."""
    return [
        line.removeprefix(MARK)
        for line in log_text.splitlines()
        if line.startswith(MARK) and "Executing" in line and _OURS.search(line)
    ]


def main() -> None:
    asyncio.set_event_loop_policy(_DebugLoopPolicy())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(MARK + "%(message)s"))
    watch = logging.getLogger("asyncio")
    watch.addHandler(handler)
    watch.setLevel(logging.WARNING)
    watch.propagate = False
    sys.argv = ["harnessd", *sys.argv[1:]]
    runpy.run_module("daemon.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
