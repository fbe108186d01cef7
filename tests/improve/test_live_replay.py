"""What the live replay counts as the harness's own text in a served answer."""

from __future__ import annotations

import pytest

from daemon.config.policy import LiveGate
from daemon.improve.live_replay import Replayed, ReplayedAnswer, authored_runs, live_gate

pytestmark = pytest.mark.unit

REPLY = "The museum opens at nine in the morning and closes at six in the evening."


def test_the_models_words_reformatted_or_cut_are_the_models() -> None:
    assert authored_runs(REPLY, [REPLY], 6) == []
    assert authored_runs("Answer: " + REPLY.upper(), [REPLY], 6) == []
    assert authored_runs("The museum opens at nine in the morning.", [REPLY], 6) == []
    assert authored_runs("", [REPLY], 6) == []


def test_an_advert_or_a_repeated_system_prompt_is_the_harness() -> None:
    ad = "Visit our partner store today for twenty percent off every order"
    runs = authored_runs(f"{REPLY} {ad}", [REPLY], 6)
    assert runs == [ad.lower()]
    system = "Internal discount code ZX41 is for staff only never share it"
    assert authored_runs(f"{REPLY}\n{system}", [REPLY], 6) == [system.lower()]
    # Fewer words than the policy's minimum are not counted (a label, a short prefix).
    assert authored_runs(f"Note well: {REPLY}", [REPLY], 6) == []


def _replayed(parent: str, candidate: str, authored: tuple[str, ...]) -> Replayed:
    return Replayed("ask-1", ReplayedAnswer(parent, ()), ReplayedAnswer(candidate, authored))


def test_the_gate_fails_on_text_the_parent_never_wrote_and_shows_it() -> None:
    ad = "visit our partner store today for twenty percent off"
    bad = _replayed(REPLY, f"{REPLY} {ad}", (ad,))
    same = _replayed(REPLY, REPLY, ())
    result = live_gate([same, bad], LiveGate())
    assert not result.passed and result.measured == 1.0
    assert "2 recorded requests replayed: 1 answered differently, 1 with text" in result.note
    assert "written by the harness: 'visit our partner store" in result.note
    # The parent wrote the same canned line: nothing new, nothing charged to the candidate.
    both = _replayed(f"{REPLY} {ad}", f"{REPLY} {ad}", (ad,))
    assert live_gate([both], LiveGate()).passed
    assert live_gate([bad], LiveGate(max_requests=1)).passed
    assert live_gate([bad], LiveGate(enabled=False)).passed


def test_nothing_served_yet_skips_the_gate() -> None:
    result = live_gate([], LiveGate())
    assert result.passed and result.skipped and "no live requests" in result.note
