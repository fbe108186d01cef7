"""Per-version figures from the stored evaluation reports: one point per (version, model,
split), taken from the version's own baseline runs or, failing those, from the runs of the
candidate it was promoted from."""

from __future__ import annotations

from dataclasses import dataclass

from daemon.evaluation.report import EvalReport, Split
from daemon.evaluation.results import FinishedRun
from daemon.report.data import ReportData

SPLITS = (Split.HELDOUT, Split.DEV)


@dataclass(frozen=True)
class Point:
    version: str
    model: str
    split: Split
    n: int
    accuracy: float
    ci95: tuple[float, float]
    tokens_per_solved: float | None
    verification_gap: float
    never_run: float  # fraction of harness lines no task executed

    @classmethod
    def of(cls, version: str, report: EvalReport) -> Point:
        return cls(
            version=version,
            model=report.model,
            split=report.split,
            n=report.n,
            accuracy=report.accuracy,
            ci95=report.accuracy_ci95,
            tokens_per_solved=report.tokens_per_solved,
            verification_gap=report.verification_gap,
            never_run=1.0 - report.coverage.executed_fraction,
        )


def _best(runs: list[FinishedRun]) -> FinishedRun:
    """The most complete run, the newest among equals (runs are oldest first)."""
    return max(reversed(runs), key=lambda r: r.report.n)


def points(data: ReportData) -> list[Point]:
    """Version order (id), then model, then split."""
    out: list[Point] = []
    for version in data.versions:
        own = [r for r in data.runs if r.version_id == version.id and r.candidate_id is None]
        promoted = [
            r
            for r in data.runs
            if version.candidate_id is not None and r.candidate_id == version.candidate_id
        ]
        keys = sorted({(r.model, r.split) for r in own + promoted if r.split in SPLITS})
        for model, split in keys:
            mine = [r for r in own if (r.model, r.split) == (model, split) and r.report.n]
            theirs = [r for r in promoted if (r.model, r.split) == (model, split) and r.report.n]
            if mine or theirs:
                out.append(Point.of(version.name, _best(mine or theirs).report))
    return out


def models(pts: list[Point]) -> list[str]:
    return sorted({p.model for p in pts})


def series(pts: list[Point], model: str, split: Split) -> list[Point]:
    return [p for p in pts if p.model == model and p.split == split]


def main_split(pts: list[Point]) -> Split:
    """Held-out when any version has held-out figures; dev otherwise (an early lineage)."""
    return Split.HELDOUT if any(p.split == Split.HELDOUT for p in pts) else Split.DEV
