"""Bring the lineage's files and git history back in line with SQLite after a crash.

SQLite is the truth: a version exists if its row does, the live version is the last pointer
row. Every repair here is idempotent, and the normal promotion path reuses :meth:`sync_git`
for its own git commit, so "finish a promotion" and "repair a crash" are the same code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import LineageError
from daemon.lineage import candidates, versions
from daemon.lineage.fs import TMP_MARK, StepHook, leftovers, point_symlink, remove_tree, tree_hash
from daemon.lineage.fs import write_version_dir as _write_version_dir
from daemon.lineage.git import VERSION_TRAILER, GitHistory
from daemon.lineage.records import PointerChange, Version, commit_message
from daemon.patches.tree import TreeError
from daemon.store import Store

_NAME_RE = re.compile(r"^v\d+$")


@dataclass(frozen=True)
class LineagePaths:
    """Where a lineage keeps its files under ``root`` (the ``harnesses/`` folder)."""

    root: Path

    @property
    def versions_dir(self) -> Path:
        return self.root / "versions"

    @property
    def current_link(self) -> Path:
        return self.root / "current"

    def of(self, version: Version) -> Path:
        return self.versions_dir / version.name


class Reconciler:
    """Repairs given only what they repair: the state, the files, git, and the fault hook."""

    def __init__(self, store: Store, paths: LineagePaths, git: GitHistory, step: StepHook) -> None:
        self.store = store
        self.paths = paths
        self.git = git
        self.step = step

    def commit_message(self, change: PointerChange) -> str:
        version = versions.get(self.store, change.version_id)
        assert version is not None  # a pointer row always names a version
        return commit_message(change, version, versions.name_before(self.store, change.id))

    def run(self) -> list[str]:
        notes = self._clear_leftovers()
        notes += self._remove_unrecorded()
        notes += self._restore_versions()
        notes += self.sync_git()
        notes += self.fix_current()
        notes += self._interrupt_evaluating()
        return notes

    def _clear_leftovers(self) -> list[str]:
        notes = []
        stale = self.git.clear_stale_state()
        if stale:
            notes.append(f"removed git state a killed process left behind: {', '.join(stale)}")
        paths = self.paths
        for path in leftovers(paths.versions_dir) + leftovers(paths.root):
            remove_tree(path)
            notes.append(f"removed the unfinished temporary {path.relative_to(paths.root)}")
        return notes

    def _remove_unrecorded(self) -> list[str]:
        recorded = {v.name for v in versions.all_versions(self.store)}
        notes = []
        for path in sorted(self.paths.versions_dir.iterdir()):
            if _NAME_RE.match(path.name) and path.name not in recorded:
                remove_tree(path)
                notes.append(
                    f"removed versions/{path.name}: its promotion stopped before it was recorded"
                )
        return notes

    def _intact(self, version: Version) -> bool:
        path = self.paths.of(version)
        try:
            return path.is_dir() and tree_hash(path) == version.tree_hash
        except (TreeError, OSError):
            return False

    def _restore_versions(self) -> list[str]:
        notes = []
        for version in versions.all_versions(self.store):
            if self._intact(version):
                continue
            commit = version.git_commit or next(
                (c.sha for c in self.git.log() if c.trailers.get(VERSION_TRAILER) == version.name),
                None,
            )
            if commit is None:
                raise LineageError(
                    f"{self.paths.of(version)} is missing or damaged and git holds no copy; "
                    "restore the harnesses folder from a backup"
                )
            self._restore(version, commit)
            notes.append(f"restored versions/{version.name} from git commit {commit[:12]}")
        return notes

    def _restore(self, version: Version, commit: str) -> None:
        export = self.paths.versions_dir / f"{TMP_MARK}export-{version.name}"
        remove_tree(export)
        export.mkdir()
        try:
            self.git.export(commit, export)
            if tree_hash(export) != version.tree_hash:
                raise LineageError(
                    f"git commit {commit[:12]} does not hold {version.name} as recorded; "
                    "restore the harnesses folder from a backup"
                )
            remove_tree(self.paths.of(version))
            _write_version_dir(export, self.paths.of(version), self.step)
        finally:
            remove_tree(export)

    def sync_git(self) -> list[str]:
        """Write the commits SQLite's pointer rows call for and git lacks, oldest first."""
        changes = versions.history(self.store)
        if not changes:
            return []
        notes = []
        log = self.git.log()
        newest = max(changes[-1].id, 0)
        if log and (log[0].pointer_id or 0) > newest:
            # SQLite lost its last transactions (power loss): git must not claim more.
            keep = next((c for c in log if (c.pointer_id or 0) <= newest), None)
            self.git.move_branch(keep.sha if keep else None, log[0].sha)
            notes.append(
                f"moved the git branch back to {keep.sha[:12] if keep else 'nothing'}: it had "
                "commits SQLite never recorded"
            )
            log = self.git.log()
        known = {c.pointer_id: c.sha for c in log if c.pointer_id is not None}
        head = self.git.head()
        for change in changes:
            if change.id in known:
                continue
            sha = self.git.commit_tree(
                self.paths.versions_dir / change.version_name,
                self.commit_message(change),
                head,
                change.ts,
            )
            self.step("git:commit_created")
            self.git.move_branch(sha, head)
            self.step("git:ref_updated")
            known[change.id] = head = sha
            what = "rollback to" if change.is_rollback else "promotion of"
            notes.append(f"wrote the missing git commit for the {what} {change.version_name}")
        first_change: dict[int, int] = {}
        for change in reversed(changes):
            first_change[change.version_id] = change.id
        for version in versions.all_versions(self.store):
            recorded = known.get(first_change.get(version.id, -1))
            if version.git_commit is None and recorded is not None:
                versions.record_git_commit(self.store, version.id, recorded)
                self.step("git:recorded")
        return notes

    def fix_current(self) -> list[str]:
        link = self.paths.current_link
        live_version = versions.current(self.store)
        if live_version is None:
            if link.is_symlink() or link.exists():
                remove_tree(link)
                return ["removed 'current': no version is recorded yet"]
            return []
        live = live_version.name
        before = str(link.readlink()) if link.is_symlink() else None
        if before == f"versions/{live}":
            return []
        point_symlink(link, f"versions/{live}", self.step)
        return [f"pointed 'current' at versions/{live} (it was {before or 'missing'})"]

    def _interrupt_evaluating(self) -> list[str]:
        return [
            f"candidate {cid} was being evaluated when harnessd stopped; marked interrupted"
            for cid in candidates.interrupt_evaluating(self.store)
        ]
