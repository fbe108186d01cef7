"""The archive the proposer learns from: earlier candidates, what each changed, what came of it.

What the proposer may know of a candidate's outcome is decided by :func:`proposer_verdict`
and nowhere else. Before the held-out stage, its stage and reason (parse, static, smoke and
dev-screen outcomes: dev-split data). From the held-out stage on, only "promoted" or "not
promoted": the lineage-wide bound on false promotions holds only if held-out outcomes reach
the proposer as that one bit, so no gate, figure, task count, timing or later stage of it
is shown. Held-out reports are never read here (``results.proposer_reports`` reads the
smoke and dev splits only).

Each entry holds the candidate's rationale, the lines its patch changed, that verdict, and
its dev-split results against its parent's (tasks it newly failed or solved, with a line of
transcript). Entries are chosen by relevance within a token budget: the live version's own
history first, then candidates of the live version, those that got further, recent ones;
a patch proposed again is one entry with a count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field

from daemon.evaluation import results
from daemon.evaluation.report import EvalReport
from daemon.lineage import Candidate, Lineage, Version
from daemon.store import Store

HELDOUT_STAGES = frozenset({"heldout", "panel", "done", "promoted"})
# A rough, generous conversion for the budget: English runs ~4 characters a token, code ~3.
CHARS_PER_TOKEN = 3
_DUPLICATE = re.compile(r"^duplicate of c(\d+)")


def reached_heldout(cand: Candidate, heldout_ids: Collection[int]) -> bool:
    """Whether the candidate got to the held-out stage (ran on it, or got a verdict there)."""
    if cand.id in heldout_ids or cand.state == "accepted" or cand.stage in HELDOUT_STAGES:
        return True
    return cand.verdict is not None and cand.verdict.stage in HELDOUT_STAGES


def proposer_verdict(cand: Candidate, reached: bool) -> str:
    """A candidate's outcome as the proposer may see it (``reached``: it got to held-out)."""
    if reached:
        return "promoted" if cand.state == "accepted" else "not promoted"
    verdict = cand.verdict
    if verdict is None:
        return f"{cand.state} at {cand.stage}" if cand.stage else cand.state
    notes = [g.note for g in verdict.gates if g.note and not g.skipped]
    tail = f" ({'; '.join(notes)})" if notes else ""
    return f"rejected at {verdict.stage}: {verdict.reason}{tail}"


def duplicate_of(cand: Candidate) -> int | None:
    """The earlier candidate this one repeated, if it was rejected as a duplicate."""
    if cand.verdict is None or cand.verdict.stage != "static":
        return None
    match = _DUPLICATE.match(cand.verdict.reason)
    return int(match[1]) if match else None


@dataclass
class Entry:
    candidate: Candidate
    verdict: str
    parent_name: str
    smoke: EvalReport | None = None
    dev: EvalReport | None = None
    parent_dev: EvalReport | None = None
    repeats: list[int] = field(default_factory=list)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _changed_lines(patch: str, limit: int = 6) -> list[str]:
    lines = [
        line
        for line in patch.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    shown = [f"    {_clip(line, 110)}" for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"    … {len(lines) - limit} more changed lines")
    return shown


def _dev_lines(entry: Entry) -> list[str]:
    dev, parent = entry.dev, entry.parent_dev
    if dev is None:
        smoke = entry.smoke
        failed = [t for t in smoke.tasks if t.error] if smoke is not None else []
        if failed:
            t = failed[0]
            return [f"  smoke task {t.id}: {t.error}: {_clip(t.detail, 200)}"]
        return []
    solved = sum(t.passed for t in dev.tasks)
    line = f"  dev: {solved}/{dev.n} solved, {dev.tokens_per_task:.0f} tokens/task"
    if parent is None:
        return [line]
    line += (
        f" (parent {sum(t.passed for t in parent.tasks)}/{parent.n}, "
        f"{parent.tokens_per_task:.0f} tokens/task)"
    )
    before = parent.by_id()
    lost = [t for t in dev.tasks if not t.passed and t.id in before and before[t.id].passed]
    won = [t for t in dev.tasks if t.passed and t.id in before and not before[t.id].passed]
    out = [line]
    if lost:
        out.append("  newly failed: " + ", ".join(t.id for t in lost[:4]))
        t = lost[0]
        why = t.error or _clip(t.detail, 120) or "wrong answer"
        out.append(f"    {t.id}: {why}; output {_clip(json.dumps(t.output, default=str), 120)}")
        if t.transcript:
            out.append(f"    transcript: {_clip(json.dumps(t.transcript[-1], default=str), 200)}")
    if won:
        out.append("  newly solved: " + ", ".join(t.id for t in won[:4]))
    return out


def render_entry(entry: Entry) -> str:
    cand = entry.candidate
    again = f", proposed {len(entry.repeats) + 1} times" if entry.repeats else ""
    lines = [f"c{cand.id} on {entry.parent_name} ({cand.source}{again}): {entry.verdict}"]
    if cand.rationale.strip():
        lines.append(f"  rationale: {_clip(cand.rationale, 160)}")
    if cand.patch:
        lines.append("  change:")
        lines.extend(_changed_lines(cand.patch))
    elif cand.raw.strip():
        lines.append(f"  reply: {_clip(cand.raw, 160)}")
    lines.extend(_dev_lines(entry))
    return "\n".join(lines)


def relevance(entry: Entry, live: Version, lineage_ids: Collection[int], rank: int) -> float:
    """Higher is shown first: the live version's history, its own candidates, candidates
    that got further, recent ones."""
    cand = entry.candidate
    score = 1.0 / (1 + rank / 5)
    if cand.state == "accepted" and cand.id in lineage_ids:
        score += 4
    if cand.parent_version_id == live.id:
        score += 2
    if entry.dev is not None:
        score += 1
    elif entry.smoke is not None:
        score += 0.5
    return score + 0.3 * min(len(entry.repeats), 3)


def select(entries: list[Entry], scores: list[float], budget_tokens: int) -> list[Entry]:
    """The most relevant entries that fit the budget, oldest first."""
    chosen: list[tuple[int, Entry]] = []
    left = budget_tokens * CHARS_PER_TOKEN
    order = sorted(range(len(entries)), key=lambda i: -scores[i])
    for i in order:
        size = len(render_entry(entries[i])) + 2
        if size <= left:
            chosen.append((i, entries[i]))
            left -= size
    return [e for _, e in sorted(chosen, key=lambda pair: pair[1].candidate.id)]


def render(entries: list[Entry]) -> str:
    return "\n\n".join(render_entry(e) for e in entries) or "nothing tried yet"


def build(
    lineage: Lineage,
    store: Store,
    live: Version,
    *,
    heldout_ids: Collection[int],
    model: str,
    max_entries: int,
    budget_tokens: int,
    considered: int = 200,
) -> str:
    """The archive section of the proposer's prompt (blocking: call it in a worker thread)."""
    if max_entries == 0 or budget_tokens == 0:
        return "not shown (the policy's [proposer] verdicts_shown or archive_tokens is 0)"
    cands = lineage.candidates(limit=considered)
    repeats: dict[int, list[int]] = {}
    originals: list[Candidate] = []
    for cand in cands:
        first = duplicate_of(cand)
        if first is not None and any(c.id == first for c in cands):
            repeats.setdefault(first, []).append(cand.id)
        else:
            originals.append(cand)
    names = {v.id: v.name for v in lineage.versions()}
    ancestry = {v.candidate_id for v in _ancestors(lineage, live) if v.candidate_id is not None}
    reports = results.proposer_reports(store, [c.id for c in originals])
    parents: dict[int, EvalReport | None] = {}
    entries: list[Entry] = []
    for cand in originals:
        pid = cand.parent_version_id
        if pid not in parents:
            parents[pid] = _latest_dev(store, pid, model)
        found = reports.get(cand.id, {})
        entries.append(
            Entry(
                candidate=cand,
                verdict=proposer_verdict(cand, reached_heldout(cand, heldout_ids)),
                parent_name=names.get(pid, f"version {pid}"),
                smoke=found.get("smoke"),
                dev=found.get("dev"),
                parent_dev=parents[pid],
                repeats=repeats.get(cand.id, []),
            )
        )
    scores = [relevance(e, live, ancestry, rank) for rank, e in enumerate(entries)]
    ranked = sorted(range(len(entries)), key=lambda i: -scores[i])[:max_entries]
    kept = [entries[i] for i in sorted(ranked)]
    return render(select(kept, [scores[entries.index(e)] for e in kept], budget_tokens))


def _latest_dev(store: Store, version_id: int, model: str) -> EvalReport | None:
    """The version's latest finished dev-split report with ``model`` (its baseline)."""
    runs = [
        r
        for r in results.runs_of(store, version_id=version_id)
        if r.split == "dev" and r.model == model and r.state == "done" and r.report is not None
    ]
    return runs[-1].report if runs else None


def _ancestors(lineage: Lineage, live: Version) -> list[Version]:
    by_id = {v.id: v for v in lineage.versions()}
    chain, cursor = [], by_id.get(live.id)
    while cursor is not None:
        chain.append(cursor)
        cursor = by_id.get(cursor.parent_id) if cursor.parent_id is not None else None
    return chain
