"""SQLite state: one file in the state dir, WAL mode, one transaction per state change.

This module owns the connection and the schema; every table has exactly one owner module
that writes and reads it (``events``: :mod:`daemon.events`; ``ledger``:
:mod:`daemon.gateway.ledger`; ``versions``, ``pointer``: :mod:`daemon.lineage.versions`;
``candidates``: :mod:`daemon.lineage.candidates`; ``evaluations``:
:mod:`daemon.evaluation.results`; ``requests``: :mod:`daemon.live.requests`;
``heldout_budget``, ``heldout_tests``: :mod:`daemon.improve.alpha_ledger`;
``replications``: :mod:`daemon.improve.replication`). No other module writes SQL.

The schema version is SQLite's ``user_version``. A database written by an older release is
brought up to date on open by :data:`MIGRATIONS` and :data:`BACKFILLS` (each step
idempotent, all in one transaction), so an existing state dir keeps its history.

Synchronous calls are for start-up, tests and the offline CLI; the daemon goes through a
worker thread (:meth:`Store.call`, or ``anyio.to_thread``) so a slow disk never stalls the
event loop. One connection guarded by a lock keeps writes serialised without "database is
locked" retries.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")

SCHEMA_VERSION = 5

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    level TEXT NOT NULL,
    message TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    run_id TEXT,
    task_id TEXT,
    candidate_id INTEGER,
    version_id INTEGER,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS ledger_ts ON ledger(ts);
CREATE INDEX IF NOT EXISTS ledger_run ON ledger(run_id);
CREATE INDEX IF NOT EXISTS ledger_candidate ON ledger(candidate_id);
CREATE TABLE IF NOT EXISTS versions (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    parent_id INTEGER REFERENCES versions(id),
    candidate_id INTEGER,
    created REAL NOT NULL,
    tree_hash TEXT NOT NULL,
    git_commit TEXT,
    message TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY,
    parent_version_id INTEGER NOT NULL REFERENCES versions(id),
    created REAL NOT NULL,
    updated REAL NOT NULL,
    source TEXT NOT NULL,
    proposer_model TEXT,
    rationale TEXT NOT NULL,
    patch TEXT NOT NULL,
    raw TEXT NOT NULL,
    state TEXT NOT NULL,
    stage TEXT NOT NULL,
    verdict TEXT,
    base_candidate_id INTEGER REFERENCES candidates(id),
    review_held REAL,
    review_decided REAL,
    reviewer TEXT,
    review_reason TEXT,
    duplicate_of INTEGER REFERENCES candidates(id)
);
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    version_id INTEGER,
    candidate_id INTEGER,
    suite TEXT NOT NULL,
    split TEXT NOT NULL,
    model TEXT NOT NULL,
    state TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    report TEXT,
    conditions TEXT
);
CREATE INDEX IF NOT EXISTS evaluations_subject ON evaluations(version_id, candidate_id, model);
CREATE TABLE IF NOT EXISTS pointer (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    version_id INTEGER NOT NULL REFERENCES versions(id),
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    candidate_id INTEGER
);
CREATE TABLE IF NOT EXISTS heldout_budget (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    created REAL NOT NULL,
    settings TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS heldout_tests (
    id INTEGER PRIMARY KEY,
    candidate_id INTEGER NOT NULL UNIQUE,
    epoch INTEGER NOT NULL,
    position INTEGER NOT NULL,
    alpha REAL NOT NULL,
    block_index INTEGER NOT NULL,
    reused INTEGER NOT NULL,
    block TEXT NOT NULL,
    state TEXT NOT NULL,
    decision TEXT,
    started REAL NOT NULL,
    finished REAL
);
CREATE TABLE IF NOT EXISTS replications (
    candidate_id INTEGER PRIMARY KEY,
    version_id INTEGER NOT NULL,
    parent_version_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    task_ids TEXT NOT NULL DEFAULT '[]',
    reused TEXT NOT NULL DEFAULT '[]',
    remade INTEGER NOT NULL DEFAULT 0,
    model TEXT,
    n INTEGER,
    parent_solved INTEGER,
    candidate_solved INTEGER,
    wins INTEGER,
    losses INTEGER,
    gain REAL,
    low REAL,
    high REAL,
    test TEXT,
    started REAL,
    finished REAL,
    error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    version_id INTEGER,
    task TEXT NOT NULL,
    state TEXT NOT NULL,
    answer TEXT,
    finished REAL
);
"""

# version -> (column that must exist, statement adding it); applied in order on open.
MIGRATIONS: dict[int, list[tuple[str, str, str]]] = {
    # 2: parent baselines are keyed by every condition that changes a result; the token
    # ledger marks estimated figures (a version-1 database may predate either column).
    2: [
        ("evaluations", "conditions", "ALTER TABLE evaluations ADD COLUMN conditions TEXT"),
        (
            "ledger",
            "estimated",
            "ALTER TABLE ledger ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0",
        ),
    ],
    # 3: a candidate's tree parent (the earlier candidate it was built on; NULL: the
    # version it is tested against), recorded apart from that version.
    3: [
        (
            "candidates",
            "base_candidate_id",
            "ALTER TABLE candidates ADD COLUMN base_candidate_id INTEGER REFERENCES candidates(id)",
        ),
    ],
    # 4: the review step ([gates.review]): when a candidate was held for review, when and by
    # whom it was decided, and why.
    4: [
        ("candidates", "review_held", "ALTER TABLE candidates ADD COLUMN review_held REAL"),
        ("candidates", "review_decided", "ALTER TABLE candidates ADD COLUMN review_decided REAL"),
        ("candidates", "reviewer", "ALTER TABLE candidates ADD COLUMN reviewer TEXT"),
        ("candidates", "review_reason", "ALTER TABLE candidates ADD COLUMN review_reason TEXT"),
    ],
    # 5: typed facts where there was text: the earlier candidate a duplicate repeated, and a
    # pointer change's kind (seed, promote, rollback) apart from its reason.
    5: [
        (
            "candidates",
            "duplicate_of",
            "ALTER TABLE candidates ADD COLUMN duplicate_of INTEGER REFERENCES candidates(id)",
        ),
        ("pointer", "kind", "ALTER TABLE pointer ADD COLUMN kind TEXT NOT NULL DEFAULT ''"),
    ],
}
# version -> statements that carry what older rows held as text into a step's new columns,
# once, after the step's columns exist (each idempotent). Never read back as text after.
BACKFILLS: dict[int, list[str]] = {
    5: [
        # "duplicate of c12; not evaluated again", the static stage's reason for a repeat.
        "UPDATE candidates SET duplicate_of = CAST(substr(json_extract(verdict, '$.reason'), "
        "15) AS INTEGER) WHERE duplicate_of IS NULL AND verdict IS NOT NULL AND stage = "
        "'static' AND json_extract(verdict, '$.reason') LIKE 'duplicate of c%'",
        # "seed: minimal", "promote: candidate 3", "rollback: why": the kind, then the reason.
        "UPDATE pointer SET kind = substr(reason, 1, instr(reason, ':') - 1), "
        "reason = trim(substr(reason, instr(reason, ':') + 1)) "
        "WHERE kind = '' AND instr(reason, ':') > 0",
    ],
}
# Created after the migrations, since they may index a column a migration adds.
INDEXES = """
CREATE INDEX IF NOT EXISTS evaluations_conditions ON evaluations(conditions);
"""


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring an older database up to :data:`SCHEMA_VERSION` (a fresh one only gets indexes)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    conn.execute("BEGIN IMMEDIATE")
    try:
        for step in sorted(MIGRATIONS):
            if step <= version:
                continue
            for table, column, statement in MIGRATIONS[step]:
                if column not in _columns(conn, table):
                    conn.execute(statement)
            for statement in BACKFILLS.get(step, []):
                conn.execute(statement)
        for statement in filter(None, (s.strip() for s in INDEXES.split(";"))):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class Store:
    """The daemon's SQLite database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA busy_timeout=10000")
            self._conn.executescript(SCHEMA)
            _migrate(self._conn)
        self._limiter = anyio.CapacityLimiter(1)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed on success, rolled back on any exception."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._conn.execute(sql, params))

    def query_one(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> sqlite3.Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside one transaction."""
        with self.tx() as conn:
            return fn(conn)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`run` in a worker thread; the daemon's way in."""
        return await anyio.to_thread.run_sync(self.run, fn, limiter=self._limiter)

    async def aquery(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> list[sqlite3.Row]:
        return await anyio.to_thread.run_sync(self.query, sql, params, limiter=self._limiter)
