"""What people see from harnessctl: a readable view for every verb (``--json`` gives the
data), diffs shown as diffs, the deciding gates on verdict events, outages in status."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from rich.console import Console

from daemon.control.verbs import VERBS

pytestmark = pytest.mark.unit

DIFF = (
    "diff --git a/harness.py b/harness.py\n--- a/harness.py\n+++ b/harness.py\n"
    '@@ -1,2 +1,3 @@\n def solve(task, ctx):\n+    state.messages.insert(0, {"role": "system"})\n'
)


def _shown(view: str, result: Any) -> str:
    """The view as a person reads it (line wrapping aside)."""
    out = io.StringIO()
    VERBS[view].view(result, Console(file=out, width=300, color_system=None))
    return out.getvalue()


def test_a_proposed_patch_is_shown_as_a_diff_not_as_escaped_json() -> None:
    for result in (
        {"dry_run": True, "valid": True, "against": "v0001", "diff": DIFF},
        {"candidate": 7, "queued": True, "paused": True, "diff": DIFF},
    ):
        text = _shown("propose", result)
        assert '+    state.messages.insert(0, {"role": "system"})' in text
        assert "\\n" not in text and '"diff"' not in text
    assert "dry run: nothing recorded" in _shown("propose", {"dry_run": True, "diff": DIFF})
    queued = _shown("propose", {"candidate": 7, "paused": True, "diff": DIFF})
    assert "c7" in queued and "harnessctl resume" in queued


def test_verdict_events_name_the_gates_that_decided() -> None:
    gates = [{"gate": "accuracy", "passed": False, "measured": 0.21, "threshold": 0.05}]
    rejected = {
        "id": 3,
        "ts": time.time(),
        "kind": "candidate.rejected",
        "level": "info",
        "message": "candidate c4 rejected at heldout: accuracy: measured 0.21 vs threshold 0.05",
        "data": {"candidate": 4, "stage": "heldout", "failed": ["accuracy"], "gates": gates},
    }
    line = _shown("events", [rejected])
    assert "[decided by: accuracy 0.21 vs 0.05]" in line
    promoted = dict(rejected, kind="version.promoted", data={"gates": gates})
    assert "gates passed: accuracy 0.21 vs 0.05" in _shown("events", [promoted])


def test_status_shows_an_outage_with_its_fix_and_the_calls_under_way() -> None:
    now = time.time()
    status = {
        "pid": 1,
        "uptime_s": 3.0,
        "state_dir": "/s",
        "activity": "waiting: ...",
        "progress": [],
        "paused": False,
        "budgets": [],
        "outages": [
            {
                "dependency": "engine",
                "what": "the Docker engine",
                "since": now,
                "probes": 2,
                "next_probe_at": now + 8,
                "error": "socket gone",
                "fix": "start it",
            }
        ],
        "model_calls": {"local:smollm2-135m": {"calls": 1, "tokens_so_far": 352}},
    }
    text = _shown("status", status)
    assert "OUTAGE the Docker engine unavailable" in text and "fix: start it" in text
    assert "local:smollm2-135m (1 call(s), 352 tokens so far)" in text
    assert "endpoint" not in text  # off: not mentioned
    status["endpoint"] = {"url": "http://127.0.0.1:8642/v1", "unix_socket": "/s/ep.sock"}
    text = _shown("status", status)
    assert "OpenAI-compatible endpoint: http://127.0.0.1:8642/v1 and /s/ep.sock" in text
    assert "metrics" not in text  # off: not mentioned
    status["metrics"] = {"url": "http://127.0.0.1:8643"}
    assert "metrics: http://127.0.0.1:8643/metrics" in _shown("status", status)


def test_policy_show_reads_as_toml_and_the_small_verbs_say_what_happened() -> None:
    policy = {"models": {"primary": "local:smollm2-135m", "panel": []}, "loop": {"enabled": True}}
    text = _shown("policy_show", {"path": "/p/default.toml", "policy": policy})
    assert "[models]" in text and 'primary = "local:smollm2-135m"' in text
    assert "enabled = true" in text
    assert "v0001 is live" in _shown("rollback", {"live": "v0001"})
    assert "paused" in _shown("pause", {"paused": True})
    assert "running" in _shown("resume", {"paused": False})
    assert "valid" in _shown("policy_check", {"name": "p.toml", "valid": True})
    assert "(pid 9) stopped" in _shown("stop", {"stopping": True, "pid": 9, "stopped": True})


def test_lineage_shows_what_each_candidate_is_tested_on_and_built_on() -> None:
    cand = {"state": "rejected", "stage": "heldout", "source": "proposer", "rationale": "r"}
    text = _shown(
        "lineage",
        {
            "current": "v0001",
            "versions": [{"name": "v0001", "created": time.time(), "message": "seed"}],
            "candidates": [
                cand | {"id": 5, "parent": "v0001", "base": None},
                cand | {"id": 6, "parent": "v0001", "base": "c5"},
            ],
        },
    )
    assert "tested on" in text and "built on" in text
    cells = {}
    for line in text.splitlines():
        row = [c.strip() for c in line.replace("┃", "│").split("│") if c.strip()]
        if row and row[0] in ("c5", "c6"):
            cells[row[0]] = row[1:3]
    assert cells == {"c5": ["v0001", "v0001"], "c6": ["v0001", "c5"]}, text
