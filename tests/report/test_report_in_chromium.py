"""The report opened in headless Chromium: every plot drawn, every version in the tree, and
the DOM Chromium built from hostile harness text holds no element or handler that could run.

The first test reads a recorded lineage (through ``harnessd report``, no daemon); the second
is a real run on the embedded model, reported through ``harnessctl report`` while the
daemon runs and ``harnessd report`` after it stopped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from browser import load
from pagecheck import Page, active
from PIL import Image
from world import HOSTILE

from daemon.control.protocol import ControlError
from daemon.report.build import PLOTS
from tests.daemon_process import start_daemon
from tests.improve import patches
from tests.support.wait import wait_for_decided

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _drawn(shot: Path) -> int:
    """Strongly coloured pixels in a screenshot: plot lines, bands and cells, not text."""
    data = Image.open(shot).convert("RGB").reduce(2).tobytes()
    pixels = (data[i : i + 3] for i in range(0, len(data), 3))
    return sum(1 for p in pixels if max(p) - min(p) > 90)


def _check_rendered(
    chromium: Path, report: Path, work: Path, versions: list[str], drawn: int = 2000
) -> Page:
    loaded = load(chromium, report, work)
    dom = Page(loaded.dom)
    assert active(dom) == [], active(dom)
    assert dom.attr("figure", "data-plot") == list(PLOTS)
    # Chromium parsed each plot as SVG with its drawing in it (paths, not an empty shell).
    assert len(dom.tags("svg")) == len(PLOTS)
    assert all(n >= 10 for n in dom.plot_paths.values()), dom.plot_paths
    assert dom.attr("li", "data-version") == versions
    assert _drawn(loaded.screenshot) > drawn
    return dom


def _harnessd_report(config: Path, out: Path, *extra: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "--config",
            str(config),
            "report",
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_recorded_lineage_report_renders_with_hostile_text_inert(
    chromium: Path, world_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "harnessd.toml"
    config.write_text(f'state_dir = "{world_dir / "state"}"\n')
    out = tmp_path / "report.html"
    said = _harnessd_report(config, out, "--candidate", "c2")
    assert "3 versions, 4 candidates, sequential test of c2" in said
    dom = _check_rendered(chromium, out, tmp_path, ["v0001", "v0002", "v0003"])
    assert "".join(dom.text).count(HOSTILE) >= 12


# Small splits so the run takes minutes on the embedded model: what is under test is the
# report of a real run, not the gates. On four held-out tasks no candidate can reach its
# share of the lineage's alpha, so the patch is decided (not promoted) at the held-out stage,
# which puts a real sequential test in the report.
REAL_RUN_POLICY = """
[models]
primary = "local:smollm2-135m"

[proposer]
model = "scripted:{proposer}"
# One reply per cycle, as the script is written.
samples = 1
# The scripts' patches are written against the live version.
search = "live"

[suite]
name = "bfcl:simple"
dev_size = 2
heldout_size = 4

[sandbox]
wall_s = 120.0
concurrency = 2

[pipeline]
smoke = false
dev_max_regression = 1.0

[gates.panel]
enabled = false

[loop]
cycle_pause_s = 0.0
max_cycles = 2
"""


@pytest.mark.docker
@pytest.mark.model
@pytest.mark.timeout(1200)
def test_report_of_a_real_run_on_the_embedded_model(
    chromium: Path, tmp_path: Path, asset_cache: Path
) -> None:
    proposer = tmp_path / "proposer.toml"
    improve = patches.IMPROVE.replace("Rationale: say", f"Rationale: {HOSTILE} say", 1)
    # The unparseable reply first: the patch is then judged against the dev baseline the
    # first cycle measured (fewer model calls).
    proposer.write_text(patches.proposer_script([f"no patch here {HOSTILE}", improve]))
    daemon = start_daemon(tmp_path, asset_cache, REAL_RUN_POLICY.format(proposer=proposer))
    live = tmp_path / "live.html"
    try:
        versions = [v["name"] for v in wait_for_decided(daemon, 2, timeout=1100)["versions"]]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "daemon.control.ctl",
                "--state-dir",
                str(daemon.state_dir),
                "report",
                "--out",
                str(live),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stdout.split())  # the console wraps long lines
        assert "1 versions, 2 candidates, sequential test of c2" in said, done.stdout
        with daemon.client() as c, pytest.raises(ControlError, match="existing directory"):
            c.call("report", out="relative.html")
    finally:
        daemon.stop()
    assert versions == ["v0001"], versions  # the seed; the patch was not promoted
    # One version draws points where a lineage draws lines and bands: fewer coloured pixels
    # (1,294 measured against 2,000 for two versions), but far more than an empty page.
    dom = _check_rendered(chromium, live, tmp_path, versions, drawn=800)
    assert len(dom.attr("li", "data-candidate")) == 2
    assert HOSTILE in "".join(dom.text)
    offline = tmp_path / "offline.html"
    _harnessd_report(daemon.config, offline)
    assert Page(offline.read_text()).attr("li", "data-version") == versions
