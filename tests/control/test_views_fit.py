"""The table views fit the console they print to: replies recorded from a real daemon (a
candidate awaiting review with a two-line rationale, one rejected at the static stage) shown
at 80 and 200 columns, and as ``--wide`` shows them.

At 80 columns the least important columns go, free text is clipped to one line with an
ellipsis, and no cell wraps; at 200 every column is back; ``--wide`` clips nothing.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from daemon.control.columns import Col, fitted
from daemon.control.ctl import WIDE_COLUMNS
from daemon.control.verbs import VERBS
from daemon.control.views import LINEAGE_COLUMNS
from tests.control.terminal import misfits, table_rows

pytestmark = pytest.mark.unit

REPLIES = Path(__file__).parent / "replies"
FITTED_VIEWS = ("lineage", "show", "status", "review")


def _reply(verb: str) -> Any:
    return json.loads((REPLIES / f"{verb}.json").read_text(encoding="utf-8"))


def _shown(verb: str, width: int) -> str:
    out = io.StringIO()
    VERBS[verb].view(_reply(verb), Console(file=out, width=width, color_system=None))
    return out.getvalue()


def _headers(text: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("┃").split("┃")]
        for line in text.splitlines()
        if line.startswith("┃")
    ]


def test_the_table_views_are_the_ones_that_take_wide() -> None:
    assert {v.name for v in VERBS if v.wide} == set(FITTED_VIEWS)


@pytest.mark.parametrize("verb", FITTED_VIEWS)
@pytest.mark.parametrize("width", [80, 200])
def test_a_recorded_reply_fits_the_width(verb: str, width: int) -> None:
    text = _shown(verb, width)
    assert _headers(text), text  # each of these replies holds a table
    assert not misfits(text, width), "\n".join([*misfits(text, width), text])


def test_lineage_at_80_columns_keeps_the_candidate_its_state_rationale_and_why() -> None:
    text = _shown("lineage", 80)
    assert _headers(text) == [["cand", "state", "rationale", "why"]], text
    rows = {row[0]: row for row in table_rows(text)}
    assert set(rows) == {"c1", "c2"}, text  # one line each
    assert rows["c2"][2].startswith("Say which mode we want") and rows["c2"][2].endswith("…")
    assert rows["c1"][3].startswith("harness.py: hunk 1") and rows["c1"][3].endswith("…")


def test_lineage_at_200_columns_has_every_column_and_wide_clips_nothing() -> None:
    every = [c.header for c in LINEAGE_COLUMNS]
    assert every[0] == "cand" and every[-1] == "why" and len(every) == 9
    assert _headers(_shown("lineage", 200)) == [every]
    wide = _shown("lineage", WIDE_COLUMNS)
    rationale = " ".join(_reply("lineage")["candidates"][0]["rationale"].split())
    rows = {row[0]: row for row in table_rows(wide)}
    assert rows["c2"][6] == rationale and "…" not in wide


def test_status_drops_the_cost_column_before_the_model_at_80() -> None:
    narrow, wide = _headers(_shown("status", 80)), _headers(_shown("status", 200))
    assert narrow[0] == ["model", "split", "accuracy", "95% CI", "gap", "tasks"]
    assert wide[0] == ["model", "split", "accuracy", "95% CI", "gap", "tokens/solved", "tasks"]
    assert narrow[1] == wide[1] == ["budget", "spent", "limit", "left"]


@pytest.mark.parametrize("verb", ["show", "review"])
def test_a_verdict_shows_every_gate_on_one_line_with_its_note_clipped(verb: str) -> None:
    text = _shown(verb, 80)
    assert _headers(text) == [["gate", "measured", "threshold", "result", "note"]]
    rows = table_rows(text)
    assert [row[0] for row in rows] == [
        "dev_screen",
        "dev_change",
        "accuracy",
        "improvement",
        "honesty",
        "tokens",
        "dead_code",
        "provenance",
        "decoy",
        "compute_matched",
        "panel",
    ]
    assert any(row[4].endswith("…") for row in rows)
    assert "…" not in _shown(verb, WIDE_COLUMNS)


def test_review_names_its_policy_table() -> None:
    assert "review step on ([gates.review]); live version v0001" in _shown("review", 80)


def test_fitted_drops_columns_by_rank_and_keeps_headers_whole() -> None:
    columns = (Col("id", 1), Col("a long header", 3), Col("text", 2, text=True))
    rows = [["1", "x", "word " * 30]]
    for width, headers in ((30, ["id", "text"]), (50, ["id", "a long header", "text"])):
        out = io.StringIO()
        Console(file=out, width=width, color_system=None).print(fitted(columns, rows, width))
        text = out.getvalue()
        assert _headers(text) == [headers], text
        assert not misfits(text, width, {c.header for c in columns}), text
    # Never narrower than its first column, whatever the width.
    out = io.StringIO()
    Console(file=out, width=8, color_system=None).print(fitted(columns, rows, 8))
    assert _headers(out.getvalue()) == [["id"]]
