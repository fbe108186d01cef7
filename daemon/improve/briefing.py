"""What the proposer is told of earlier candidates: the information rule, applied here only.

The lineage-wide bound on false promotions (DESIGN.md, *Error control over the whole
lineage*) holds only if the proposer learns of each candidate that reached the held-out stage
exactly one bit: promoted or not. :func:`outcome` is the one function that turns a candidate
into what the proposer may know of it; :func:`archive_entries` reads the lineage and the
smoke and dev reports (``results.proposer_reports`` never returns a held-out report) and
hands the proposer plain :class:`~daemon.improve.proposer.archive.ArchiveEntry` values. The
proposer package cannot import the tables, the alpha ledger or the acceptance core at all
(``tests/test_layout.py``), so this module is the only way anything about a candidate
reaches it.

Before the held-out stage a candidate's stage and reason are shown (parse, static, smoke and
dev-screen outcomes: dev-split data). From the held-out stage on, no gate, figure, task
count, timing or later stage is shown.

A candidate awaiting review (``[gates.review]``) is left out altogether until a person
decides: even "awaiting" would say that its test passed. Once decided it is "promoted" or
"not promoted" like any other, and the reviewer's name and reason (written by someone who
saw the held-out figures) never reach the proposer.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass

from daemon.evaluation import results
from daemon.evaluation.report import EvalReport, Split
from daemon.improve.pipeline import FROM_HELDOUT
from daemon.improve.proposer import components, edit_protocol, moves
from daemon.improve.proposer.archive import ArchiveEntry
from daemon.improve.proposer.search import Node
from daemon.lineage import Candidate, CandidateSource, CandidateState, Lineage, Version
from daemon.patches import ParseFailure
from daemon.patches.operations import SetConstant
from daemon.store import Store
from daemon.suites.base import Suite
from daemon.verdict import Gate


def reached_heldout(cand: Candidate, heldout_ids: Collection[int]) -> bool:
    """Whether the candidate got to the held-out stage (ran on it, or got a verdict there)."""
    if cand.id in heldout_ids or cand.state == CandidateState.ACCEPTED:
        return True
    if cand.stage in FROM_HELDOUT:
        return True
    return cand.verdict is not None and cand.verdict.stage in FROM_HELDOUT


def outcome(cand: Candidate, reached: bool) -> str:
    """A candidate's outcome as the proposer may see it (``reached``: it got to held-out)."""
    if reached:
        return "promoted" if cand.state == CandidateState.ACCEPTED else "not promoted"
    verdict = cand.verdict
    if verdict is None:
        return f"{cand.state} at {cand.stage}" if cand.stage else cand.state
    notes = [g.note for g in verdict.gates if g.note and not g.skipped]
    tail = f" ({'; '.join(notes)})" if notes else ""
    return f"rejected at {verdict.stage}: {verdict.reason}{tail}"


def archive_entries(
    lineage: Lineage,
    store: Store,
    live: Version,
    *,
    heldout_ids: Collection[int],
    model: str,
    considered: int = 200,
) -> list[ArchiveEntry]:
    """The ``considered`` latest candidates as the proposer may see them, oldest first
    (blocking: call it in a worker thread)."""
    cands = [
        c for c in lineage.candidates(limit=considered) if c.state != CandidateState.AWAITING_REVIEW
    ]
    repeats: dict[int, list[int]] = {}
    originals: list[Candidate] = []
    for cand in cands:
        first = cand.duplicate_of
        if first is not None and any(c.id == first for c in cands):
            repeats.setdefault(first, []).append(cand.id)
        else:
            originals.append(cand)
    names = {v.id: v.name for v in lineage.versions()}
    ancestry = {v.candidate_id for v in _ancestors(lineage, live) if v.candidate_id is not None}
    reports = results.proposer_reports(store, [c.id for c in originals])
    parents: dict[int, EvalReport | None] = {}
    entries: list[ArchiveEntry] = []
    for cand in originals:
        pid = cand.parent_version_id
        if pid not in parents:
            parents[pid] = _latest_dev(store, pid, model)
        found = reports.get(cand.id, {})
        entries.append(
            ArchiveEntry(
                candidate_id=cand.id,
                source=cand.source,
                rationale=cand.rationale,
                patch=cand.patch,
                raw=cand.raw,
                outcome=outcome(cand, reached_heldout(cand, heldout_ids)),
                parent_name=names.get(pid, f"version {pid}"),
                in_live_history=cand.state == CandidateState.ACCEPTED and cand.id in ancestry,
                on_live_parent=pid == live.id,
                smoke=found.get(Split.SMOKE),
                dev=found.get(Split.DEV),
                parent_dev=parents[pid],
                repeats=repeats.get(cand.id, []),
                base_id=cand.base_candidate_id,
            )
        )
    return entries


def search_nodes(
    lineage: Lineage,
    store: Store,
    live: Version,
    live_dev: EvalReport,
    *,
    considered: int = 200,
) -> tuple[list[Node], dict[int, EvalReport]]:
    """The trees the next proposal may build on, with their dev results: the live version
    and each of its candidates that finished a dev run on the same tasks with the same model
    as ``live_dev`` (blocking: call it in a worker thread). Returns the nodes and each
    candidate's dev report (the prompt shows the chosen base's failures).

    Dev evidence only: whether a candidate reached the held-out stage, and everything it
    measured there, plays no part (``results.proposer_reports`` never returns a held-out
    report), so choosing a base tells the proposer nothing the information rule withholds.
    """
    wanted = sorted(t.id for t in live_dev.tasks)
    cands = [
        c
        for c in lineage.candidates(parent=live, limit=considered)
        if c.patch and c.state != CandidateState.ACCEPTED
    ]
    reports = results.proposer_reports(store, [c.id for c in cands])
    nodes = [Node(None, sum(t.passed for t in live_dev.tasks), live_dev.n)]
    devs: dict[int, EvalReport] = {}
    for cand in sorted(cands, key=lambda c: c.id):
        dev = reports.get(cand.id, {}).get(Split.DEV)
        if dev is None or dev.model != live_dev.model or sorted(t.id for t in dev.tasks) != wanted:
            continue
        devs[cand.id] = dev
        nodes.append(Node(cand.id, sum(t.passed for t in dev.tasks), dev.n))
    return nodes, devs


def _latest_dev(store: Store, version_id: int, model: str) -> EvalReport | None:
    """The version's latest finished dev-split report with ``model`` (its baseline)."""
    runs = [
        r
        for r in results.runs_of(store, version_id=version_id)
        if r.split == Split.DEV and r.model == model and r.state == "done" and r.report is not None
    ]
    return runs[-1].report if runs else None


def _ancestors(lineage: Lineage, live: Version) -> list[Version]:
    by_id = {v.id: v for v in lineage.versions()}
    chain, cursor = [], by_id.get(live.id)
    while cursor is not None:
        chain.append(cursor)
        cursor = by_id.get(cursor.parent_id) if cursor.parent_id is not None else None
    return chain


def inert_constants(lineage: Lineage, parent: Version, base: int | None) -> set[str]:
    """The constants (by target label) that an earlier operation-protocol candidate on the
    same tree (``parent``, built on ``base``) set to another value with no observable
    change on dev (stopped by the dev change gate): another value of the same constant
    would most likely change nothing there either, so it is not offered again. Dev
    evidence only: nothing of a held-out test enters it."""
    found: set[str] = set()
    for cand in lineage.candidates(parent=parent):
        if cand.base_candidate_id != base or cand.verdict is None:
            continue
        if cand.verdict.failed != [Gate.DEV_CHANGE.value]:
            continue
        read = edit_protocol.read_reply(cand.raw)
        if not isinstance(read, ParseFailure) and isinstance(read[0], SetConstant):
            found.add(read[0].target)
    return found


def demonstrations(dev: EvalReport, suite: Suite) -> list[moves.Demo]:
    """The dev tasks the base solved (the verifier passed them), each with its question and
    the output the verifier accepted: all the demonstrate move may offer. Only a dev-split
    report is taken, so no held-out task id, question or answer can reach the proposer."""
    if dev.split != Split.DEV:
        raise ValueError("worked examples come from dev-split reports only")
    demos = []
    for t in dev.tasks:
        if not t.passed or t.error:
            continue
        prompt = suite.task(t.id).prompt
        question = " / ".join(m.content or "" for m in prompt if m.role == "user")
        demos.append(moves.Demo(t.id, question, t.output))
    return demos


def component_failures(dev: EvalReport, suite: Suite) -> list[components.FailedAnswer]:
    """The base's failed dev tasks as the component move's evidence reads them: the answer,
    the task's tools and how many calls its ground truth holds. Only a dev-split report is
    taken, so no held-out task reaches the proposer."""
    if dev.split != Split.DEV:
        raise ValueError("component evidence comes from dev-split reports only")
    failed = []
    for t in dev.tasks:
        if t.passed:
            continue
        task = suite.task(t.id)
        expected = suite.expected(t.id) if task.kind == "function_call" else None
        failed.append(
            components.FailedAnswer(
                t.output,
                [tool.model_dump() for tool in task.tools],
                len(expected) if isinstance(expected, list) else 0,
            )
        )
    return failed


def move_of(raw: str) -> moves.Move | None:
    """The move a candidate's raw reply made (None: not an operations-protocol reply)."""
    read = edit_protocol.read_reply(raw)
    return None if isinstance(read, ParseFailure) else edit_protocol.move_of(read[0])


def move_records(
    lineage: Lineage, store: Store, *, model: str, considered: int = 200
) -> dict[moves.Move, moves.Record]:
    """Each move's record over the ``considered`` latest proposer candidates (blocking: call
    it in a worker thread). The move is read from the candidate's raw reply; a win is a
    candidate whose dev accuracy beat its base's (the earlier candidate it was built on, or
    its parent version) on the same tasks with ``model``; every other candidate of the move
    is a loss (refused, stopped before dev, or no better). Dev evidence only."""
    cands = [
        (c, move)
        for c in lineage.candidates(limit=considered)
        if c.source == CandidateSource.PROPOSER and (move := move_of(c.raw)) is not None
    ]
    bases = {c.base_candidate_id for c, _ in cands if c.base_candidate_id is not None}
    reports = results.proposer_reports(store, sorted({c.id for c, _ in cands} | bases))
    parents: dict[int, EvalReport | None] = {}
    wins: dict[moves.Move, int] = {}
    losses: dict[moves.Move, int] = {}
    for cand, move in cands:
        dev = reports.get(cand.id, {}).get(Split.DEV)
        if cand.base_candidate_id is not None:
            base = reports.get(cand.base_candidate_id, {}).get(Split.DEV)
        else:
            pid = cand.parent_version_id
            if pid not in parents:
                parents[pid] = _latest_dev(store, pid, model)
            base = parents[pid]
        won = (
            dev is not None
            and base is not None
            and dev.model == base.model == model
            and sorted(t.id for t in dev.tasks) == sorted(t.id for t in base.tasks)
            and dev.accuracy > base.accuracy
        )
        tally = wins if won else losses
        tally[move] = tally.get(move, 0) + 1
    return {m: moves.Record(wins.get(m, 0), losses.get(m, 0)) for m in moves.MOVES}


def instruction_history(
    lineage: Lineage,
    store: Store,
    live: Version,
    live_dev: EvalReport,
    *,
    heldout_ids: Collection[int],
    considered: int = 200,
) -> list[moves.Trial]:
    """The live version's earlier instruction candidates with their dev results on the
    tasks and model of ``live_dev`` (blocking: call it in a worker thread). Their outcome is
    :func:`outcome`'s: of one that reached held-out, only "promoted" or "not promoted"."""
    wanted = sorted(t.id for t in live_dev.tasks)
    found: list[tuple[Candidate, str]] = []
    for cand in lineage.candidates(parent=live, limit=considered):
        if cand.state == CandidateState.AWAITING_REVIEW:
            continue  # left out until decided, as in the archive
        read = edit_protocol.read_reply(cand.raw)
        if not isinstance(read, ParseFailure) and isinstance(read[0], edit_protocol.Instruction):
            found.append((cand, read[0].text))
    reports = results.proposer_reports(store, [c.id for c, _ in found])
    trials = []
    for cand, text in found:
        dev = reports.get(cand.id, {}).get(Split.DEV)
        if dev is None or dev.model != live_dev.model or sorted(t.id for t in dev.tasks) != wanted:
            continue
        reached = reached_heldout(cand, heldout_ids)
        solved = sum(t.passed for t in dev.tasks)
        trials.append(moves.Trial(cand.id, text, solved, dev.n, outcome(cand, reached)))
    return trials


@dataclass(frozen=True)
class MergePair:
    """Two candidates of the live version that each solve dev tasks the other does not (and
    the live version does not): ``first``'s tree with ``second``'s change on top is worth a
    try (GEPA's merge). ``wins``: the dev tasks either solves and the live version fails."""

    first: int
    second: int
    wins: frozenset[str]


MERGE_KEY = "merge"
"""The key of a merge candidate's recorded reply, ``{"merge": [first, second]}``: the loop
writes it (no model does), and reads it back to not merge one pair twice."""


def merged_pair(raw: str) -> tuple[int, int] | None:
    """The pair a candidate's recorded reply says it merged (None: not a merge)."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    pair = data.get(MERGE_KEY) if isinstance(data, dict) else None
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(c, int) for c in pair):
        return pair[0], pair[1]
    return None


def merge_pairs(
    lineage: Lineage,
    store: Store,
    live: Version,
    live_dev: EvalReport,
    *,
    considered: int = 200,
) -> list[MergePair]:
    """The pairs of the live version's candidates where each has a dev win over the live
    version that the other lacks, not merged before; the most wins between them first
    (blocking: call it in a worker thread). Dev evidence only, as for the choice of base
    (:func:`search_nodes`)."""
    _, devs = search_nodes(lineage, store, live, live_dev, considered=considered)
    failed = {t.id for t in live_dev.tasks if not t.passed}
    wins = {
        cid: frozenset(t.id for t in dev.tasks if t.passed and t.id in failed)
        for cid, dev in devs.items()
    }
    tried: set[frozenset[int]] = set()
    for cand in lineage.candidates(parent=live, limit=considered):
        pair = merged_pair(cand.raw)
        if pair is not None:
            tried.add(frozenset(pair))
    found: list[MergePair] = []
    ids = sorted(c for c in wins if wins[c])
    for i, first in enumerate(ids):
        for second in ids[i + 1 :]:
            a, b = wins[first], wins[second]
            if not (a - b) or not (b - a) or frozenset((first, second)) in tried:
                continue
            # The one with more wins is the base, the other's change goes on top.
            base, top = (first, second) if len(a) >= len(b) else (second, first)
            found.append(MergePair(base, top, a | b))
    return sorted(found, key=lambda p: (-len(p.wins), p.first, p.second))
