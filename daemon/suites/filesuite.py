"""File suites: your own tasks, one JSON object per line, in a file or a folder of files.

``file:PATH`` names a ``.jsonl`` file, or a folder whose ``*.jsonl`` files (not its
subfolders) together make one suite, read in name order. The whole suite is checked before
anything runs: a problem stops loading with one line naming the file, the line number, the
key and what is expected (:mod:`daemon.suites.filetasks` has the format). Task ids are unique
across the suite.

The suite's name carries a hash of every byte it is made of (its task files and the checker
files they name), ``file:tasks@3f2a9c1b04de``, so reports, stored baselines and evaluation
conditions of a changed suite never mix with the old one's.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from daemon.errors import ConfigError
from daemon.suites.base import CodeChecker, lookup
from daemon.suites.filecalls import Calls
from daemon.suites.filepython import Python
from daemon.suites.filerules import BadKey, Exact, Number
from daemon.suites.filetasks import FileTask, parse_task
from daemon.tasks import CheckResult, Task

SUFFIX = ".jsonl"
HASH_CHARS = 12


def suite_files(path: Path) -> list[Path]:
    """The task files of ``file:PATH``; ConfigError if there are none."""
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.glob(f"*{SUFFIX}") if p.is_file())
        if files:
            return files
        raise ConfigError(f"suite folder {path} holds no {SUFFIX} files (one task per line)")
    raise ConfigError(
        f"suite file {path} does not exist (give a {SUFFIX} file or a folder of them; a relative "
        "path resolves against the policy file's folder, or the working directory for --suite)"
    )


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def parse_line(line: str) -> Any:
    """Strict JSON: no NaN or Infinity, no key twice in one object."""
    return json.loads(line, parse_constant=_no_constants, object_pairs_hook=_unique_keys)


def _read_file(
    file: Path, tasks: dict[str, FileTask], where: dict[str, str], sources: dict[Path, str]
) -> bytes:
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start})") from None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = parse_line(line)
        except ValueError as exc:
            raise ConfigError(f"{file}:{number}: not one JSON object: {exc}") from None
        try:
            task = parse_task(data, file.parent, sources)
        except BadKey as exc:
            raise ConfigError(f"{file}:{number}: {exc}") from None
        if task.id in tasks:
            raise ConfigError(
                f"{file}:{number}: key 'id': {task.id!r} is already the id of the task on "
                f"{where[task.id]}; ids must be unique in a suite"
            )
        tasks[task.id] = task
        where[task.id] = f"{file.name}:{number}"
    return raw


class FileSuite:
    """The tasks of one ``file:`` suite, with their ground truth and check rules."""

    license = "your own tasks"

    def __init__(self, path: Path, tasks: dict[str, FileTask], digest: str, sources: list[Path]):
        self.path = path
        self.digest = digest
        self.name = f"file:{path.stem}@{digest[:HASH_CHARS]}"
        self.sources = sources  # every file the suite was made from (to watch for edits)
        self._tasks = tasks

    @classmethod
    def load(cls, path: Path) -> FileSuite:
        """Read and check the whole suite (blocking: call it from a worker thread)."""
        path = path.resolve()
        tasks: dict[str, FileTask] = {}
        where: dict[str, str] = {}
        checkers: dict[Path, str] = {}
        digest = hashlib.sha256(b"harnessd file suite v1\0")
        files = suite_files(path)
        for file in files:
            raw = _read_file(file, tasks, where, checkers)
            digest.update(f"{file.name}\0{len(raw)}\0".encode() + raw)
        for checker, source in sorted(checkers.items()):
            data = source.encode()
            digest.update(f"{checker.name}\0{len(data)}\0".encode() + data)
        if not tasks:
            raise ConfigError(f"suite {path} holds no tasks (one JSON object per line)")
        return cls(path, tasks, digest.hexdigest(), [*files, *sorted(checkers)])

    def _task(self, task_id: str) -> FileTask:
        return lookup(self._tasks, self.name, task_id)

    def task_ids(self) -> list[str]:
        return list(self._tasks)

    def task(self, task_id: str) -> Task:
        return self._task(task_id).task

    def expected(self, task_id: str) -> Any:
        return self._task(task_id).expected

    def reference_output(self, task_id: str) -> Any:
        """The task's ``reference`` if it has one; else, where the rule allows, one built from
        ``expected`` (``exact``, ``number``, ``calls``); else None."""
        task = self._task(task_id)
        if task.has_reference:
            return task.reference
        if isinstance(task.rule, Calls):
            return task.rule.reference()
        if isinstance(task.rule, Exact | Number):
            return task.expected
        return None

    async def check(self, task_id: str, output: Any, checker: CodeChecker) -> CheckResult:
        task = self._task(task_id)
        if isinstance(task.rule, Python):
            return await task.rule.check(output, task.expected, checker)
        return task.rule.check(output, task.expected)
