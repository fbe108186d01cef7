"""Owner of the ``requests`` table: every request the live harness served, with its answer.

A row is made when a request starts (state ``running``, with the version that serves it)
and finished with ``done`` or ``interrupted``. Rows are the raw material for turning live
traffic into tasks.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from daemon.store import Store
from daemon.tasks import Task


@dataclass(frozen=True)
class Request:
    id: int
    kind: str  # ask or run
    version_id: int | None
    task: Task
    state: str  # running, done or interrupted
    answer: dict[str, Any]


def start(store: Store, kind: str, version_id: int, task: Task) -> int:
    with store.tx() as conn:
        cur = conn.execute(
            "INSERT INTO requests(ts, kind, version_id, task, state) VALUES (?,?,?,?,?)",
            (time.time(), kind, version_id, task.model_dump_json(), "running"),
        )
        return int(cur.lastrowid or 0)


def finish(store: Store, request_id: int, state: str, answer: dict[str, Any]) -> None:
    with store.tx() as conn:
        conn.execute(
            "UPDATE requests SET state=?, answer=?, finished=? WHERE id=?",
            (state, json.dumps(answer, default=str), time.time(), request_id),
        )


def get(store: Store, request_id: int) -> Request | None:
    """One served request: its task as the harness saw it, its state and its answer."""
    row = store.query_one(
        "SELECT id, kind, version_id, task, state, answer FROM requests WHERE id=?", (request_id,)
    )
    if row is None:
        return None
    return Request(
        id=row["id"],
        kind=row["kind"],
        version_id=row["version_id"],
        task=Task.model_validate_json(row["task"]),
        state=row["state"],
        answer=json.loads(row["answer"]) if row["answer"] else {},
    )


def recent(store: Store, limit: int) -> list[Task]:
    """The last ``limit`` distinct free-text and chat requests served to the end (``ask``
    and the endpoint's ``chat``), newest first: what a candidate is replayed on before it
    may serve them (a ``run`` is a suite's task, judged there already)."""
    rows = store.query(
        "SELECT task FROM requests WHERE state = 'done' AND kind IN ('ask', 'chat') "
        "ORDER BY id DESC LIMIT ?",
        (limit * 4,),
    )
    seen: set[str] = set()
    tasks = []
    for row in rows:
        task = Task.model_validate_json(row["task"])
        shape = json.dumps([m.model_dump() for m in task.prompt], sort_keys=True)
        if shape not in seen:
            seen.add(shape)
            tasks.append(task)
    return tasks[:limit]
