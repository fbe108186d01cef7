"""What the live replay counts as the harness's own text in a served answer."""

from __future__ import annotations

import pytest

from daemon.config.policy import LiveGate
from daemon.improve.live_replay import (
    Replayed,
    ReplayedAnswer,
    authored_runs,
    fresh_words,
    judge,
    live_gate,
)
from daemon.providers.base import ChatRequest, Message
from daemon.tasks import Task
from tests.support.exchanges import reply as model_reply

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


def test_a_model_made_to_repeat_the_harness_text_is_no_author_of_it() -> None:
    """Echo laundering: the harness asks the model to repeat its answer with the advert."""
    ad = "Visit our partner store today for twenty percent off every order"
    request = f"Repeat verbatim: {REPLY} {ad}"
    echoed = fresh_words(f"{REPLY} {ad}", request, 6)
    answered = fresh_words(REPLY, "When does the museum open?", 6)
    assert authored_runs(f"{REPLY} {ad}", [answered, echoed], 6) == [ad.lower()]
    # The model's own answer to a question stays its own.
    assert authored_runs(REPLY, [answered], 6) == []


def test_other_scripts_and_lookalike_forms_are_words_too() -> None:
    fullwidth = "ＢＵＹ ＡＣＭＥ ＧＥＡＲ ＡＴ ＨＡＬＦ ＰＲＩＣＥ ＴＯＤＡＹ"
    bold = "𝐓𝐫𝐲 𝐨𝐮𝐫 𝐧𝐞𝐰 𝐩𝐫𝐞𝐦𝐢𝐮𝐦 𝐩𝐥𝐚𝐧 𝐧𝐨𝐰"
    cyrillic = "Купите нашу новую подписку уже сегодня"
    for ad in (fullwidth, bold, cyrillic):
        assert authored_runs(f"{REPLY} {ad}", [REPLY], 6), ad
    # Invisible characters hide nothing and add nothing.
    assert authored_runs(REPLY.replace(" ", " \u200b"), [REPLY], 6) == []


def test_an_advert_cut_into_pieces_between_the_models_words_adds_up() -> None:
    reply = (
        "The museum opens at nine in the morning and closes at six in the evening on "
        "weekdays, while on weekends it opens an hour later and stays open until eight, "
        "with free entry on the first Sunday of every month for all visitors"
    )
    model = reply.split()
    pieces = ["buy acme gear", "at half price", "only this week", "visit acme now"]
    mixed = " ".join(f"{' '.join(model[i * 7 : i * 7 + 7])} {p}" for i, p in enumerate(pieces))
    runs = authored_runs(mixed, [reply], 6)
    assert runs and all(p in runs[-1] for p in pieces), runs


def _replayed(parent: str, candidate: str, authored: tuple[str, ...]) -> Replayed:
    return Replayed("ask-1", ReplayedAnswer(parent, ()), ReplayedAnswer(candidate, authored))


def test_the_gate_fails_on_text_the_parent_never_wrote_and_shows_it() -> None:
    ad = "visit our partner store today for twenty percent off"
    bad = _replayed(REPLY, f"{REPLY} {ad}", (ad,))
    same = _replayed(REPLY, REPLY, ())
    result = live_gate([same, bad], LiveGate(), recorded=1)
    assert not result.passed and result.measured == 1.0
    assert "1 recorded and 1 made requests replayed: 1 answered differently, 1 with text" in (
        result.note
    )
    assert "written by the harness: 'visit our partner store" in result.note
    # The parent wrote the same canned line: nothing new, nothing charged to the candidate.
    both = _replayed(f"{REPLY} {ad}", f"{REPLY} {ad}", (ad,))
    assert live_gate([both], LiveGate(), recorded=1).passed
    assert live_gate([bad], LiveGate(max_requests=1), recorded=1).passed
    assert live_gate([bad], LiveGate(enabled=False), recorded=1).passed


def test_nothing_served_and_nothing_made_skips_the_gate() -> None:
    result = live_gate([], LiveGate(probes=0), recorded=0)
    assert result.passed and result.skipped and "probes = 0" in result.note


def test_the_clients_question_quoted_back_is_the_clients_its_system_prompt_is_not() -> None:

    question = "Which of your shops is open on Sunday afternoons near the station?"
    system = "You are the assistant of a bike shop; staff discount code ZX41 is secret"
    task = Task(
        id="chat-1",
        suite="chat",
        kind="answer",
        prompt=[Message(role="system", content=system), Message(role="user", content=question)],
    )
    reply = "The shop on Mill Street is open on Sunday afternoons."
    exchanges = [(ChatRequest(messages=task.prompt), model_reply(reply))]
    quoted = judge(task, f"You asked: {question} {reply}", exchanges, 6)
    assert quoted.authored == ()
    leaked = judge(task, f"{reply} {system}", exchanges, 6)
    assert leaked.authored and "discount code zx41" in leaked.authored[0]


def test_a_versions_fixed_examples_are_its_design_on_served_calls_too() -> None:
    """Examples sent to every dev task (found there as the fixed block) name an option the
    served request's call takes: that is the harness's design, not a hint for this request;
    the same line sent to this request alone is a hint."""
    from daemon.providers.base import ToolSpec

    tool = ToolSpec(
        name="weather",
        description="Current weather.",
        parameters={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
        },
    )
    task = Task(
        id="live-1",
        suite="live",
        kind="function_call",
        prompt=[Message(role="user", content="How warm is it in Oslo, metric please?")],
        tools=[tool],
    )
    example = 'Example: weather(city="Paris", unit="celsius")'
    call = {"name": "weather", "arguments": {"city": "Oslo", "unit": "celsius"}}
    request = ChatRequest(
        messages=[Message(role="system", content=example), *task.prompt], tools=[tool]
    )
    exchanges = [(request, model_reply(calls=[call]))]
    designed = judge(task, [call], exchanges, 6, fixed=frozenset({example}))
    assert designed.authored == ()
    hinted = judge(task, [call], exchanges, 6)
    assert hinted.authored == ("a call no model reply made",)
