"""Owner of the ``evaluations`` table: one row per evaluation run, with its report.

A row is written when an evaluation starts (state ``running``) and updated when it ends
(``done``, ``stopped`` when a sequential test ended it early, or ``interrupted``). Parent
baselines are looked up here, so a candidate is always compared with its parent's report on
exactly the same tasks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from daemon.evaluation.report import EvalReport, Split, TaskResult, stored_report
from daemon.store import Store


@dataclass(frozen=True)
class StoredRun:
    """One evaluation row as ``harnessctl show`` lists it."""

    run_id: str
    split: Split
    model: str
    state: str
    report: EvalReport | None


def record_start(
    store: Store,
    run_id: str,
    *,
    version_id: int | None,
    candidate_id: int | None,
    suite: str,
    split: Split,
    model: str,
    conditions: str | None = None,
) -> None:
    with store.tx() as conn:
        conn.execute(
            "INSERT INTO evaluations(run_id, version_id, candidate_id, suite, split, model, "
            "state, started, conditions) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                run_id,
                version_id,
                candidate_id,
                suite,
                split,
                model,
                "running",
                time.time(),
                conditions,
            ),
        )


def record_end(store: Store, run_id: str, state: str, report: EvalReport | None) -> None:
    with store.tx() as conn:
        conn.execute(
            "UPDATE evaluations SET state=?, finished=?, report=? WHERE run_id=?",
            (state, time.time(), report.model_dump_json() if report else None, run_id),
        )


def cached_baseline(
    store: Store, version_id: int, conditions: str, task_ids: list[str]
) -> EvalReport | None:
    """A finished, complete report of the version under exactly ``conditions`` (the key of
    :mod:`daemon.evaluation.conditions`: tree, suite data, tasks, model, limits, budgets,
    image, guest, scoring), on exactly ``task_ids`` in order, if one exists."""
    rows = store.query(
        "SELECT report FROM evaluations WHERE version_id=? AND candidate_id IS NULL AND "
        "conditions=? AND state='done' ORDER BY id DESC LIMIT 5",
        (version_id, conditions),
    )
    for row in rows:
        report = stored_report(row["report"])
        if [t.id for t in report.tasks] == task_ids:
            return report
    return None


def parent_tasks(store: Store, version_id: int, conditions: str) -> dict[str, TaskResult]:
    """Every task result of the version under exactly ``conditions``, from any of its runs
    (done, stopped early or interrupted; a partial run's results are as valid as a whole
    one's): the held-out parent's results, run lazily a few tasks at a time beside its
    candidates and reused by every later candidate under the same conditions. The newest
    result of a task wins (they agree when the model is deterministic)."""
    rows = store.query(
        "SELECT report FROM evaluations WHERE version_id=? AND candidate_id IS NULL AND "
        "conditions=? AND report IS NOT NULL ORDER BY id",
        (version_id, conditions),
    )
    found: dict[str, TaskResult] = {}
    for row in rows:
        found.update(stored_report(row["report"]).by_id())
    return found


def candidate_runs(store: Store, candidate_id: int, conditions: str) -> list[EvalReport]:
    """The candidate's earlier reports under exactly ``conditions`` (partial ones included),
    oldest first: what a held-out test an outage interrupted resumes from."""
    rows = store.query(
        "SELECT report FROM evaluations WHERE candidate_id=? AND conditions=? AND "
        "report IS NOT NULL ORDER BY id",
        (candidate_id, conditions),
    )
    return [stored_report(r["report"]) for r in rows]


def latest_version_reports(store: Store, version_id: int) -> list[EvalReport]:
    """The newest finished dev and held-out report of a version per (split, model)."""
    rows = store.query(
        "SELECT split, model, report FROM evaluations WHERE version_id=? AND "
        "candidate_id IS NULL AND state='done' AND split IN (?, ?) ORDER BY id DESC",
        (version_id, Split.DEV, Split.HELDOUT),
    )
    seen: set[tuple[str, str]] = set()
    reports = []
    for row in rows:
        if (row["split"], row["model"]) in seen:
            continue
        seen.add((row["split"], row["model"]))
        reports.append(stored_report(row["report"]))
    return reports


def runs_of(
    store: Store, *, candidate_id: int | None = None, version_id: int | None = None
) -> list[StoredRun]:
    """Every evaluation of a candidate (or of a version), oldest first."""
    if (candidate_id is None) == (version_id is None):
        raise ValueError("give exactly one of candidate_id and version_id")
    column = "candidate_id" if candidate_id is not None else "version_id"
    rows = store.query(
        f"SELECT run_id, split, model, state, report FROM evaluations WHERE {column}=? ORDER BY id",
        (candidate_id if candidate_id is not None else version_id,),
    )
    return [
        StoredRun(
            r["run_id"],
            Split(r["split"]),
            r["model"],
            r["state"],
            stored_report(r["report"]) if r["report"] else None,
        )
        for r in rows
    ]


@dataclass(frozen=True)
class FinishedRun:
    """A finished evaluation with its subject, as the lineage report reads it."""

    run_id: str
    version_id: int | None
    candidate_id: int | None
    suite: str
    split: Split
    model: str
    state: str
    report: EvalReport


def finished_runs(store: Store) -> list[FinishedRun]:
    """Every evaluation that ended with a report (``done`` or ``stopped``), oldest first."""
    rows = store.query(
        "SELECT run_id, version_id, candidate_id, suite, split, model, state, report "
        "FROM evaluations WHERE report IS NOT NULL AND state IN ('done','stopped') ORDER BY id"
    )
    return [
        FinishedRun(
            r["run_id"],
            r["version_id"],
            r["candidate_id"],
            r["suite"],
            Split(r["split"]),
            r["model"],
            r["state"],
            stored_report(r["report"]),
        )
        for r in rows
    ]


def tasks_run_by_split(store: Store) -> dict[str, int]:
    """Tasks run by the evaluations that ended with a report, by split (the metrics' held-out
    tasks run; a candidate's and its parent's runs of one task count twice)."""
    rows = store.query(
        "SELECT split, SUM(json_array_length(report, '$.tasks')) AS n FROM evaluations "
        "WHERE report IS NOT NULL GROUP BY split ORDER BY split"
    )
    return {str(r["split"]): int(r["n"] or 0) for r in rows}


def candidates_run_on(store: Store, split: Split) -> set[int]:
    """Ids of the candidates with any evaluation on ``split`` (just the ids: for the
    proposer, whether a candidate reached the held-out stage is all it may learn of it)."""
    rows = store.query(
        "SELECT DISTINCT candidate_id FROM evaluations WHERE candidate_id IS NOT NULL AND split=?",
        (split,),
    )
    return {int(r["candidate_id"]) for r in rows}


PROPOSER_SPLITS = (Split.SMOKE, Split.DEV)


def proposer_reports(store: Store, candidate_ids: list[int]) -> dict[int, dict[Split, EvalReport]]:
    """The newest finished smoke and dev report of each candidate, ``{id: {split: report}}``.

    Only those splits are ever read here: this is what the proposer's archive is built from.
    """
    if not candidate_ids:
        return {}
    marks = ",".join("?" * len(candidate_ids))
    rows = store.query(
        f"SELECT candidate_id, split, report FROM evaluations WHERE candidate_id IN ({marks}) "
        f"AND split IN ({','.join('?' * len(PROPOSER_SPLITS))}) AND report IS NOT NULL "
        "AND state IN ('done','stopped') ORDER BY id",
        (*candidate_ids, *PROPOSER_SPLITS),
    )
    found: dict[int, dict[Split, EvalReport]] = {}
    for row in rows:
        reports = found.setdefault(int(row["candidate_id"]), {})
        reports[Split(row["split"])] = stored_report(row["report"])
    return found
