"""Bring the lineage's files and git history back in line with SQLite after a crash.

SQLite is the truth: a version exists if its row does, the live version is the last pointer
row. Every repair here is idempotent, and the normal promotion path reuses :meth:`sync_git`
for its own git commit, so "finish a promotion" and "repair a crash" are the same code.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from daemon.errors import LineageError
from daemon.lineage_fs import TMP_MARK, leftovers, point_symlink, remove_tree, tree_hash
from daemon.lineage_fs import write_version_dir as _write_version_dir
from daemon.lineage_git import VERSION_TRAILER
from daemon.lineage_records import Version
from daemon.patch_tree import TreeError

if TYPE_CHECKING:
    from daemon.lineage import Lineage

_NAME_RE = re.compile(r"^v\d+$")


class Reconciler:
    def __init__(self, lineage: Lineage) -> None:
        self.lineage = lineage
        self.git = lineage.git

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
        lineage = self.lineage
        for path in leftovers(lineage.versions_dir) + leftovers(lineage.root):
            remove_tree(path)
            notes.append(f"removed the unfinished temporary {path.relative_to(lineage.root)}")
        return notes

    def _remove_unrecorded(self) -> list[str]:
        lineage = self.lineage
        recorded = {v.name for v in lineage.versions()}
        notes = []
        for path in sorted(lineage.versions_dir.iterdir()):
            if _NAME_RE.match(path.name) and path.name not in recorded:
                remove_tree(path)
                notes.append(
                    f"removed versions/{path.name}: its promotion stopped before it was recorded"
                )
        return notes

    def _intact(self, version: Version) -> bool:
        path = self.lineage.path(version)
        try:
            return path.is_dir() and tree_hash(path) == version.tree_hash
        except (TreeError, OSError):
            return False

    def _restore_versions(self) -> list[str]:
        notes = []
        for version in self.lineage.versions():
            if self._intact(version):
                continue
            commit = version.git_commit or next(
                (c.sha for c in self.git.log() if c.trailers.get(VERSION_TRAILER) == version.name),
                None,
            )
            if commit is None:
                raise LineageError(
                    f"{self.lineage.path(version)} is missing or damaged and git holds no copy; "
                    "restore the harnesses folder from a backup"
                )
            self._restore(version, commit)
            notes.append(f"restored versions/{version.name} from git commit {commit[:12]}")
        return notes

    def _restore(self, version: Version, commit: str) -> None:
        lineage = self.lineage
        export = lineage.versions_dir / f"{TMP_MARK}export-{version.name}"
        remove_tree(export)
        export.mkdir()
        try:
            self.git.export(commit, export)
            if tree_hash(export) != version.tree_hash:
                raise LineageError(
                    f"git commit {commit[:12]} does not hold {version.name} as recorded; "
                    "restore the harnesses folder from a backup"
                )
            remove_tree(lineage.path(version))
            _write_version_dir(export, lineage.path(version), lineage.checkpoint)
        finally:
            remove_tree(export)

    def sync_git(self) -> list[str]:
        """Write the commits SQLite's pointer rows call for and git lacks, oldest first."""
        lineage = self.lineage
        changes = lineage.history()
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
                lineage.versions_dir / change.version_name,
                lineage.commit_message(change),
                head,
                change.ts,
            )
            lineage.checkpoint("git:commit_created")
            self.git.move_branch(sha, head)
            lineage.checkpoint("git:ref_updated")
            known[change.id] = head = sha
            what = "rollback to" if change.is_rollback else "promotion of"
            notes.append(f"wrote the missing git commit for the {what} {change.version_name}")
        first_change: dict[int, int] = {}
        for change in reversed(changes):
            first_change[change.version_id] = change.id
        for version in lineage.versions():
            recorded = known.get(first_change.get(version.id, -1))
            if version.git_commit is None and recorded is not None:
                with lineage.store.tx() as conn:
                    conn.execute(
                        "UPDATE versions SET git_commit = ? WHERE id = ? AND git_commit IS NULL",
                        (recorded, version.id),
                    )
                lineage.checkpoint("git:recorded")
        return notes

    def fix_current(self) -> list[str]:
        lineage = self.lineage
        link = lineage.current_link
        if not lineage.history():
            if link.is_symlink() or link.exists():
                remove_tree(link)
                return ["removed 'current': no version is recorded yet"]
            return []
        live = lineage.current().name
        before = str(link.readlink()) if link.is_symlink() else None
        if before == f"versions/{live}":
            return []
        point_symlink(link, f"versions/{live}", lineage.checkpoint)
        return [f"pointed 'current' at versions/{live} (it was {before or 'missing'})"]

    def _interrupt_evaluating(self) -> list[str]:
        store = self.lineage.store
        with store.tx() as conn:
            ids = [
                row["id"]
                for row in conn.execute("SELECT id FROM candidates WHERE state = 'evaluating'")
            ]
            conn.execute(
                "UPDATE candidates SET state = 'interrupted', updated = ? "
                "WHERE state = 'evaluating'",
                (time.time(),),
            )
        return [
            f"candidate {cid} was being evaluated when harnessd stopped; marked interrupted"
            for cid in ids
        ]
