"""The report page: every version and candidate, six plots, and nothing a harness wrote can
run (checked on the page's source here, on Chromium's DOM in test_report_in_chromium)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pagecheck import Page, active
from world import ALPHAS, HOSTILE

from daemon.errors import ConfigError
from daemon.improve import alpha_ledger
from daemon.report import candidate_arg
from daemon.report.build import PLOTS, write_report
from daemon.report.svg import UnsafeSvg, clean, new_figure, to_svg
from daemon.store import Store

pytestmark = pytest.mark.unit


def test_hostile_rationale_output_diff_and_notes_stay_inert_text(world_page: str) -> None:
    text = world_page
    page = Page(text)
    assert active(page) == []
    # Shown, not dropped: the hostile string is text of the page, intact, many times over
    # (rationales, the diff, the proposer's reply, verdict notes, task outputs and details).
    shown = "".join(page.text)
    assert shown.count(HOSTILE) >= 12
    assert "<script" not in text.lower() and "<svg onload" not in text.lower()
    meta = page.tags("meta")
    assert any(
        "script-src" not in (m.get("content") or "")
        and "default-src 'none'" in (m.get("content") or "")
        for m in meta
        if m.get("http-equiv")
    )


def test_every_version_candidate_and_plot_is_on_the_page(world_page: str) -> None:
    page = Page(world_page)
    assert page.attr("li", "data-version") == ["v0001", "v0002", "v0003"]
    assert sorted(page.attr("li", "data-candidate")) == ["c1", "c2", "c3", "c4"]
    assert page.attr("figure", "data-plot") == list(PLOTS)
    assert len(page.tags("svg")) == len(PLOTS)
    assert all(n > 20 for n in page.plot_paths.values()), page.plot_paths
    ids = [a["id"] for _, a in page.elements if a.get("id")]
    assert len(ids) == len(set(ids)), "element ids repeat across the inline SVGs"
    rejected = "".join(page.text)
    assert "rejected by accuracy, honesty" in rejected


def test_a_hostile_plot_label_cannot_leave_its_svg_text() -> None:
    fig = new_figure()
    fig.add_subplot().set_title(HOSTILE)
    svg = to_svg(fig, "t")
    assert svg.count("</svg>") == 1 and svg.endswith("</svg>")
    assert "alert" not in svg and "<script" not in svg


@pytest.mark.parametrize(
    "markup",
    [
        "<script>alert(1)</script>",
        '<path onload="alert(1)"/>',
        '<a xlink:href="javascript:alert(1)">x</a>',
        '<image href="http://example.invalid/x.png"/>',
        "<foreignObject><div>x</div></foreignObject>",
        '<path style="fill:url(http://example.invalid/#x)"/>',
    ],
)
def test_svg_with_active_or_fetching_markup_is_refused(markup: str) -> None:
    with pytest.raises(UnsafeSvg):
        clean(f'<svg xmlns="http://www.w3.org/2000/svg">{markup}</svg>', "t")


def test_an_empty_state_still_gives_every_plot(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    try:
        summary = write_report(store, tmp_path / "r.html")
    finally:
        store.close()
    page = Page((tmp_path / "r.html").read_text())
    assert page.attr("figure", "data-plot") == list(PLOTS)
    assert summary.versions == [] and summary.sequential_candidate is None


def test_candidate_argument_names_the_flag() -> None:
    assert candidate_arg("c12") == 12 and candidate_arg("7") == 7 and candidate_arg(None) is None
    with pytest.raises(ConfigError, match="--candidate 'x1'"):
        candidate_arg("x1")


def test_sequential_path_is_the_gates_test(world_store: Store) -> None:
    from daemon.report.data import gather
    from daemon.report.sequential import chosen

    data = gather(world_store)
    path = chosen(data, 3)
    assert path is not None and path.candidate_id == 3 and path.total == 12
    # 1/alpha at c3's share of the lineage's alpha, as the alpha ledger recorded it (its
    # verdict's gates hold other thresholds).
    test = alpha_ledger.test_of(world_store, 3)
    assert test is not None and test.alpha == ALPHAS[3]
    assert path.threshold == pytest.approx(1 / ALPHAS[3])
    # c3 against v0002 (solved {0,2,4,6,8,9}): c3 solves {0,1,2,4,6,8,9,10}: 2 wins, 0 losses
    # in 12 tasks, too few to ever reach 1/alpha: the test stops early, rejecting.
    last = path.steps[-1]
    assert last.decision == "reject" and last.done < 12 and last.losses == 0, path.steps
    assert [s.done for s in path.steps] == list(range(1, last.done + 1))
    assert all(1.0 <= s.statistic < path.threshold for s in path.steps), path.steps
    assert path.steps[0].decision == "undecided"
    assert chosen(data, 999) is None


def _harnessd(tmp_path: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "harnessd.toml"
    config.write_text(f'state_dir = "{state}"\n')
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(config), "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_harnessd_report_says_what_to_do_when_there_is_no_state(tmp_path: Path) -> None:
    done = _harnessd(tmp_path, tmp_path / "state")
    assert done.returncode == 2
    assert "no state database at" in done.stderr and "harnessd serve" in done.stderr
