"""What a consistent lineage looks like from outside a running daemon (crash and outage tests)."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from tests.daemon_process import RunningDaemon


def check_consistent(daemon: RunningDaemon, harnesses: Path, since: float) -> None:
    """``current`` names a complete accepted version, git and SQLite agree, and no candidate
    is still "evaluating" from before ``since`` (a killed or interrupted evaluation)."""
    with daemon.client() as c:
        lineage = c.call("lineage", candidates=200)
    db = sqlite3.connect(daemon.state_dir / "state.db")
    pointer = db.execute(
        "SELECT v.name FROM pointer p JOIN versions v ON v.id = p.version_id ORDER BY p.id DESC"
    ).fetchone()[0]
    assert lineage["current"] == pointer
    current = harnesses / "current"
    assert current.is_symlink() and current.resolve() == (harnesses / "versions" / pointer)
    names = [r[0] for r in db.execute("SELECT name FROM versions ORDER BY id")]
    on_disk = sorted(p.name for p in (harnesses / "versions").iterdir())
    assert on_disk == names, (on_disk, names)
    for name in names:
        assert (harnesses / "versions" / name / "harness.py").is_file()
    pointers = db.execute("SELECT COUNT(*) FROM pointer").fetchone()[0]
    commits = subprocess.run(
        ["git", "--git-dir", str(harnesses / ".git"), "rev-list", "--count", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert int(commits) == pointers
    stale = db.execute(
        "SELECT id FROM candidates WHERE state = 'evaluating' AND updated < ?", (since,)
    ).fetchall()
    assert not stale, f"candidates still evaluating from before {since}: {stale}"
