"""Owner of the ``versions`` and ``pointer`` tables: accepted versions and every switch of
the live version (seed, promotion, rollback).

The two tables are one aggregate: a promotion inserts a version and a pointer row in the
same transaction (with the candidate's final state, see :mod:`daemon.lineage.candidates`),
so writers take an open connection and join the caller's transaction.
"""

from __future__ import annotations

import sqlite3

from daemon.lineage.records import PointerChange, PointerKind, Version
from daemon.store import Store

_CURRENT = (
    "SELECT v.* FROM pointer p JOIN versions v ON v.id = p.version_id ORDER BY p.id DESC LIMIT 1"
)


def get(store: Store, version_id: int) -> Version | None:
    row = store.query_one("SELECT * FROM versions WHERE id = ?", (version_id,))
    return Version.from_row(row) if row else None


def all_versions(store: Store) -> list[Version]:
    return [Version.from_row(r) for r in store.query("SELECT * FROM versions ORDER BY id")]


def current(store: Store) -> Version | None:
    """The live version: the one the newest pointer row names (None before the seed)."""
    row = store.query_one(_CURRENT)
    return Version.from_row(row) if row else None


def by_commit_prefix(store: Store, prefix: str) -> list[Version]:
    rows = store.query("SELECT * FROM versions WHERE git_commit LIKE ? || '%'", (prefix,))
    return [Version.from_row(r) for r in rows]


def history(store: Store) -> list[PointerChange]:
    """Every pointer change, oldest first."""
    rows = store.query(
        "SELECT p.*, v.name AS version_name FROM pointer p "
        "JOIN versions v ON v.id = p.version_id ORDER BY p.id"
    )
    return [PointerChange.from_row(r) for r in rows]


def name_before(store: Store, pointer_id: int) -> str | None:
    """The version that was live just before pointer change ``pointer_id``."""
    row = store.query_one(
        "SELECT v.name FROM pointer p JOIN versions v ON v.id = p.version_id "
        "WHERE p.id < ? ORDER BY p.id DESC LIMIT 1",
        (pointer_id,),
    )
    return str(row["name"]) if row else None


def next_id(store: Store) -> int:
    row = store.query_one("SELECT COALESCE(MAX(id), 0) + 1 AS n FROM versions")
    return int(row["n"]) if row else 1


def insert_version(
    conn: sqlite3.Connection,
    *,
    version_id: int,
    name: str,
    parent_id: int | None,
    candidate_id: int | None,
    created: float,
    tree_hash: str,
    message: str,
) -> None:
    conn.execute(
        "INSERT INTO versions(id, name, parent_id, candidate_id, created, tree_hash, "
        "git_commit, message) VALUES (?,?,?,?,?,?,NULL,?)",
        (version_id, name, parent_id, candidate_id, created, tree_hash, message),
    )


def insert_pointer(
    conn: sqlite3.Connection,
    *,
    ts: float,
    version_id: int,
    kind: PointerKind,
    reason: str,
    candidate_id: int | None,
) -> None:
    conn.execute(
        "INSERT INTO pointer(ts, version_id, kind, reason, candidate_id) VALUES (?,?,?,?,?)",
        (ts, version_id, kind, reason, candidate_id),
    )


def record_git_commit(store: Store, version_id: int, sha: str) -> None:
    """Fill in a version's git commit once it exists (never overwrites one)."""
    with store.tx() as conn:
        conn.execute(
            "UPDATE versions SET git_commit = ? WHERE id = ? AND git_commit IS NULL",
            (sha, version_id),
        )
