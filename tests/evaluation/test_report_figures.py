"""The descriptive figures of a report."""

from __future__ import annotations

import pytest

from daemon.evaluation.report import CoverageReport, Split, build_report, stored_report, wilson_ci

pytestmark = pytest.mark.unit


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_ci(48, 100)
    assert lo == pytest.approx(0.3846, abs=1e-3)
    assert hi == pytest.approx(0.5768, abs=1e-3)
    assert wilson_ci(0, 10)[0] == 0.0
    assert wilson_ci(10, 10)[1] == 1.0
    assert wilson_ci(0, 0) == (0.0, 1.0)


def test_a_stored_report_keeps_its_split_as_the_text_earlier_releases_wrote() -> None:
    assert [s.value for s in Split] == [
        "smoke",
        "dev",
        "heldout",
        "decoy",
        "matched",
        "all",
        "replication",
    ]
    report = build_report(
        run_id="r", suite="s", split=Split.HELDOUT, model="m", tasks=[], coverage=CoverageReport()
    )
    stored = report.model_dump_json()
    assert '"split":"heldout"' in stored
    assert stored_report(stored).split is Split.HELDOUT
