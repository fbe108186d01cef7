"""``harnessctl stop`` during a local model call: the daemon is gone within 5 s, and the
tokens the model spent on the cut-off call are still charged.

A time bound is asserted here, against the rule of no timed assertions, because the bound
is the behaviour: a person's stop (or a service manager's SIGTERM) must not wait for a
llama.cpp call to finish. Measured on a busy 2-core machine (stop request to exit) before
the fix: 25.6 s during a live ``ask``, 127 s during a proposer call reading a long prompt
(prompt processing could not be interrupted, and the stop drained requests for up to
300 s); after: 1.7-2.8 s at a load average of 10-12. The daemon no longer waits on the
model at all past 0.5 s, so a failure means the stop path waits on it again.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.control.protocol import ControlError
from tests.daemon_process import ROOT, RunningDaemon, ctl, start_daemon
from tests.improve.scripted_world import proposer_policy
from tests.support.wait import wait_for_daemon

pytestmark = [pytest.mark.docker, pytest.mark.model, pytest.mark.slow]

LOCAL = "local:smollm2-135m"
STOP_BOUND_S = 5.0


def _wait_for_call(daemon: RunningDaemon, *, tokens: int) -> dict[str, Any]:
    """Until ``status`` shows a local call under way that has read ``tokens`` tokens."""

    def probe() -> dict[str, Any] | None:
        with daemon.client() as c:
            status = c.call("status")
        call = (status.get("model_calls") or {}).get(LOCAL)
        return dict(call) if call and call["tokens_so_far"] >= tokens else None

    return wait_for_daemon(
        daemon, probe, timeout=240, what="a local model call under way", interval=0.2
    )


def _stop_and_time(daemon: RunningDaemon, how: str = "harnessctl") -> float:
    """Seconds from the daemon taking the stop request (its ``daemon.stopping`` event) until
    its process is gone. Counted from there, not from spawning ``harnessctl``: on a machine
    this busy, starting a Python process alone can take seconds, and that is not the
    daemon's doing. (``harnessctl stop`` must return, and say so, all the same.)"""
    if how == "SIGTERM":
        daemon.proc.send_signal(signal.SIGTERM)
    else:
        r = ctl(daemon, "stop")
        assert r.returncode == 0 and "stopped" in r.stdout, (r.stdout, r.stderr)
    assert daemon.proc.wait(60) == 0
    gone = time.time()
    db = sqlite3.connect(daemon.state_dir / "state.db")
    [(asked,)] = db.execute("SELECT ts FROM events WHERE kind = 'daemon.stopping'").fetchall()
    db.close()
    return gone - float(asked)


def _ledger(daemon: RunningDaemon, purpose: str) -> list[tuple[str, int, int]]:
    db = sqlite3.connect(daemon.state_dir / "state.db")
    rows = db.execute(
        "SELECT run_id, prompt_tokens, completion_tokens FROM ledger WHERE purpose = ?",
        (purpose,),
    ).fetchall()
    db.close()
    return [(str(r), int(p), int(c)) for r, p, c in rows]


@pytest.mark.parametrize("how", ["harnessctl", "SIGTERM"])
def test_stop_during_a_live_ask_on_the_local_model(
    tmp_path: Path, asset_cache: Path, how: str
) -> None:
    policy = f'[models]\nprimary = "{LOCAL}"\n[loop]\nenabled = false\n'
    daemon = start_daemon(tmp_path, asset_cache, policy)
    replies: list[BaseException | dict[str, Any]] = []

    def ask() -> None:
        try:
            with daemon.client(timeout=None) as c:
                replies.append(c.call("ask", text="Tell me a long story about a lighthouse."))
        except BaseException as exc:
            replies.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        _wait_for_call(daemon, tokens=1)
        took = _stop_and_time(daemon, how)
    finally:
        if daemon.proc.poll() is None:
            daemon.proc.kill()
        asker.join(60)
    assert took < STOP_BOUND_S, f"stop took {took:.1f} s"
    # The caller is told its request was cut off, rather than left hanging or dropped.
    assert len(replies) == 1 and isinstance(replies[0], ControlError), replies
    assert "stopped before this request finished" in str(replies[0])
    charged = [row for row in _ledger(daemon, "solve") if row[0].startswith("live-")]
    assert charged and all(p > 0 for _, p, _ in charged), charged


def _long_seed(tmp_path: Path) -> Path:
    """The minimal seed plus a module with a long docstring: a proposer prompt of ~3000
    tokens, which takes the local model well over a minute to read on a busy machine."""
    seed = tmp_path / "seed"
    shutil.copytree(ROOT / "seeds" / "minimal", seed)
    words = " ".join(f"note{i}" for i in range(150))
    (seed / "notes.py").write_text(f'"""Notes.\n\n{words}\n"""\n')
    return seed


def test_stop_while_the_local_proposer_reads_a_long_prompt(
    tmp_path: Path, asset_cache: Path
) -> None:
    policy = proposer_policy(tmp_path, asset_cache, LOCAL)
    daemon = start_daemon(tmp_path, asset_cache, policy, seed=_long_seed(tmp_path))
    try:
        seen = _wait_for_call(daemon, tokens=64)  # the prompt is being read
        took = _stop_and_time(daemon)
    finally:
        if daemon.proc.poll() is None:
            daemon.proc.kill()
    assert took < STOP_BOUND_S, f"stop took {took:.1f} s"
    # Cut off while reading the prompt: charged what it read, nothing written, no candidate.
    [(_, prompt_tokens, completion_tokens)] = _ledger(daemon, "propose")
    assert prompt_tokens >= seen["tokens_so_far"] and completion_tokens == 0
    assert prompt_tokens < 2000, "the stop came after the prompt was read; make it longer"
    db = sqlite3.connect(daemon.state_dir / "state.db")
    assert db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0] == 0
    assert "Traceback" not in daemon.log.read_text()
