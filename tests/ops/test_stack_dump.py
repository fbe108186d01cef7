"""``kill -USR1`` on a harnessd process prints where every thread is, and nothing else."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

PROGRAM = """
import os, signal, threading, time
from daemon.cli import stacks_on_sigusr1

stacks_on_sigusr1()
waiting = threading.Event()
worker = threading.Thread(target=waiting.wait, name="blocked-worker", daemon=True)
worker.start()
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.2)
print("still running")
"""


def test_sigusr1_prints_every_threads_stack_and_the_process_goes_on() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "still running"
    assert "Current thread" in done.stderr
    assert done.stderr.lower().count("thread 0x") >= 2, done.stderr  # the worker too
    assert "in wait" in done.stderr
