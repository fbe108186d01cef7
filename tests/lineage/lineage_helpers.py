"""Helpers for the lineage tests: seed trees, candidates, and the consistency invariants."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from daemon.lineage import CandidateSource, Lineage, NewCandidate
from daemon.lineage.fs import TMP_MARK, tree_hash
from daemon.lineage.git import VERSION_TRAILER, GitHistory
from daemon.patches import apply_proposal, parse_proposal
from daemon.patches.model import Proposal
from daemon.store import Store

SEED_HARNESS = '''\
"""Seed harness for the lineage tests."""

from helpers.util import clamp

VERSION_MARK = 0


def solve(task, ctx):
    return {"output": clamp(VERSION_MARK), "claimed_success": True}
'''

SEED_UTIL = "def clamp(value):\n    return max(0, min(10, value))\n"
_MARK_RE = re.compile(r"^VERSION_MARK = (\d+)$", re.MULTILINE)


def write_seed(root: Path) -> Path:
    (root / "helpers").mkdir(parents=True)
    (root / "harness.py").write_text(SEED_HARNESS)
    (root / "helpers" / "util.py").write_text(SEED_UTIL)
    return root


def make_candidate(lineage: Lineage, work: Path, *, evaluating: bool = True) -> tuple[int, Path]:
    """A real candidate from the live version: bump VERSION_MARK through the patch pipeline."""
    parent = lineage.current()
    source = (lineage.path(parent) / "harness.py").read_text()
    match = _MARK_RE.search(source)
    assert match is not None
    mark = int(match[1])
    text = (
        f"Rationale: bump the mark to {mark + 1}.\n\nharness.py\n<<<<<<< SEARCH\n"
        f"VERSION_MARK = {mark}\n=======\nVERSION_MARK = {mark + 1}\n>>>>>>> REPLACE\n"
    )
    proposal = parse_proposal(text)
    assert isinstance(proposal, Proposal)
    tree = Path(tempfile.mkdtemp(prefix="cand-", dir=work))
    applied = apply_proposal(lineage.path(parent), proposal, tree)
    cid = lineage.add_candidate(
        NewCandidate(
            parent_id=parent.id,
            source=CandidateSource.PROPOSER,
            proposer_model="local:test-model",
            rationale=proposal.rationale,
            patch=applied.git_diff,
            raw=text,
        )
    )
    if evaluating:
        lineage.set_candidate(cid, "evaluating", "heldout")
    return cid, tree


def git_files(root: Path, commit: str) -> dict[str, str]:
    """``{path: blob id}`` of a commit, read by git itself."""
    out = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--full-tree", commit],
        env={"GIT_DIR": str(root / ".git"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        capture_output=True,
        check=True,
    ).stdout.decode()
    files = {}
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        files[path] = meta.split()[2]
    return files


def blob_ids(tree: Path) -> dict[str, str]:
    """The blob ids git would give the files of ``tree``."""
    ids = {}
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        data = path.read_bytes()
        ids[path.relative_to(tree).as_posix()] = hashlib.sha1(
            b"blob %d\0" % len(data) + data, usedforsecurity=False
        ).hexdigest()
    return ids


def assert_consistent(store: Store, root: Path) -> None:
    """Every invariant a restart must restore: files, git and SQLite tell one story."""
    lineage = Lineage(store, root)
    versions = lineage.versions()
    history = lineage.history()
    versions_dir = root / "versions"
    leftovers = [p.name for d in (root, versions_dir) for p in d.iterdir() if TMP_MARK in p.name]
    assert not leftovers, f"temporary leftovers: {leftovers}"
    assert sorted(p.name for p in versions_dir.iterdir()) == [v.name for v in versions]
    for version in versions:
        assert tree_hash(versions_dir / version.name) == version.tree_hash, version.name
    link = root / "current"
    if not history:
        assert not link.is_symlink() and not link.exists()
        return
    live = lineage.get(history[-1].version_name)
    assert os.readlink(link) == f"versions/{live.name}"
    if live.candidate_id is not None:
        assert lineage.candidate(live.candidate_id).state == "accepted"
    commits = list(reversed(GitHistory(root).log()))
    assert [c.pointer_id for c in commits] == [h.id for h in history]
    first_commit: dict[int, str] = {}
    for commit, change in zip(commits, history, strict=True):
        assert commit.trailers[VERSION_TRAILER] == change.version_name
        first_commit.setdefault(change.version_id, commit.sha)
        assert git_files(root, commit.sha) == blob_ids(versions_dir / change.version_name)
    for version in versions:
        assert version.git_commit == first_commit[version.id]
    assert not lineage.candidates(state="evaluating")
    accepted = {c.id for c in lineage.candidates(state="accepted")}
    assert accepted == {v.candidate_id for v in versions if v.candidate_id is not None}
    assert not list((root / ".git").rglob("*.lock"))


# The first release's ``versions`` table and ``candidates`` columns: what an older state
# database starts from in the migration tests.
FIRST_VERSIONS_TABLE = (
    "CREATE TABLE versions (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, parent_id "
    "INTEGER, candidate_id INTEGER, created REAL NOT NULL, tree_hash TEXT NOT NULL, "
    "git_commit TEXT, message TEXT NOT NULL);"
)
FIRST_CANDIDATE_COLUMNS = (
    "id INTEGER PRIMARY KEY, parent_version_id INTEGER NOT NULL, created REAL NOT NULL, "
    "updated REAL NOT NULL, source TEXT NOT NULL, proposer_model TEXT, rationale TEXT NOT "
    "NULL, patch TEXT NOT NULL, raw TEXT NOT NULL, state TEXT NOT NULL, stage TEXT NOT NULL, "
    "verdict TEXT"
)
