"""The archive the proposer learns from, rendered: earlier candidates, what each changed,
what came of it.

Entries arrive as plain data (:class:`ArchiveEntry`) built by :mod:`daemon.improve.briefing`,
the one place that decides what the proposer may know of a candidate's outcome (the
information rule): before the held-out stage its stage and reason, from the held-out stage on
only "promoted" or "not promoted". This module only renders and selects them within a token
budget: the live version's own history first, then candidates of the live version, those
that got further, recent ones; a patch proposed again is one entry with a count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from daemon.evaluation.report import EvalReport

# A rough, generous conversion for the budget: English runs ~4 characters a token, code ~3.
CHARS_PER_TOKEN = 3


@dataclass(frozen=True)
class ArchiveEntry:
    """One earlier candidate as the proposer may see it.

    ``outcome`` is the information rule's answer (:func:`daemon.improve.briefing.outcome`);
    ``smoke``/``dev``/``parent_dev`` are smoke- and dev-split reports only.
    """

    candidate_id: int
    source: str
    rationale: str
    patch: str
    raw: str
    outcome: str
    parent_name: str
    in_live_history: bool = False
    on_live_parent: bool = False
    smoke: EvalReport | None = None
    dev: EvalReport | None = None
    parent_dev: EvalReport | None = None
    repeats: list[int] = field(default_factory=list)
    base_id: int | None = None  # the earlier candidate it was built on (its tree parent)


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


def _dev_lines(entry: ArchiveEntry, full: bool = False) -> list[str]:
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
    shown = len(dev.tasks) if full else 4
    if lost:
        out.append("  newly failed: " + ", ".join(t.id for t in lost[:shown]))
        t = lost[0]
        why = t.error or _clip(t.detail, 120) or "wrong answer"
        out.append(f"    {t.id}: {why}; output {_clip(json.dumps(t.output, default=str), 120)}")
        if t.transcript:
            out.append(f"    transcript: {_clip(json.dumps(t.transcript[-1], default=str), 200)}")
    if won:
        out.append("  newly solved: " + ", ".join(t.id for t in won[:shown]))
    if full:
        still = [t for t in dev.tasks if not t.passed and t not in lost]
        if still:
            out.append("  still failed: " + ", ".join(t.id for t in still))
    return out


def render_entry(entry: ArchiveEntry, full: bool = False) -> str:
    """One entry; ``full``: the whole diff and every dev task that changed (the text
    protocol's capable proposers), else a few changed lines (the small models')."""
    again = f", proposed {len(entry.repeats) + 1} times" if entry.repeats else ""
    on = entry.parent_name if entry.base_id is None else f"{entry.parent_name} via c{entry.base_id}"
    lines = [f"c{entry.candidate_id} on {on} ({entry.source}{again}): {entry.outcome}"]
    if entry.rationale.strip():
        lines.append(f"  rationale: {_clip(entry.rationale, 160)}")
    if entry.patch and full:
        lines.append("  diff from its version:")
        lines.extend(f"    {line}" for line in entry.patch.splitlines())
    elif entry.patch:
        lines.append("  change:")
        lines.extend(_changed_lines(entry.patch))
    elif entry.raw.strip():
        lines.append(f"  reply: {_clip(entry.raw, 400 if full else 160)}")
    lines.extend(_dev_lines(entry, full))
    return "\n".join(lines)


def relevance(entry: ArchiveEntry, rank: int) -> float:
    """Higher is shown first: the live version's history, its own candidates, candidates
    that got further, recent ones."""
    score = 1.0 / (1 + rank / 5)
    if entry.in_live_history:
        score += 4
    if entry.on_live_parent:
        score += 2
    if entry.dev is not None:
        score += 1
    elif entry.smoke is not None:
        score += 0.5
    return score + 0.3 * min(len(entry.repeats), 3)


def select(
    entries: list[ArchiveEntry], scores: list[float], budget_tokens: int, full: bool = False
) -> list[ArchiveEntry]:
    """The most relevant entries that fit the budget, oldest first."""
    chosen: list[tuple[int, ArchiveEntry]] = []
    left = budget_tokens * CHARS_PER_TOKEN
    order = sorted(range(len(entries)), key=lambda i: -scores[i])
    for i in order:
        size = len(render_entry(entries[i], full)) + 2
        if size <= left:
            chosen.append((i, entries[i]))
            left -= size
    return [e for _, e in sorted(chosen, key=lambda pair: pair[1].candidate_id)]


def render(entries: list[ArchiveEntry], full: bool = False) -> str:
    return "\n\n".join(render_entry(e, full) for e in entries) or "nothing tried yet"


def section(
    entries: list[ArchiveEntry], *, max_entries: int, budget_tokens: int, full: bool = False
) -> str:
    """The archive section of the proposer's prompt: the ``max_entries`` most relevant of
    ``entries`` (newest last) that fit ``budget_tokens`` (``full``: whole diffs)."""
    if max_entries == 0 or budget_tokens == 0:
        return "not shown (the policy's [proposer] verdicts_shown or archive_tokens is 0)"
    scores = [relevance(e, rank) for rank, e in enumerate(entries)]
    ranked = sorted(range(len(entries)), key=lambda i: -scores[i])[:max_entries]
    kept = sorted(ranked)
    picked = select([entries[i] for i in kept], [scores[i] for i in kept], budget_tokens, full)
    return render(picked, full)
