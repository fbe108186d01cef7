"""Live traffic into tasks: a served request, labelled with what it should have answered.

``harnessctl label REQUEST --suite NAME --expected ...`` turns one row of the ``requests``
table into a task of the private suite NAME: the file ``<state dir>/suites/NAME.jsonl``,
one task per line in the file-suite format (:mod:`daemon.suites.filetasks`), owned by the
daemon and written only here. A policy names it like any other file suite
(``[suite] name = "file:/path/to/state/suites/NAME.jsonl"``, e.g. as its held-out pool),
and ``harnessctl suite export NAME`` prints it, to keep in a repository.

The task is the request's prompt and tools exactly as the harness saw them; the label
(``expected`` and ``check``) is the person's. The harness's own answer is kept in
``notes`` for people: a suite never shows notes to a harness or a checker. Every line is
checked as the suite loader will check it before it is written, so a label the loader
would refuse is refused here, with the key that is wrong.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from daemon.errors import BadRequest, ConfigError
from daemon.live import requests
from daemon.store import Store
from daemon.suites.filerules import BadKey
from daemon.suites.filesuite import SUFFIX, FileSuite, parse_line
from daemon.suites.filetasks import parse_task
from daemon.tasks import Task

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
FOLDER = "suites"
_lock = threading.Lock()  # one writer at a time per daemon (labels arrive from worker threads)


def suites_dir(state_dir: Path) -> Path:
    return state_dir / FOLDER


def suite_path(folder: Path, name: str) -> Path:
    if not NAME.match(name):
        raise BadRequest(
            f"suite name {name!r}: expected 1-64 of a-z 0-9 _ - (a letter or digit first)"
        )
    return folder / f"{name}{SUFFIX}"


def _prompt(task: Task) -> str | list[dict[str, str]]:
    messages = [{"role": m.role, "content": m.content or ""} for m in task.prompt]
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return messages


def task_line(
    request: requests.Request, task_id: str, expected: Any, check: dict[str, Any]
) -> dict[str, Any]:
    """The request as a task of the file format, with the person's label."""
    line: dict[str, Any] = {"id": task_id, "prompt": _prompt(request.task)}
    if request.task.tools:
        line["tools"] = [t.model_dump() for t in request.task.tools]
    line["expected"] = expected
    line["check"] = check
    line["notes"] = {
        "from": f"request {request.id} ({request.kind} {request.task.id})",
        "answer": request.answer.get("output"),
    }
    return line


def _ids(path: Path) -> set[str]:
    """The ids already in the suite; the whole file checked as the loader checks it."""
    if not path.exists():
        return set()
    return set(FileSuite.load(path).task_ids())


def label(
    store: Store,
    folder: Path,
    *,
    request_id: int,
    suite: str,
    expected: Any,
    check: dict[str, Any],
    task_id: str | None = None,
) -> dict[str, Any]:
    """Append the labelled request to the suite's file (blocking: call from a worker thread)."""
    path = suite_path(folder, suite)
    request = requests.get(store, request_id)
    if request is None:
        raise BadRequest(f"no request {request_id} (the id 'harnessctl ask' or 'run' printed)")
    if request.state == "running":
        raise BadRequest(f"request {request_id} is still being served; label it once it is done")
    task_id = task_id or f"request-{request_id}"
    line = task_line(request, task_id, expected, check)
    try:
        parse_task(parse_line(_dumps(line)), folder, {})
    except BadKey as exc:
        raise BadRequest(f"the label of request {request_id}: {exc}") from None
    with _lock:
        if task_id in _ids(path):
            raise BadRequest(
                f"suite {suite!r} already has a task {task_id!r} ({path}); "
                "give the label another id with --id"
            )
        folder.mkdir(mode=0o700, exist_ok=True)
        old = path.read_bytes() if path.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(old + _dumps(line).encode() + b"\n")
        os.replace(temporary, path)  # readers see the old file or the new one, never half
        count = len(_ids(path))
    return {"suite": suite, "path": str(path), "task": task_id, "tasks": count}


def export(folder: Path, suite: str) -> dict[str, Any]:
    """The suite's file as text (blocking: call from a worker thread)."""
    path = suite_path(folder, suite)
    if not path.exists():
        known = sorted(p.stem for p in folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []
        have = ", ".join(known) if known else "none yet (make one with 'harnessctl label')"
        raise BadRequest(f"no labelled suite {suite!r}; suites: {have}")
    try:
        loaded = FileSuite.load(path)
    except ConfigError as exc:
        raise BadRequest(f"suite {suite!r} was edited into an invalid file: {exc}") from None
    return {
        "suite": suite,
        "path": str(path),
        "name": loaded.name,
        "tasks": len(loaded.task_ids()),
        "text": path.read_text(encoding="utf-8"),
    }


def _dumps(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False)
