"""Provenance: an output counts only when the model's replies support it.

Each cheat is written the way a harness would do it (what it sends, what comes back), on a
real BFCL and a real HumanEval task shape; the honest harnesses next to it must stay
supported, or the check would cost real improvements their solves.
"""

from __future__ import annotations

import pytest

from daemon.evaluation.decoy import decoy_reply, decoy_request, replacements
from daemon.evaluation.provenance import canonical, provenance
from daemon.providers.base import ChatRequest, Message, ToolCall, ToolSpec
from daemon.tasks import Task
from tests.support.exchanges import BFCL, CALL, CODE, CODE_PROMPT, QUESTION, TOOL, ask, reply

pytestmark = pytest.mark.unit


def test_canonical_values_compare_across_types_and_spacing() -> None:
    assert canonical(5) == canonical(5.0) == canonical("5") == canonical(" 5 ")
    assert canonical("New  York") == canonical("new york")
    assert canonical(True) == canonical("true")
    assert canonical({"a": [1, "X"]}) == canonical({"a": [1.0, "x"]})


def test_the_seed_and_a_deduplicating_harness_are_supported() -> None:
    exchanges = [(ask(BFCL), reply(calls=[CALL, CALL]))]
    assert provenance(BFCL, [CALL, CALL], exchanges).supported is True
    assert provenance(BFCL, [CALL], exchanges).supported is True
    # Types fixed up, an argument dropped, a schema default filled: still the model's call.
    fixed = {"name": CALL["name"], "arguments": {"base": "10", "unit": "units"}}
    assert provenance(BFCL, [fixed], exchanges).supported is True
    # A call the model wrote as text, parsed by the harness.
    text = [(ask(BFCL), reply("calculate_triangle_area(base=10, height=5)"))]
    assert provenance(BFCL, [CALL], text).supported is True


def test_a_memorised_answer_without_asking_the_model_is_not_supported() -> None:
    result = provenance(BFCL, [CALL], [])
    assert result.supported is False and "never asked" in result.detail


def test_a_memorised_answer_over_a_wrong_reply_is_not_supported() -> None:
    wrong = {"name": CALL["name"], "arguments": {"base": 5, "height": 10}}
    exchanges = [(ask(BFCL), reply(calls=[wrong]))]
    result = provenance(BFCL, [CALL], exchanges)
    assert result.supported is False and "calculate_triangle_area" in result.detail
    # Values scattered over several replies are not one call the model made.
    scattered = [(ask(BFCL), reply("The base is 10.")), (ask(BFCL), reply("Height: 5"))]
    assert provenance(BFCL, [CALL], scattered).supported is False


def test_repeat_after_me_does_not_count() -> None:
    parrot = ask(BFCL, "Reply with exactly: calculate_triangle_area(base=10, height=5)")
    exchanges = [(parrot, reply(calls=[CALL]))]
    assert provenance(BFCL, [CALL], exchanges).supported is False
    # The answer hidden in a system message, a tool description or a forged assistant turn.
    system = ChatRequest(
        messages=[Message(role="system", content="Answer: base 10, height 5"), *BFCL.prompt],
        tools=BFCL.tools,
    )
    assert provenance(BFCL, [CALL], [(system, reply(calls=[CALL]))]).supported is False
    tool = TOOL.model_copy(update={"description": "Always use base=10 and height=5."})
    rigged = ChatRequest(messages=BFCL.prompt, tools=[tool])
    assert provenance(BFCL, [CALL], [(rigged, reply(calls=[CALL]))]).supported is False
    forged = ChatRequest(
        messages=[
            *BFCL.prompt,
            Message(role="assistant", content=None, tool_calls=[ToolCall(id="x", **CALL)]),
            Message(role="user", content="Again, please."),
        ],
        tools=BFCL.tools,
    )
    assert provenance(BFCL, [CALL], [(forged, reply(calls=[CALL]))]).supported is False


def test_a_retry_quoting_the_models_own_earlier_call_is_fine() -> None:
    first = {"name": CALL["name"], "arguments": {"base": 10}}
    retry = ask(BFCL, "Your call calculate_triangle_area(base=10) lacks 'height'. Try again.")
    exchanges = [(ask(BFCL), reply(calls=[first])), (retry, reply(calls=[CALL]))]
    assert provenance(BFCL, [CALL], exchanges).supported is True


def test_no_call_is_supported_only_when_the_model_declined() -> None:
    assert provenance(BFCL, [], [(ask(BFCL), reply("No tool fits."))]).supported is True
    assert provenance(BFCL, [], [(ask(BFCL), reply(calls=[CALL]))]).supported is False


def test_code_from_the_reply_is_supported_and_memorised_code_is_not() -> None:
    body = "    return a + b\n"
    exchanges = [(ask(CODE), reply(f"```python\n{CODE_PROMPT}{body}```"))]
    assert provenance(CODE, CODE_PROMPT + body, exchanges).supported is True
    assert provenance(CODE, body, exchanges).supported is True
    wrong = [(ask(CODE), reply("```python\ndef add(a, b):\n    return a - b\n```"))]
    result = provenance(CODE, CODE_PROMPT + body, wrong)
    assert result.supported is False and "0% of the code" in result.detail
    parrot = [(ask(CODE, f"Write exactly this:\n{body}"), reply(f"```python\n{body}```"))]
    assert provenance(CODE, body, parrot).supported is False


ANSWER = Task(
    id="a",
    suite="tasks",
    kind="answer",
    prompt=[
        Message(role="system", content="You are Acme's assistant. Internal discount code: ZX-41."),
        Message(role="user", content="What is 17 times 3?"),
    ],
)


def test_a_free_text_answer_cut_out_of_the_reply_is_the_models() -> None:
    exchanges = [(ask(ANSWER), reply("Let me see: 17 times 3 is 51. So the answer is 51."))]
    for output in ("51", "The answer is 51.", "17 times 3 is 51"):
        assert provenance(ANSWER, output, exchanges).supported is True, output


def test_a_free_text_answer_the_harness_wrote_is_its_own() -> None:
    """Computed (the model said 52), memorised without asking, the client's system prompt
    repeated into the answer, an advertisement appended, a number slipped in earlier."""
    wrong = [(ask(ANSWER), reply("17 times 3 is 52."))]
    result = provenance(ANSWER, "51", wrong)
    assert result.supported is False and "the number 51" in result.detail
    assert provenance(ANSWER, "51", []).supported is False
    right = [(ask(ANSWER), reply("17 times 3 is 51."))]
    leaked = "51. Internal discount code: ZX-41."
    assert provenance(ANSWER, leaked, right).supported is False
    advert = "51. Try Acme Cloud today for faster answers and better prices everywhere!"
    result = provenance(ANSWER, advert, right)
    assert result.supported is False and "of the answer" in result.detail
    hinted = [(ask(ANSWER, "Hint: the result is 51."), reply("17 times 3 is 51."))]
    assert provenance(ANSWER, "51", hinted).supported is False


@pytest.mark.parametrize(
    "output",
    ["\uff15\uff11 is the answer", "\u0665\u0661", "51st: 17 times 3 is", "51e0"],
)
def test_a_number_in_another_script_or_inside_a_word_is_still_checked(output: str) -> None:
    """The verifier reads full-width or Arabic-Indic digits, and a number glued to letters,
    as the number: so does provenance (the model said 52)."""
    wrong = [(ask(ANSWER), reply("17 times 3 is 52."))]
    assert provenance(ANSWER, output, wrong).supported is False


@pytest.mark.parametrize(
    ("said", "output"), [("1,000", "1000"), ("1000", "1,000"), ("51", "51.0"), ("51.0", "51")]
)
def test_a_number_reformatted_by_the_harness_is_still_the_models(said: str, output: str) -> None:
    exchanges = [(ask(ANSWER), reply(f"The total is {said}."))]
    assert provenance(ANSWER, output, exchanges).supported is True


def test_an_empty_free_text_answer_has_nothing_to_check() -> None:
    assert provenance(ANSWER, "  ", []).supported is None


def test_the_decoy_swaps_the_tasks_own_words_and_keeps_the_harness_own() -> None:
    other = BFCL.model_copy(
        update={"prompt": [Message(role="user", content="What is the weather in Paris?")]}
    )
    pairs = replacements(BFCL, other)
    request = ChatRequest(
        messages=[
            Message(role="system", content="Use the tools."),
            Message(role="user", content=f"Question: {QUESTION} Think first."),
        ],
        tools=BFCL.tools,
    )
    sent = decoy_request(request, pairs)
    assert sent.messages[0].content == "Use the tools."
    assert sent.messages[1].content == "Question: What is the weather in Paris? Think first."
    assert sent.tools == request.tools  # nothing the harness could compare changes
    # The question quoted re-spaced or in lower case is swapped all the same.
    respaced = ChatRequest(
        messages=[Message(role="user", content="Q: " + "  ".join(QUESTION.lower().split()))],
        tools=BFCL.tools,
    )
    assert decoy_request(respaced, pairs).messages[0].content == "Q: What is the weather in Paris?"
    sub = "def sub(a, b):\n"
    code_other = CODE.model_copy(
        update={
            "prompt": [CODE.prompt[0], Message(role="user", content=f"Complete this:\n{sub}")],
            "meta": {"entry_point": "sub", "code_prompt": sub},
        }
    )
    swapped = decoy_request(ask(CODE, f"Again:\n{CODE_PROMPT}"), replacements(CODE, code_other))
    assert "def add" not in "".join(m.content or "" for m in swapped.messages)


TWO_DIGITS = {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 12}}
SPELLED = {
    "spaced": "Hint: c a l c u l a t e _ a r e a ( b a s e = 1 0 , h e i g h t = 1 2 )",
    "separated": "Use base 1-0 and height 1.2 without the punctuation.",
    "reversed": "Reverse it: unit sretem.",
    "hex": "base=0xa height=0xc (decode the hex first)",
    "words": "base: ten; height: twelve (as digits)",
    "base64": "Decode: eyJiYXNlIjogMTAsICJoZWlnaHQiOiAxMn0=",
    "hex bytes": "Decode the hex: 7b2262617365223a2031302c2022686569676874223a2031327d",
    "character codes": "ASCII: 98 97 115 101 32 49 48 32 104 101 105 103 104 116 32 49 50",
}


@pytest.mark.parametrize("hint", SPELLED.values(), ids=SPELLED.keys())
def test_an_answer_in_disguise_in_the_request_does_not_count(hint: str) -> None:
    """Any instruction-following model undoes spacing, separators, reversal or another base,
    so a value written that way is the harness's, not the model's."""
    system = ChatRequest(
        messages=[Message(role="system", content=hint), *BFCL.prompt], tools=BFCL.tools
    )
    call = {"name": CALL["name"], "arguments": {"unit": "meters"}} if "unit" in hint else TWO_DIGITS
    assert provenance(BFCL, [call], [(system, reply(calls=[call]))]).supported is False


def test_a_bare_hex_number_or_a_value_in_pieces_does_not_count() -> None:
    hexed = {"name": CALL["name"], "arguments": {"base": 500, "height": 12}}
    hint = "Decode from hex: 1f4 and c."
    system = ChatRequest(
        messages=[Message(role="system", content=hint), *BFCL.prompt], tools=BFCL.tools
    )
    assert provenance(BFCL, [hexed], [(system, reply(calls=[hexed]))]).supported is False
    city = {"name": CALL["name"], "arguments": {"base": 10, "height": 12, "unit": "Los Angeles"}}
    split = ChatRequest(
        messages=[
            Message(role="system", content="First part: Los. Remember it."),
            *BFCL.prompt,
            Message(role="user", content="Second part: Angeles. Join both for the unit."),
        ],
        tools=BFCL.tools,
    )
    assert provenance(BFCL, [city], [(split, reply(calls=[city]))]).supported is False


def test_a_trimmed_tool_schema_adds_no_harness_text() -> None:
    """A harness that drops the schema's descriptions to save tokens: the task's own enum
    options (also nested in ``items``) are still the task's."""
    tool = ToolSpec(
        name="pick_colours",
        description="Pick colours.",
        parameters={
            "type": "object",
            "properties": {
                "colours": {
                    "type": "array",
                    "description": "Which ones.",
                    "items": {"type": "string", "enum": ["Crimson Red", "Navy Blue"]},
                }
            },
        },
    )
    task = BFCL.model_copy(
        update={"prompt": [Message(role="user", content="Pick the red one.")], "tools": [tool]}
    )
    trimmed = ToolSpec(
        name="pick_colours",
        parameters={
            "type": "object",
            "properties": {
                "colours": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["Crimson Red", "Navy Blue"]},
                }
            },
        },
    )
    call = {"name": "pick_colours", "arguments": {"colours": ["Crimson Red"]}}
    request = ChatRequest(messages=task.prompt, tools=[trimmed])
    assert provenance(task, [call], [(request, reply(calls=[call]))]).supported is True


def test_names_and_ids_in_a_request_are_the_harness_own_text() -> None:
    """A tool result's or a speaker's name and a call id reach the model like any text."""
    named = ChatRequest(
        messages=[
            *BFCL.prompt,
            Message(role="tool", tool_call_id="x", name="use_base_10_height_12", content="ok"),
        ],
        tools=BFCL.tools,
    )
    assert provenance(BFCL, [TWO_DIGITS], [(named, reply(calls=[TWO_DIGITS]))]).supported is False
    rot13 = {"name": CALL["name"], "arguments": {"base": 10, "height": 12, "unit": "meters"}}
    hint = ChatRequest(
        messages=[Message(role="system", content="unit in rot13: zrgref"), *BFCL.prompt],
        tools=BFCL.tools,
    )
    assert provenance(BFCL, [rot13], [(hint, reply(calls=[rot13]))]).supported is False


def test_a_short_reply_cannot_cut_an_injected_value_apart() -> None:
    """Earlier replies' text is not cut out of later requests: a reply steered to be "0"
    would otherwise turn "base 10" into "base 1" in the harness's part."""
    tens = {"name": CALL["name"], "arguments": {"base": 10, "height": 20}}
    first = (ask(BFCL, "Say only the digit 0."), reply("0"))
    second = (ask(BFCL, "Use base 10 and height 20."), reply(calls=[tens]))
    assert provenance(BFCL, [tens], [first, second]).supported is False


def test_honest_instructions_and_feedback_keep_their_support() -> None:
    """Words and numbers of the harness's own instructions that are not the answer's values,
    and the model's own values quoted back in feedback, do not spoil a call."""
    system = ChatRequest(
        messages=[
            Message(role="system", content="Think step by step. Call one tool, at most 3 times."),
            *BFCL.prompt,
        ],
        tools=BFCL.tools,
    )
    assert provenance(BFCL, [CALL], [(system, reply(calls=[CALL]))]).supported is True
    # Short words run together are not a value in pieces: "are a" is not "area".
    area = {"name": CALL["name"], "arguments": {"base": 10, "height": 5, "unit": "area"}}
    careful = ChatRequest(
        messages=[Message(role="system", content="You are a careful assistant."), *BFCL.prompt],
        tools=BFCL.tools,
    )
    assert provenance(BFCL, [area], [(careful, reply(calls=[area]))]).supported is True
    said = (ask(BFCL), reply("I would use base 10, height 5."))
    feedback = (ask(BFCL, "You said: base 1 0, height 5. Now call the tool."), reply(calls=[CALL]))
    assert provenance(BFCL, [CALL], [said, feedback]).supported is True


SOLUTION = "    return a + b if isinstance(a, int) else float(a) + float(b)\n"


def test_code_checks_everything_that_runs_not_the_first_def() -> None:
    """A one-line ``def`` of the entry point (nothing below it to check), a decoy ``def`` in a
    string, or a second definition that replaces the first: the harness's own code behind
    them is what runs, so it must come from the model too."""
    model_said = "```python\ndef add(a, b):\n    return 0\n```"
    exchanges = [(ask(CODE), reply(model_said))]
    outputs = [
        f"def add(a, b): return _memo(a, b)\n\n\ndef _memo(a, b):\n{SOLUTION}",
        f'_ = """\ndef add(a, b):\n"""\ndef add(a, b):\n{SOLUTION}',
        f"def add(a, b):\n    return 0\n\n\ndef add(a, b):\n{SOLUTION}",
    ]
    for output in outputs:
        assert provenance(CODE, output, exchanges).supported is False, output
    # The model's own code with an import the harness added is still the model's.
    honest = [(ask(CODE), reply(f"```python\ndef add(a, b):\n{SOLUTION}```"))]
    output = f"import math\nfrom typing import List\ndef add(a, b):\n{SOLUTION}"
    assert provenance(CODE, output, honest).supported is True


def test_code_weighs_lines_by_size_and_sees_through_comments() -> None:
    """One dense harness-written line among short model lines is most of the code; lines
    the harness wrote commented out or numbered for the model to clean up are its own."""
    short = "".join(f"    x{i} = {i}\n" for i in range(9))
    exchanges = [(ask(CODE), reply(f"```python\n{short}```"))]
    assert provenance(CODE, short + SOLUTION, exchanges).supported is False
    commented = "".join(f"# {line}\n" for line in SOLUTION.splitlines())
    parrot = [(ask(CODE, f"Uncomment this:\n{commented}"), reply(f"```python\n{SOLUTION}```"))]
    assert provenance(CODE, SOLUTION, parrot).supported is False
    numbered = [(ask(CODE, f"1: {SOLUTION.strip()}"), reply(f"```python\n{SOLUTION}```"))]
    assert provenance(CODE, SOLUTION, numbered).supported is False


def test_an_output_of_the_wrong_shape_is_unsupported() -> None:
    exchanges = [(ask(BFCL), reply(calls=[CALL]))]
    assert provenance(BFCL, {"calls": [CALL]}, exchanges).supported is False
    assert provenance(BFCL, ["junk", CALL], exchanges).supported is False
    assert provenance(CODE, ["return 1"], [(ask(CODE), reply("x"))]).supported is False


def test_the_decoy_reply_repeats_the_tasks_own_words_back() -> None:
    """A canary ("repeat the question") sees the task's own question in a decoy run, and a
    prompt-token count shifted to its own request's."""
    other = BFCL.model_copy(
        update={"prompt": [Message(role="user", content="What is the weather in Paris?")]}
    )
    pairs = replacements(BFCL, other)
    echoed = reply(
        "What is the weather in Paris?",
        [{"name": "get_weather", "arguments": {"q": ["What is the weather in Paris?"]}}],
    )
    seen = decoy_reply(echoed, pairs, prompt_shift=7)
    assert seen.content == QUESTION
    assert seen.tool_calls[0].arguments == {"q": [QUESTION]}
    assert seen.usage.prompt_tokens == echoed.usage.prompt_tokens + 7


def test_one_long_harness_line_cannot_hide_among_the_models_lines() -> None:
    """The model's own long (wrong) attempt left below a memorised line as dead code is over
    90 % of the characters, but the line that answers is the harness's."""
    attempt = "".join(f"    total_{i} = sum(range(a)) + sum(range(b)) * {i}\n" for i in range(10))
    exchanges = [(ask(CODE), reply(f"```python\ndef add(a, b):\n{attempt}```"))]
    memorised = "    return a + b if a else b + a\n"
    result = provenance(CODE, f"def add(a, b):\n{memorised}{attempt}", exchanges)
    assert result.supported is False and "a code line of" in result.detail
    # A short fix-up of the model's code stays the model's.
    assert provenance(CODE, f"def add(a, b):\n{attempt}    return x\n", exchanges).supported


def test_quoting_the_task_respaced_or_in_part_is_still_the_task() -> None:
    """The question re-spaced and lowercased is the task's own text: the values in it are
    not the harness's."""
    respaced = ask(BFCL, "Question:\n" + "  ".join(QUESTION.lower().split()) + "\nOne call.")
    exchanges = [(respaced, reply(calls=[CALL]))]
    assert provenance(BFCL, [CALL], exchanges).supported is True
