"""``build_report``: the whole page from a store; ``write_report``: the same, to a file.

The one way into the plots: importing this module loads matplotlib (the ``report`` extra),
and says so when it is not installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from daemon.config import extras

try:
    from daemon.report import page, plots
except ImportError:
    extras.require("report", "the lineage report (harnessd report, harnessctl report)")
    raise  # installed, yet it does not import: matplotlib's own error says why
from daemon.evaluation.report import Split
from daemon.improve.replication import line as replication_line
from daemon.lineage import CandidateState
from daemon.report.data import ReportData, gather
from daemon.report.figures import points
from daemon.report.sequential import SequentialPath, chosen
from daemon.report.summary import ReportSummary
from daemon.store import Store

OUTPUT_PREVIEW = 300
PLOTS = ("accuracy", "tokens", "honesty", "panel", "sequential", "spend")


def _preview(output: object) -> str:
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    return text if len(text) <= OUTPUT_PREVIEW else text[:OUTPUT_PREVIEW] + "..."


def _tasks_of(data: ReportData, path: SequentialPath) -> str:
    """The chosen candidate's held-out tasks, its outputs escaped like every harness text."""
    run = next(
        r for r in data.runs if r.candidate_id == path.candidate_id and r.split == Split.HELDOUT
    )
    rows = ["<table id='sequential-tasks'><tr><th>task</th><th>verified</th><th>claimed</th>"]
    rows[0] += "<th>output</th><th>verifier</th></tr>"
    for t in run.report.tasks:
        rows.append(
            f"<tr><td>{page.esc(t.id)}</td><td>{'pass' if t.passed else 'fail'}</td>"
            f"<td>{'yes' if t.claimed_success else 'no'}</td>"
            f"<td><code>{page.esc(_preview(t.output))}</code></td>"
            f"<td>{page.esc(t.detail[:OUTPUT_PREVIEW])}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def render(data: ReportData, candidate_id: int | None = None) -> tuple[str, SequentialPath | None]:
    names = [v.name for v in data.versions]
    pts = points(data)
    path = chosen(data, candidate_id)
    live = data.current.name if data.current else "none"
    accepted = sum(c.state == CandidateState.ACCEPTED for c in data.candidates)
    summary = (
        f"<p>Generated {page.when(data.generated)}. Live version <b>{live}</b>; "
        f"{len(data.versions)} versions, {len(data.candidates)} candidates ({accepted} "
        f"accepted), {len(data.runs)} finished evaluations.</p>"
    )
    seq_caption = (
        f"The sequential held-out test of c{path.candidate_id} ({path.statistic} after each "
        f"paired task; promoted once it reaches 1/alpha = {path.threshold:.4g} with the honesty "
        "gate passing, or stopped early for futility)."
        if path
        else "The sequential held-out test of a candidate (none has reached it yet)."
    )
    figures = [
        page.figure(
            plots.accuracy(pts, names), "Accuracy per version, 95% Wilson band.", "accuracy"
        ),
        page.figure(plots.tokens_per_solved(pts, names), "Tokens per solved task.", "tokens"),
        page.figure(
            plots.honesty_and_dead_code(pts, names),
            "Verification gap (claimed minus verified success) and harness lines never run.",
            "honesty",
        ),
        page.figure(plots.panel_matrix(pts, names), "Accuracy per version and model.", "panel"),
        page.figure(plots.sequential_path(path), seq_caption, "sequential"),
        page.figure(
            plots.spend(data.spend), "The loop's token spend over time, by purpose.", "spend"
        ),
    ]
    sections = [
        ("summary", "Summary", summary),
        ("lineage", "Lineage", page.tree(data)),
        ("plots", "Figures", "\n".join(figures)),
        ("versions", "Figures per version", page.versions_table(pts)),
    ]
    if path is not None:
        sections.append(
            ("sequential-detail", f"Held-out tasks of c{path.candidate_id}", _tasks_of(data, path))
        )
    sections += [
        ("replications", "Replications of promotions", page.replications(data)),
        ("candidates", "Candidates", page.candidate_details(data)),
        ("history", "Live version history", page.history(data)),
    ]
    return page.document("harnessd lineage report", sections), path


def build_report(store: Store, candidate_id: int | None = None) -> str:
    """The report page for the state in ``store`` (blocking: call it from a worker thread)."""
    return render(gather(store), candidate_id)[0]


def write_report(store: Store, out: Path, candidate_id: int | None = None) -> ReportSummary:
    """Write the report to ``out`` atomically (a reader never sees half a page)."""
    data = gather(store)
    text, path = render(data, candidate_id)
    out = out.resolve()
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return ReportSummary(
        path=str(out),
        bytes=len(text.encode()),
        versions=[v.name for v in data.versions],
        candidates=len(data.candidates),
        plots=list(PLOTS),
        sequential_candidate=path.candidate_id if path else None,
        replications=[
            f"c{r.candidate_id}: {replication_line(r)}" for r in data.replications.values()
        ],
    )
