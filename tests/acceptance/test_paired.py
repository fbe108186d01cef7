"""Newcombe's paired interval (method 10) against published figures and its edges."""

from __future__ import annotations

import math

import pytest

from daemon.acceptance.paired import paired_difference

pytestmark = pytest.mark.unit


def test_the_published_example_cavo_2012() -> None:
    """Fagerland, Lydersen and Laake, "Statistical Analysis of Contingency Tables" (2017),
    chapter 8: the paired table (59, 6 / 16, 80) gives -0.0621 (95% CI -0.1186 to -0.0046)
    with the Newcombe square-and-add interval (Newcombe 1998, method 10)."""
    d = paired_difference(both=59, wins=6, losses=16, neither=80)
    assert d.n == 161
    assert round(d.gain, 4) == -0.0621
    assert (round(d.low, 4), round(d.high, 4)) == (-0.1186, -0.0046)


def test_swapping_the_sides_mirrors_the_interval() -> None:
    d = paired_difference(59, 6, 16, 80)
    m = paired_difference(59, 16, 6, 80)
    assert math.isclose(m.gain, -d.gain)
    assert math.isclose(m.low, -d.high) and math.isclose(m.high, -d.low)


@pytest.mark.parametrize(
    "counts",
    [(0, 0, 0, 10), (10, 0, 0, 0), (0, 10, 0, 0), (0, 0, 10, 0), (3, 4, 1, 2), (1, 1, 7, 12)],
)
def test_the_interval_holds_the_gain_and_stays_in_bounds(counts: tuple[int, ...]) -> None:
    d = paired_difference(*counts)
    assert -1.0 <= d.low <= d.gain <= d.high <= 1.0


def test_no_discordant_pair_gives_an_interval_around_zero_that_narrows_with_n() -> None:
    small, large = paired_difference(5, 0, 0, 5), paired_difference(50, 0, 0, 50)
    assert small.gain == 0.0 and math.isclose(small.low, -small.high)
    assert 0.0 < large.high < small.high


def test_all_wins_excludes_zero_and_no_task_is_the_whole_range() -> None:
    assert paired_difference(0, 10, 0, 0).low > 0.5
    empty = paired_difference(0, 0, 0, 0)
    assert (empty.gain, empty.low, empty.high) == (0.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="negative"):
        paired_difference(1, -1, 0, 0)
