"""The report's plots, each a function from report data to an inline SVG string.

Every label drawn is made by the daemon (version names, model strings from the policy,
numbers); nothing a harness wrote is plotted. Empty inputs still give a drawn plot saying
there is nothing to show yet, so the page always has the same panels.
"""

from __future__ import annotations

import datetime as dt

from matplotlib.axes import Axes

from daemon.report.data import Spend
from daemon.report.figures import Point, main_split, models, series
from daemon.report.sequential import SequentialPath
from daemon.report.svg import LOCK, new_figure, to_svg

PURPOSES = ("solve", "propose", "judge")


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666")
    ax.set_xticks([])
    ax.set_yticks([])


def _versions_axis(ax: Axes, names: list[str]) -> None:
    ax.set_xticks(range(len(names)), names, rotation=30 if len(names) > 8 else 0)
    ax.set_xlim(-0.5, max(len(names) - 0.5, 0.5))
    ax.grid(axis="y", alpha=0.3)


def _finish(ax: Axes, names: list[str], drawn: bool, ylabel: str, empty: str) -> None:
    """Version ticks, label and legend on a drawn plot; the empty note otherwise."""
    if not drawn:
        _empty(ax, empty)
        return
    _versions_axis(ax, names)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.legend(fontsize=7, loc="best")


def accuracy(pts: list[Point], names: list[str]) -> str:
    with LOCK:
        fig = new_figure()
        ax = fig.add_subplot()
        split = main_split(pts)
        drawn = False
        for model in models(pts):
            line = series(pts, model, split)
            if not line:
                continue
            xs = [names.index(p.version) for p in line]
            ax.plot(xs, [p.accuracy for p in line], marker="o", label=f"{model} (n={line[-1].n})")
            ax.fill_between(xs, [p.ci95[0] for p in line], [p.ci95[1] for p in line], alpha=0.2)
            drawn = True
        _finish(ax, names, drawn, f"{split} accuracy (95% CI)", "no finished evaluation yet")
        ax.set_ylim(0, 1)
        return to_svg(fig, "accuracy")


def tokens_per_solved(pts: list[Point], names: list[str]) -> str:
    with LOCK:
        fig = new_figure()
        ax = fig.add_subplot()
        split = main_split(pts)
        drawn = False
        for model in models(pts):
            line = [p for p in series(pts, model, split) if p.tokens_per_solved is not None]
            if line:
                xs = [names.index(p.version) for p in line]
                ax.plot(xs, [p.tokens_per_solved or 0 for p in line], marker="s", label=model)
                drawn = True
        _finish(ax, names, drawn, f"tokens per solved task ({split})", "nothing solved yet")
        ax.set_ylim(bottom=0)
        return to_svg(fig, "tokens")


def honesty_and_dead_code(pts: list[Point], names: list[str]) -> str:
    with LOCK:
        fig = new_figure(width=7.5, height=3.8)
        gap, dead = fig.subplots(1, 2)
        split = main_split(pts)
        for model in models(pts):
            line = series(pts, model, split)
            xs = [names.index(p.version) for p in line]
            gap.plot(xs, [p.verification_gap for p in line], marker="o", label=model)
            dead.plot(xs, [p.never_run for p in line], marker="^", label=model)
        for ax, label in (
            (gap, "verification gap\n(claimed - verified success)"),
            (dead, "harness lines never run"),
        ):
            _finish(ax, names, bool(pts), label, "no finished evaluation yet")
        gap.axhline(0, color="#888", linewidth=0.8)
        fig.tight_layout()
        return to_svg(fig, "honesty")


def panel_matrix(pts: list[Point], names: list[str]) -> str:
    with LOCK:
        fig = new_figure(width=7.5, height=max(2.2, 0.5 + 0.45 * len(models(pts))))
        ax = fig.add_subplot()
        cols = models(pts)
        split = main_split(pts)
        if not cols:
            _empty(ax, "no finished evaluation yet")
            return to_svg(fig, "panel")
        grid = [[float("nan")] * len(names) for _ in cols]
        for p in pts:
            if p.split == split:
                grid[cols.index(p.model)][names.index(p.version)] = p.accuracy
        # A mesh, not imshow: imshow embeds a raster image, which the SVG check refuses.
        ax.pcolormesh(
            [j - 0.5 for j in range(len(names) + 1)],
            [i - 0.5 for i in range(len(cols) + 1)],
            grid,
            vmin=0,
            vmax=1,
            cmap="viridis",
        )
        ax.invert_yaxis()
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                text = "-" if value != value else f"{value:.0%}"
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color="w")
        ax.set_xticks(range(len(names)), names)
        ax.set_yticks(range(len(cols)), cols, fontsize=8)
        # No colour bar (matplotlib rasterises it); each cell is labelled instead.
        ax.set_title(f"{split} accuracy per version and model", fontsize=10)
        return to_svg(fig, "panel")


def sequential_path(path: SequentialPath | None) -> str:
    with LOCK:
        fig = new_figure()
        ax = fig.add_subplot()
        if path is None or not path.steps:
            _empty(ax, "no candidate has reached the held-out test yet")
            return to_svg(fig, "sequential")
        xs = [s.done for s in path.steps]
        ax.step(xs, [s.statistic for s in path.steps], where="post", marker=".", label="test")
        ax.axhline(
            path.threshold, color="C3", linestyle="--", label=f"threshold {path.threshold:.4g}"
        )
        ax.set_yscale("log")
        ax.set_xlim(0, max(path.total, 1))
        ax.set_xlabel(f"paired held-out tasks (of {path.total}), model {path.model}")
        ax.set_ylabel(path.statistic, fontsize=9)
        counts = ax.twinx()
        counts.plot(xs, [s.wins for s in path.steps], color="C2", alpha=0.6, label="newly solved")
        counts.plot(xs, [s.losses for s in path.steps], color="C1", alpha=0.6, label="newly failed")
        counts.set_ylabel("tasks", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        counts.legend(fontsize=7, loc="upper right")
        ax.set_title(f"candidate c{path.candidate_id}: {path.decision}", fontsize=10)
        return to_svg(fig, "sequential")


def spend(data: Spend) -> str:
    with LOCK:
        fig = new_figure()
        ax = fig.add_subplot()
        if not data.buckets:
            _empty(ax, "no model call recorded yet")
            return to_svg(fig, "spend")
        last = max(b for b, _, _ in data.buckets)
        for purpose in sorted({p for _, p, _ in data.buckets}, key=_purpose_order):
            per = [0] * (last + 1)
            for bucket, p, tokens in data.buckets:
                if p == purpose:
                    per[bucket] += tokens
            total = 0
            cumulative = []
            for tokens in per:
                total += tokens
                cumulative.append(total)
            hours = [(i + 1) * data.size / 3600 for i in range(last + 1)]
            ax.plot(hours, cumulative, label=purpose)
        ax.set_ylabel("tokens spent (cumulative)")
        first = dt.datetime.fromtimestamp(data.start, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        ax.set_xlabel(f"hours since the first model call ({first})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
        return to_svg(fig, "spend")


def _purpose_order(purpose: str) -> int:
    return PURPOSES.index(purpose) if purpose in PURPOSES else len(PURPOSES)
