"""The report page: static HTML with inline SVG plots, every stored string escaped.

Nothing on the page runs: there is no script at all, and the Content-Security-Policy forbids
any (and any fetch), so even a mistake in escaping could not execute what a harness wrote.
Everything a proposer or a harness produced (rationales, patches, raw replies, outputs,
verdict notes) goes through :func:`esc` and sits in text content, never in an attribute
other than a daemon-made id or class.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable

from daemon.improve.replication import line as replication_line
from daemon.lineage.records import FINAL_STATES, Candidate, CandidateState, Decider, TreeEntry
from daemon.report.data import ReportData
from daemon.report.figures import Point
from daemon.verdict import Verdict

TEXT_LIMIT = 20_000
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'"

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;margin-top:1.6em}
ul.tree,ul.tree ul{list-style:none;padding-left:1.4em;border-left:1px dotted #aaa}
li.version>span.name{font-weight:600}li.current>span.name::after{content:" (live)";color:#070}
li.cand{color:#444}.accepted{color:#070}.rejected{color:#a00}.other{color:#a60}
figure.plot svg *{stroke-linejoin:round;stroke-linecap:butt}
figure.plot{margin:1em 0}figure.plot svg{max-width:100%;height:auto}
figcaption{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:2px 6px}
pre{background:#f6f6f6;padding:.6em;overflow:auto;max-height:30em;white-space:pre-wrap}
"""


def esc(value: object) -> str:
    """Text for HTML content or a quoted attribute; the only way data reaches the page."""
    return html.escape(str(value), quote=True)


def _clip(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f"\n... [{len(text) - TEXT_LIMIT} more characters not shown]"


def when(ts: float | None) -> str:
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _state_class(state: CandidateState) -> str:
    return state if state in FINAL_STATES else "other"


def _verdict_line(verdict: Verdict | None) -> str:
    return "no verdict yet" if verdict is None else verdict.line()


def decided(c: Candidate) -> str:
    """Who decided the candidate, and why, in words: the gates, or a person in review."""
    if c.state == CandidateState.AWAITING_REVIEW:
        return "passed every gate; awaiting review"
    if c.decided_by is Decider.PERSON and c.review is not None:
        verb = "approved" if c.state == CandidateState.ACCEPTED else "rejected"
        why = f": {c.review.reason}" if c.review.reason else ""
        return f"{verb} in review by {c.review.reviewer}{why}"
    if c.decided_by is Decider.GATES:
        return "decided by the gates"
    return "not decided yet"


def _candidate_item(data: ReportData, c: Candidate) -> str:
    became = data.promoted_to(c.id)
    arrow = f' &rarr; <a href="#{became.name}">{became.name}</a>' if became else ""
    failed = ", ".join(c.verdict.failed) if c.verdict else ""
    gate = f" &mdash; rejected by <b>{esc(failed)}</b>" if failed else ""
    base = f" built on c{c.base_candidate_id}" if c.base_candidate_id is not None else ""
    person = ""
    if c.decided_by is Decider.PERSON or c.state == CandidateState.AWAITING_REVIEW:
        person = f" &mdash; <span class='review'>{esc(decided(c))}</span>"
    return (
        f'<li class="cand {_state_class(c.state)}" data-candidate="c{c.id}" '
        f'data-decided-by="{esc(c.decided_by.value if c.decided_by else "")}">'
        f'<a href="#c{c.id}">c{c.id}</a>{base}: {esc(c.state)} at {esc(c.stage)}{gate}{person}'
        f"{arrow}"
    )


def _candidate_tree(data: ReportData, cands: list[Candidate]) -> list[str]:
    """A version's candidates nested by tree parent: a candidate built on an earlier
    candidate sits under it (the held-out test still compared it with the version)."""
    ids = {c.id for c in cands}
    kids: dict[int | None, list[Candidate]] = {}
    for c in cands:
        base = c.base_candidate_id if c.base_candidate_id in ids else None
        kids.setdefault(base, []).append(c)
    out: list[str] = []

    def emit(c: Candidate) -> None:
        out.append(_candidate_item(data, c))
        below = kids.get(c.id, [])
        if below:
            out.append("<ul>")
            for child in below:
                emit(child)
            out.append("</ul>")
        out.append("</li>")

    for c in kids.get(None, []):
        emit(c)
    return out


def tree(data: ReportData) -> str:
    """Versions nested by parent, each with its candidates (accepted and rejected), those
    nested by the candidate they were built on."""
    out: list[str] = ['<ul class="tree" id="lineage-tree">']
    depth = 0
    for entry in data.tree:
        while depth > entry.depth:
            out.append("</ul></li>")
            depth -= 1
        out.append(_version_item(data, entry))
        out.append("<ul>")
        out.extend(_candidate_tree(data, data.children(entry.version.id)))
        depth = entry.depth + 1
    while depth > 0:
        out.append("</ul></li>")
        depth -= 1
    out.append("</ul>")
    return "\n".join(out)


def _version_item(data: ReportData, entry: TreeEntry) -> str:
    v = entry.version
    live = " current" if entry.is_current else ""
    origin = f"from c{v.candidate_id}" if v.candidate_id else "seed"
    return (
        f'<li class="version{live}" id="{v.name}" data-version="{v.name}">'
        f'<span class="name">{v.name}</span> {origin}, {when(v.created)}'
    )


def figure(svg: str, caption: str, name: str) -> str:
    return (
        f'<figure class="plot" data-plot="{name}">{svg}'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def versions_table(pts: list[Point]) -> str:
    rows = [
        "<table id='figures'><tr><th>version</th><th>model</th><th>split</th><th>tasks</th>"
        "<th>accuracy</th><th>95% CI</th><th>tokens/solved</th><th>gap</th>"
        "<th>lines never run</th></tr>"
    ]
    for p in pts:
        tps = "-" if p.tokens_per_solved is None else f"{p.tokens_per_solved:.0f}"
        rows.append(
            f"<tr><td>{esc(p.version)}</td><td>{esc(p.model)}</td><td>{esc(p.split)}</td>"
            f"<td>{p.n}</td><td>{_pct(p.accuracy)}</td>"
            f"<td>{_pct(p.ci95[0])}&ndash;{_pct(p.ci95[1])}</td><td>{tps}</td>"
            f"<td>{p.verification_gap:+.1%}</td><td>{_pct(p.never_run)}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def _gates(verdict: Verdict) -> str:
    rows = ["<table><tr><th>gate</th><th>result</th><th>measured</th><th>threshold</th>"]
    rows[0] += "<th>note</th></tr>"
    for g in verdict.gates:
        rows.append(
            f"<tr><td>{esc(g.gate)}</td><td>{esc(g.mark)}</td><td>{esc(g.measured)}</td>"
            f"<td>{esc(g.threshold)}</td><td>{esc(g.note)}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def candidate_details(data: ReportData) -> str:
    out = []
    for c in reversed(data.candidates):
        parent = data.version(c.parent_version_id)
        built = f", built on c{c.base_candidate_id}" if c.base_candidate_id is not None else ""
        body = [
            f"<p>parent {esc(parent.name if parent else c.parent_version_id)}{built}, "
            f"source {esc(c.source)}, proposer {esc(c.proposer_model or '-')}, "
            f"{when(c.created)}: {esc(_verdict_line(c.verdict))}</p>",
            f"<p class='decided'>{esc(decided(c))}"
            + (f", {when(c.review.decided)}" if c.review and c.review.decided else "")
            + "</p>",
            f"<h4>Rationale</h4><pre class='rationale'>{esc(_clip(c.rationale))}</pre>",
        ]
        if c.verdict is not None:
            body.append(f"<p>{esc(c.verdict.reason)}</p>{_gates(c.verdict)}")
        rep = data.replications.get(c.id)
        if rep is not None:
            body.append(f"<p class='replication'>{esc(replication_line(rep))}</p>")
        text, label = (c.patch, "Patch") if c.patch else (c.raw, "Proposer's reply")
        body.append(f"<h4>{label}</h4><pre class='patch'>{esc(_clip(text))}</pre>")
        out.append(
            f'<details id="c{c.id}" class="{_state_class(c.state)}"><summary>c{c.id}: '
            f"{esc(c.state)} ({esc(_verdict_line(c.verdict))})</summary>{''.join(body)}</details>"
        )
    return "\n".join(out) or "<p>No candidate yet.</p>"


def replications(data: ReportData) -> str:
    """Each promotion's held-out gain beside its replication on fresh tasks."""
    rows = []
    for r in reversed(list(data.replications.values())):
        version = data.version(r.version_id)
        parent = data.version(r.parent_version_id)
        test, result = r.test, r.result
        rows.append(
            f"<tr><td>c{r.candidate_id}</td><td>{esc(parent.name if parent else '-')} &rarr; "
            f"{esc(version.name if version else '-')}</td>"
            f"<td>{esc(test.text() if test else '-')}</td>"
            f"<td>{esc(result.text() if result else r.state)}</td>"
            f"<td>{esc(r.error or '')}</td></tr>"
        )
    if not rows:
        return "<p>No promotion replicated yet.</p>"
    return (
        "<p>After each promotion, the promoted version and its parent on a fresh draw of "
        "held-out copies (another seed, tasks the test did not run): gain in points with "
        "Newcombe's paired 95% interval. A check of the test; it changes no verdict.</p>"
        "<table><tr><th>candidate</th><th>versions</th><th>held-out test</th>"
        "<th>replication</th><th>note</th></tr>" + "".join(rows) + "</table>"
    )


def history(data: ReportData) -> str:
    items = [
        f"<li>{when(h.ts)}: {esc(h.version_name)} live ({esc(h.summary)})</li>"
        for h in data.history
    ]
    return "<ul>" + "".join(items) + "</ul>"


def document(title: str, sections: Iterable[tuple[str, str, str]]) -> str:
    """The page: ``sections`` are ``(id, heading, already-escaped HTML body)``."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
    ]
    for section_id, heading, body in sections:
        parts.append(f'<section id="{section_id}"><h2>{esc(heading)}</h2>{body}</section>')
    parts.append("</body></html>")
    return "\n".join(parts)
