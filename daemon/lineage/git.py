"""The lineage's git history: one commit per pointer change, each holding that version's tree.

The repository lives in ``<root>/.git`` and is marked bare: nothing is checked out, commits
are built from a version directory through a throw-away index, so ``git log -p`` in the
harnesses folder reads as the history of the live harness. Commits carry trailers
(``Harnessd-Pointer``, ``Harnessd-Version``) that tie them to SQLite rows, and their author,
date and message come from those rows, so redoing an interrupted commit gives the same hash.
The user's git config is never read (hooks, signing and aliases could change the result).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import LineageError, SetupError

POINTER_TRAILER = "Harnessd-Pointer"
VERSION_TRAILER = "Harnessd-Version"
_IDENTITY = ("harnessd", "harnessd@localhost")
_ZERO = "0" * 40
_MANAGED_KEY = "harnessd.managed"


@dataclass(frozen=True)
class Commit:
    sha: str
    trailers: dict[str, str]

    @property
    def pointer_id(self) -> int | None:
        value = self.trailers.get(POINTER_TRAILER, "")
        return int(value) if value.isdigit() else None


class GitHistory:
    def __init__(self, root: Path, branch: str = "main") -> None:
        self.root = root
        self.git_dir = root / ".git"
        self.ref = f"refs/heads/{branch}"
        self.branch = branch
        # The lineage lock's descriptor: every git we start inherits it, so a git that
        # outlives a killed harnessd still holds the lock until it exits, and a restart's
        # reconcile waits for it instead of racing it.
        self.lock_fds: tuple[int, ...] = ()

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_DIR": str(self.git_dir),
        }
        env.update(extra or {})
        return env

    def _run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        check: bool = True,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        try:
            proc = subprocess.run(
                ["git", *args],
                cwd=cwd or self.root,
                env=self._env(env),
                input=stdin,
                capture_output=True,
                text=True,
                check=False,
                pass_fds=self.lock_fds,
            )
        except FileNotFoundError:
            if shutil.which("git", path=self._env()["PATH"]) is None:
                raise SetupError(
                    "git is not installed (or not on PATH); harnessd keeps its lineage in git: "
                    "install git and restart"
                ) from None
            raise LineageError(f"git {args[0]}: folder {cwd or self.root} does not exist") from None
        if check and proc.returncode != 0:
            detail = proc.stderr.strip() or proc.stdout.strip()
            raise LineageError(f"git {args[0]} failed in {self.root}: {detail}")
        return proc

    def ensure(self) -> None:
        """Create the repository if needed; safe to repeat after an interrupted first run."""
        if self._run("config", "--get", _MANAGED_KEY, check=False).stdout.strip() == "true":
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self._run("init", "--quiet", f"--initial-branch={self.branch}", str(self.root))
        self._run("config", "core.bare", "true")
        self._run("config", "gc.autoDetach", "false")
        self._run("config", _MANAGED_KEY, "true")

    def clear_stale_state(self) -> list[str]:
        """Remove lock files and scratch indexes a killed git or harnessd left behind.

        Only safe while holding the lineage lock: then no git of ours is running.
        """
        if not self.git_dir.is_dir():
            return []
        stale = sorted(self.git_dir.rglob("*.lock")) + sorted(self.git_dir.glob("harnessd-index-*"))
        for path in stale:
            path.unlink(missing_ok=True)
        return [str(p.relative_to(self.root)) for p in stale]

    def head(self) -> str | None:
        if not self.git_dir.is_dir():
            return None
        proc = self._run("rev-parse", "--verify", "--quiet", f"{self.ref}^{{commit}}", check=False)
        return proc.stdout.strip() or None

    def log(self) -> list[Commit]:
        """The branch's commits, newest first, with their trailers."""
        if self.head() is None:
            return []
        out = self._run("log", "--format=%H%x00%(trailers:only,unfold)%x1e", self.ref).stdout
        commits = []
        for record in out.split("\x1e"):
            record = record.strip("\n")
            if not record:
                continue
            sha, _, block = record.partition("\x00")
            trailers = {}
            for line in block.splitlines():
                key, sep, value = line.partition(":")
                if sep:
                    trailers[key.strip()] = value.strip()
            commits.append(Commit(sha=sha.strip(), trailers=trailers))
        return commits

    def commit_tree(self, tree_dir: Path, message: str, parent: str | None, when: float) -> str:
        """A commit object (not yet on the branch) holding exactly ``tree_dir``'s files."""
        index = self.git_dir / f"harnessd-index-{secrets.token_hex(4)}"
        scratch = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(tree_dir)}
        try:
            self._run("add", "--all", "--force", ".", env=scratch, cwd=tree_dir)
            tree = self._run("write-tree", env=scratch).stdout.strip()
        finally:
            index.unlink(missing_ok=True)
        stamp = f"@{int(when)} +0000"
        identity = {
            "GIT_AUTHOR_NAME": _IDENTITY[0],
            "GIT_AUTHOR_EMAIL": _IDENTITY[1],
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_NAME": _IDENTITY[0],
            "GIT_COMMITTER_EMAIL": _IDENTITY[1],
            "GIT_COMMITTER_DATE": stamp,
        }
        args = ["commit-tree", tree, "-F", "-"]
        if parent is not None:
            args[2:2] = ["-p", parent]
        return self._run(*args, env=identity, stdin=message).stdout.strip()

    def move_branch(self, new: str | None, old: str | None) -> None:
        """Point the branch at ``new`` (None: delete it) if it still points at ``old``."""
        if new is None:
            self._run("update-ref", "-d", self.ref, old or "")
        else:
            self._run("update-ref", self.ref, new, old or _ZERO)

    def tree_id(self, commit: str) -> str:
        return self._run("rev-parse", f"{commit}^{{tree}}").stdout.strip()

    def export(self, commit: str, dest: Path) -> None:
        """Write ``commit``'s files into the empty directory ``dest``."""
        index = self.git_dir / f"harnessd-index-{secrets.token_hex(4)}"
        scratch = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(dest)}
        try:
            self._run("read-tree", commit, env=scratch)
            self._run("checkout-index", "--all", "--force", env=scratch, cwd=dest)
        finally:
            index.unlink(missing_ok=True)
