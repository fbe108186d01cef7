"""Provenance after the counterfactual change: what the task states is the task's, what the
harness sends every task is its design, and a binding the harness made for one task (a
pairing in its request, an echo it had the model repeat) is not the model's.

Each case is what a harness sends and what comes back, on a real BFCL task shape; each cheat
has its honest twin beside it.
"""

from __future__ import annotations

import json

import pytest

from daemon.evaluation.disguise import WORD
from daemon.evaluation.provenance import first_lines, fixed_lines, own_words, provenance
from daemon.providers.base import ChatRequest, Message, ToolSpec
from daemon.tasks import Task
from tests.support.exchanges import BFCL, CALL, QUESTION, TOOL, ask, reply

pytestmark = pytest.mark.unit

INSTRUCTION = (
    "Make 1 call per request. Copy numbers such as 2, 3, 5, 10 or 100 exactly as the "
    "question gives them."
)
EXAMPLES = (
    "Examples:\nWhat is 7 times 3? -> multiply(a=7, b=3)\nArea of a 10 by 5 box? -> area(w=10, h=5)"
)


def _with_system(task: Task, system: str, *extra: str) -> ChatRequest:
    messages = [Message(role="system", content=system), *task.prompt]
    messages += [Message(role="user", content=e) for e in extra]
    return ChatRequest(messages=messages, tools=task.tools)


def _task(question: str, tool: ToolSpec = TOOL) -> Task:
    return Task(
        id="x",
        suite="bfcl",
        kind="function_call",
        prompt=[Message(role="user", content=question)],
        tools=[tool],
    )


OTHERS = [
    _task("What is the area of a triangle with base 7 and height 2?"),
    _task("Triangle: base 12, height 8. Area?"),
    _task("Compute a triangle's area, base 3 and height 4."),
]


def _fixed(system: str) -> frozenset[str]:
    """The fixed block as an evaluation finds it: over the first requests of several tasks."""
    tasks = [BFCL, *OTHERS]
    return fixed_lines(
        [first_lines(t, [(_with_system(t, system), reply(calls=[CALL]))]) for t in tasks]
    )


def test_a_value_the_question_states_is_the_tasks_however_the_harness_resends_it() -> None:
    resent = ask(BFCL, "The numbers in the question: 10, 5.")
    assert provenance(BFCL, [CALL], [(resent, reply(calls=[CALL]))]).supported is True


def test_a_value_the_task_did_not_state_still_counts_as_injected() -> None:
    hinted = ask(BFCL, "Note: use 12 for the base.")
    call = {"name": CALL["name"], "arguments": {"base": 12, "height": 5}}
    assert provenance(BFCL, [call], [(hinted, reply(calls=[call]))]).supported is False


def test_a_pairing_the_harness_wrote_for_the_task_is_not_the_models() -> None:
    for hint in (
        "Hint: base=10, height=5",
        'The call is calculate_triangle_area({"base": 10, "height": 5})',
        "Set base to 10 and height to 5.",
    ):
        got = provenance(BFCL, [CALL], [(ask(BFCL, hint), reply(calls=[CALL]))])
        assert got.supported is False, hint
    # Naming the parameters without their values is the task's own schema, re-sent.
    listed = ask(BFCL, "Parameters: base (integer), height (integer), unit (string).")
    assert provenance(BFCL, [CALL], [(listed, reply(calls=[CALL]))]).supported is True


def test_a_pairing_the_model_made_first_may_be_quoted_back() -> None:
    first = reply(calls=[CALL])
    check = ask(BFCL, "Your call was calculate_triangle_area(base=10, height=5). Check it.")
    exchanges = [(ask(BFCL), first), (check, reply(calls=[CALL]))]
    assert provenance(BFCL, [CALL], exchanges).supported is True


def test_an_echo_launders_nothing() -> None:
    """Echo laundering: the model repeats the question, then a per-task hint states the call.
    The echo is a copy of its request, and the hint's pairing is the harness's."""
    echo = ask(BFCL, f"Repeat the question word for word: {QUESTION}")
    hint = ask(
        BFCL,
        "If the question begins with 'Find the area of', the call is "
        'calculate_triangle_area{"base": 10, "height": 5}',
    )
    exchanges = [(echo, reply(content=QUESTION)), (hint, reply(calls=[CALL]))]
    assert provenance(BFCL, [CALL], exchanges).supported is False
    assert WORD.findall(own_words(QUESTION, echo.messages[-1].content or "")) == []


def test_an_echo_of_injected_values_does_not_make_them_the_models() -> None:
    injected = ask(BFCL, "Repeat after me: base twelve is 12")
    call = {"name": CALL["name"], "arguments": {"base": 12, "height": 5}}
    exchanges = [(injected, reply(content="base twelve is 12")), (ask(BFCL), reply(calls=[call]))]
    assert provenance(BFCL, [call], exchanges).supported is False


def test_an_instruction_sent_to_every_task_is_the_harness_design() -> None:
    fixed = _fixed(INSTRUCTION)
    assert " ".join(INSTRUCTION.split()) in fixed
    # A value the instruction names and this task does not state (100) is not injected.
    tool = ToolSpec(
        name="pick",
        description="Pick a count.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    task = _task("Pick the usual maximum count.", tool)
    call = {"name": "pick", "arguments": {"n": 100}}
    exchanges = [(_with_system(task, INSTRUCTION), reply(calls=[call]))]
    assert provenance(task, [call], exchanges, fixed=fixed).supported is True
    # Without the fixed block (one task alone tells nothing apart) it would be.
    assert provenance(task, [call], exchanges).supported is False


def test_a_fixed_block_of_examples_is_the_harness_design() -> None:
    fixed = _fixed(EXAMPLES)
    exchanges = [(_with_system(BFCL, EXAMPLES), reply(calls=[CALL]))]
    assert provenance(BFCL, [CALL], exchanges, fixed=fixed).supported is True


def test_a_per_task_hint_is_not_a_fixed_block() -> None:
    """Lines that differ by task are never in the fixed block, whatever else is fixed."""
    tasks = [BFCL, *OTHERS]
    firsts = [
        first_lines(t, [(_with_system(t, f"{INSTRUCTION}\nHint: base={i}"), reply())])
        for i, t in enumerate(tasks)
    ]
    fixed = fixed_lines(firsts)
    assert " ".join(INSTRUCTION.split()) in fixed
    assert not any("hint" in line.lower() for line in fixed)
    exchanges = [(_with_system(BFCL, f"{INSTRUCTION}\nHint: base=10"), reply(calls=[CALL]))]
    assert provenance(BFCL, [CALL], exchanges, fixed=fixed).supported is False


def test_a_table_sent_to_every_task_is_fixed_but_says_nothing_a_copy_can_use() -> None:
    """A table of public answers sent identically to every task is the harness's fixed
    block here (on public tasks its values are the questions' own); what stops it is that
    held-out tasks are copies it does not fit (tests/suites/test_rewrite.py)."""
    table = "\n".join(f"q{i}: calculate_triangle_area(base={i}, height=5)" for i in range(3, 12))
    assert len(_fixed(table)) == 9


def test_trimmed_schemas_are_the_tasks_own_words() -> None:
    trimmed = ToolSpec(
        name=TOOL.name,
        description="Calculate the area of a triangle",  # first sentence, cut
        parameters={
            "type": "object",
            "properties": {
                "base": {"type": "integer"},
                "height": {"type": "integer"},
                "unit": {"type": "string", "default": "units"},
            },
            "required": ["base", "height"],
        },
    )
    request = ChatRequest(messages=BFCL.prompt, tools=[trimmed])
    assert provenance(BFCL, [CALL], [(request, reply(calls=[CALL]))]).supported is True


def test_an_enum_the_schema_offers_may_be_restated_beside_its_parameter() -> None:
    tool = ToolSpec(
        name="convert",
        description="Convert a length.",
        parameters={
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "unit": {"type": "string", "enum": ["cm", "inch"]},
            },
        },
    )
    task = _task("Convert 12 to the metric unit.", tool)
    call = {"name": "convert", "arguments": {"value": 12, "unit": "cm"}}
    restated = ask(task, "unit: one of cm, inch")
    assert provenance(task, [call], [(restated, reply(calls=[call]))]).supported is True


def test_own_words_keep_what_the_reply_added() -> None:
    request = "Please repeat the following text exactly as written here"
    said = own_words("Sure: please repeat the following text exactly. Then base=10", request)
    assert WORD.findall(said) == ["sure", "then", "base", "10"]


def test_a_pairing_the_environment_said_is_the_models_to_use() -> None:
    """A tool result relayed by the harness (``"folder": "documents"``) pairs a parameter
    with a value, but the environment said it: the model's next call may use it."""
    from daemon.evaluation.provenance import EnvironmentText
    from daemon.providers.base import ToolCall

    tool = ToolSpec(
        name="cd",
        description="Change directory.",
        parameters={"type": "object", "properties": {"folder": {"type": "string"}}},
    )
    task = Task(
        id="m",
        suite="bfcl",
        kind="tool_use",
        prompt=[Message(role="user", content="Go into the folder that ls shows.")],
        tools=[tool],
    )
    result = '{"folder": "documents"}'
    first = reply(calls=[{"name": "ls", "arguments": {}}])
    follow = ChatRequest(
        messages=[
            *task.prompt,
            Message(
                role="assistant",
                content=None,
                tool_calls=[ToolCall(id="c0", name="ls", arguments={})],
            ),
            Message(role="tool", content=result, tool_call_id="c0"),
        ],
        tools=task.tools,
    )
    second = reply(calls=[{"name": "cd", "arguments": {"folder": "documents"}}])
    heard = [
        EnvironmentText(result, after=1, call=("ls", {})),
        EnvironmentText("ok", after=2, call=("cd", {"folder": "documents"})),
    ]
    exchanges = [(ChatRequest(messages=task.prompt, tools=task.tools), first), (follow, second)]
    got = provenance(task, None, exchanges, heard)
    assert got.supported is True, got


def test_a_call_written_as_text_may_quote_the_tasks_own_words() -> None:
    """A reply that writes its call as text names the function as the schema does and a
    value as the question words it: quoting the task is not relaying the harness."""
    tool = ToolSpec(
        name="science_history_get_invention",
        description="Retrieve the inventor and year of invention based on the name.",
        parameters={
            "type": "object",
            "properties": {
                "invention_name": {"type": "string"},
                "want_year": {"type": "boolean", "default": False},
            },
        },
    )
    task = _task("Who invented the theory of general relativity and in which year?", tool)
    call = {
        "name": tool.name,
        "arguments": {"invention_name": "theory of general relativity", "want_year": True},
    }
    text = f"<function_call>{json.dumps(call)}</function_call>"
    exchanges = [(ChatRequest(messages=task.prompt, tools=task.tools), reply(content=text))]
    assert provenance(task, [call], exchanges).supported is True


UNIT_TOOL = ToolSpec(
    name="convert",
    description="Convert a temperature.",
    parameters={
        "type": "object",
        "properties": {
            "degrees": {"type": "number"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
        },
    },
)


def test_snapping_an_off_schema_value_to_the_schemas_option_is_the_tasks() -> None:
    """The honest twin of a memorised answer: the model wrote "Celsius degrees", the schema
    offers "celsius", and the harness snapped it there."""
    task = _task("Convert 30 degrees to the Celsius scale.", UNIT_TOOL)
    said = {"name": "convert", "arguments": {"degrees": 30, "unit": "Celsius degrees"}}
    snapped = {"name": "convert", "arguments": {"degrees": 30, "unit": "celsius"}}
    exchanges = [(ask(task), reply(calls=[said]))]
    assert provenance(task, [snapped], exchanges).supported is True


def test_overriding_a_valid_option_the_model_chose_is_not_the_models() -> None:
    """Choosing among the options where the model chose one already is the harness's own
    answer, and so is an option where the model gave no value at all."""
    task = _task("Convert 30 degrees to the Celsius scale.", UNIT_TOOL)
    said = {"name": "convert", "arguments": {"degrees": 30, "unit": "kelvin"}}
    overridden = {"name": "convert", "arguments": {"degrees": 30, "unit": "celsius"}}
    exchanges = [(ask(task), reply(calls=[said]))]
    assert provenance(task, [overridden], exchanges).supported is False
    bare = {"name": "convert", "arguments": {"degrees": 30}}
    exchanges = [(ask(task), reply(calls=[bare]))]
    assert provenance(task, [overridden], exchanges).supported is False


@pytest.mark.parametrize("placeholder", ["?", "<unit>", "", "unknown"])
def test_an_option_picked_over_a_placeholder_is_the_harness(placeholder: str) -> None:
    """The cheat the snap exemption invites: the model is told to write a placeholder for
    every enumerated parameter and the harness picks the option itself (from what it knows).
    Only the option nearest to what the model wrote is the task's; a placeholder is nearest
    to none, or to another option."""
    task = _task("Convert 30 degrees to the Celsius scale.", UNIT_TOOL)
    said = {"name": "convert", "arguments": {"degrees": 30, "unit": placeholder}}
    picked = {"name": "convert", "arguments": {"degrees": 30, "unit": "celsius"}}
    exchanges = [(ask(task), reply(calls=[said]))]
    assert provenance(task, [picked], exchanges).supported is False


@pytest.mark.parametrize("said", ["Celsius degrees", "celcius", "CELSIUS scale", "C"])
def test_the_nearest_option_to_a_misspelt_or_decorated_value_is_the_tasks(said: str) -> None:
    task = _task("Convert 30 degrees to the Celsius scale.", UNIT_TOOL)
    call = {"name": "convert", "arguments": {"degrees": 30, "unit": said}}
    snapped = {"name": "convert", "arguments": {"degrees": 30, "unit": "celsius"}}
    exchanges = [(ask(task), reply(calls=[call]))]
    assert provenance(task, [snapped], exchanges).supported is True


# A harness that names the task's enum option for the model (the options are the task's own
# words, so the injection and pairing rules let them through) against its honest twin, which
# restates the options the schema offers.
NAMED_ANSWER = {"name": "convert", "arguments": {"degrees": 30, "unit": "kelvin"}}
KELVIN = _task("Convert 30 degrees to the absolute scale.", UNIT_TOOL)


@pytest.mark.parametrize(
    "hint",
    [
        "Set unit to kelvin.",
        "unit=kelvin",
        '{"unit": "kelvin"}',
        "Hint: kelvin",
        "Use K-E-L-V-I-N",
        "unit: one of celsius, fahrenheit, kelvin. Take kelvin.",
        "unit: kelvin (not celsius, not fahrenheit)",
        "unit: fahrenheit, kelvin",
    ],
)
def test_an_enum_option_singled_out_for_the_task_is_the_harness(hint: str) -> None:
    exchanges = [(ask(KELVIN, hint), reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False


@pytest.mark.parametrize(
    "listing",
    [
        "unit: one of celsius, fahrenheit, kelvin",
        "unit: celsius or fahrenheit or kelvin",
        'unit (string): enum ["celsius", "fahrenheit", "kelvin"]',
        "unit: celsius, fahrenheit, kelvin (sorted: celsius, fahrenheit, kelvin)",
        "unit: one of celsius, fahrenheit, ...",  # a long enum cut short from its first
        json.dumps(UNIT_TOOL.model_dump()),  # the whole schema as text
    ],
)
def test_the_options_listed_as_the_schema_gives_them_are_the_tasks(listing: str) -> None:
    exchanges = [(ask(KELVIN, listing), reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_an_option_the_question_states_may_be_named_but_not_set_for_the_model() -> None:
    """Naming an option the question itself says is quoting the task; pairing it with its
    parameter is reading for the model (as for any value: :meth:`paired`)."""
    task = _task("Convert 30 degrees to kelvin.", UNIT_TOOL)
    quoted = [(ask(task, "Key words: kelvin"), reply(calls=[NAMED_ANSWER]))]
    assert provenance(task, [NAMED_ANSWER], quoted).supported is True
    paired = [(ask(task, "Set unit to kelvin."), reply(calls=[NAMED_ANSWER]))]
    assert provenance(task, [NAMED_ANSWER], paired).supported is False


def test_a_retry_quoting_the_models_own_option_is_not_a_hint() -> None:
    """The option came from the model first; the harness's retry repeats it back."""
    first = reply(calls=[{"name": "convert", "arguments": {"unit": "kelvin"}}])
    retry = ask(KELVIN, "Your call convert(unit=kelvin) lacks degrees. Call again.")
    exchanges = [(ask(KELVIN), first), (retry, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_a_schema_cut_down_to_the_answer_is_the_harness() -> None:
    narrowed = UNIT_TOOL.model_copy(deep=True)
    narrowed.parameters["properties"]["unit"]["enum"] = ["kelvin"]
    request = ChatRequest(messages=KELVIN.prompt, tools=[narrowed])
    exchanges = [(request, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False
    dropped = UNIT_TOOL.model_copy(deep=True)
    del dropped.parameters["properties"]["unit"]["enum"]
    request = ChatRequest(messages=KELVIN.prompt, tools=[dropped])
    exchanges = [(request, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_a_misspelling_the_harness_wrote_snaps_to_nothing_of_the_models() -> None:
    """The harness tells the model "kelvn" and snaps it to the nearest option: it chose."""
    said = {"name": "convert", "arguments": {"degrees": 30, "unit": "kelvn"}}
    exchanges = [(ask(KELVIN, "Write unit as kelvn."), reply(calls=[said]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False
    exchanges = [(ask(KELVIN), reply(calls=[said]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_a_retry_suggesting_the_option_nearest_to_the_models_value_is_the_tasks() -> None:
    """The honest twin of a hint, as a retry: the model wrote "kelvn", the harness asked "did
    you mean kelvin?" (what snapping would have chosen). Suggesting another option, or one
    nearest to a value the harness had put in the model's mouth, is choosing."""
    said = {"name": "convert", "arguments": {"degrees": 30, "unit": "kelvn"}}
    retry = ask(KELVIN, "unit must be one of the options: did you mean kelvin?")
    exchanges = [(ask(KELVIN), reply(calls=[said])), (retry, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True
    other = {"name": "convert", "arguments": {"degrees": 30, "unit": "celsus"}}
    exchanges = [(ask(KELVIN), reply(calls=[other])), (retry, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False
    steered = ask(KELVIN, "Write unit as kelvn.")
    exchanges = [(steered, reply(calls=[said])), (retry, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False


@pytest.mark.parametrize(
    "listing",
    [
        "unit: one of\n1. celsius\n2. fahrenheit\n3. kelvin",
        "unit: celsius (°C), fahrenheit (°F), kelvin (K)",
        "Error: unit must be one of {'kelvin', 'celsius', 'fahrenheit'}",  # a set's order
        "unit options: celsius, fahrenheit, and/or kelvin",
        "unit: celsius (default), fahrenheit, kelvin",
    ],
)
def test_the_ways_schemas_and_errors_print_options_are_listings(listing: str) -> None:
    exchanges = [(ask(KELVIN, listing), reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_a_long_enum_cut_short_at_both_ends_is_a_listing_and_a_short_one_is_not() -> None:
    zones = [f"zone{i}" for i in range(1, 21)]
    tool = ToolSpec(
        name="locate",
        description="Find the zone of a place.",
        parameters={"type": "object", "properties": {"zone": {"type": "string", "enum": zones}}},
    )
    task = _task("Which zone is the airport in?", tool)
    answer = {"name": "locate", "arguments": {"zone": "zone20"}}
    cut = ask(task, "zone: zone1, zone2, zone3, ..., zone18, zone19, zone20")
    assert provenance(task, [answer], [(cut, reply(calls=[answer]))]).supported is True
    # Two of three options are no long enum cut short: they point at the answer's side.
    two = [(ask(KELVIN, "unit: fahrenheit, kelvin"), reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], two).supported is False


def test_an_option_that_is_a_word_of_the_schemas_names_is_named_by_any_rendering() -> None:
    tool = ToolSpec(
        name="sales_report",
        description="Summarise sales.",
        parameters={
            "type": "object",
            "properties": {
                "start_date": {"type": "string"},
                "group_by": {"type": "string", "enum": ["date", "region", "product"]},
            },
        },
    )
    task = _task("Summarise sales since 2024-01-01, one row per day.", tool)
    answer = {"name": "sales_report", "arguments": {"start_date": "2024-01-01", "group_by": "date"}}
    for shown in (json.dumps(tool.model_dump()), "sales_report(start_date: str, group_by: str)"):
        exchanges = [(ask(task, shown), reply(calls=[answer]))]
        assert provenance(task, [answer], exchanges).supported is True


EXPORT = ToolSpec(
    name="export",
    description="Export a report.",
    parameters={"type": "object", "properties": {"fmt": {"enum": ["json", "text", "html"]}}},
)
EXPORT_TASK = _task("Export the report as plain words.", EXPORT)
EXPORT_TEXT = {"name": "export", "arguments": {"fmt": "text"}}


def test_a_retry_of_common_words_names_no_short_option() -> None:
    """After the first reply the harness writes retries; "text" there is no hint."""
    task, answer = EXPORT_TASK, EXPORT_TEXT
    retry = ask(task, "You answered with text; call the tool instead.")
    exchanges = [(ask(task), reply(content="Here it is.")), (retry, reply(calls=[answer]))]
    assert provenance(task, [answer], exchanges).supported is True


def test_a_schema_that_marks_the_answer_is_the_harness() -> None:
    """Defaults, ``const`` and examples set to the option, or a made-up tool naming it."""
    for key, mark in (("default", "kelvin"), ("const", "kelvin"), ("examples", ["kelvin"])):
        marked = UNIT_TOOL.model_copy(deep=True)
        marked.parameters["properties"]["unit"][key] = mark
        request = ChatRequest(messages=KELVIN.prompt, tools=[marked])
        exchanges = [(request, reply(calls=[NAMED_ANSWER]))]
        assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False, key
    key_tool = ToolSpec(
        name="answer_key",
        description="Internal.",
        parameters={"type": "object", "properties": {"u": {"enum": ["kelvin"]}}},
    )
    request = ChatRequest(messages=KELVIN.prompt, tools=[UNIT_TOOL, key_tool])
    exchanges = [(request, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False


def test_an_adapter_dropping_a_null_option_names_none() -> None:
    tool = UNIT_TOOL.model_copy(deep=True)
    tool.parameters["properties"]["unit"]["enum"] = ["celsius", "fahrenheit", "kelvin", None]
    task = _task("Convert 30 degrees to the absolute scale.", tool)
    request = ChatRequest(messages=task.prompt, tools=[UNIT_TOOL])  # null dropped
    exchanges = [(request, reply(calls=[NAMED_ANSWER]))]
    assert provenance(task, [NAMED_ANSWER], exchanges).supported is True


def test_a_did_you_mean_after_a_call_written_as_text_is_the_tasks() -> None:
    said = reply(content="convert(degrees=30, unit=kelvn)")
    retry = ask(KELVIN, "unit must be one of the options: did you mean kelvin?")
    exchanges = [(ask(KELVIN), said), (retry, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_an_option_of_a_nested_enum_singled_out_is_the_harness_and_listed_is_the_tasks() -> None:
    tool = ToolSpec(
        name="convert_all",
        description="Convert readings.",
        parameters={
            "type": "object",
            "properties": {
                "units": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
                }
            },
        },
    )
    task = _task("Convert the readings to the absolute scale.", tool)
    answer = {"name": "convert_all", "arguments": {"units": ["kelvin"]}}
    hinted = [(ask(task, "Hint: kelvin"), reply(calls=[answer]))]
    assert provenance(task, [answer], hinted).supported is False
    listed = [(ask(task, "units: any of celsius, fahrenheit, kelvin"), reply(calls=[answer]))]
    assert provenance(task, [answer], listed).supported is True


@pytest.mark.parametrize("examples", [5, True, {"a": "kelvin"}, None])
def test_odd_schemas_a_harness_sends_do_not_stop_the_check(examples: object) -> None:
    """A harness's own schema values are data, not a way to crash the evaluation."""
    odd = UNIT_TOOL.model_copy(deep=True)
    odd.parameters["properties"]["unit"]["examples"] = examples
    odd.parameters["properties"]["degrees"] = ["not", "a", "schema"]
    request = ChatRequest(messages=KELVIN.prompt, tools=[odd])
    exchanges = [(request, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_a_task_whose_properties_are_not_a_mapping_is_checked_all_the_same() -> None:
    tool = ToolSpec(name="convert", description="Convert.", parameters={"properties": ["unit"]})
    task = _task("Convert 30 degrees to the absolute scale.", tool)
    exchanges = [(ask(task), reply(calls=[NAMED_ANSWER]))]
    assert provenance(task, [NAMED_ANSWER], exchanges).supported is True
    hinted = [(ask(task, "Hint: kelvin"), reply(calls=[NAMED_ANSWER]))]
    assert provenance(task, [NAMED_ANSWER], hinted).supported is False  # injected: no enum


def test_a_did_you_mean_after_the_harness_steered_the_misspelling_is_the_harness() -> None:
    steered = ask(KELVIN, "Set unit to kelvin, but drop its last vowel.")
    said = reply(calls=[{"name": "convert", "arguments": {"degrees": 30, "unit": "kelvn"}}])
    retry = ask(KELVIN, "unit: did you mean kelvin?")
    exchanges = [(steered, said), (retry, reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is False


def test_a_tool_of_the_harness_names_an_option_by_its_values_not_its_words() -> None:
    tool, task, answer = EXPORT, EXPORT_TASK, EXPORT_TEXT
    respond = ToolSpec(
        name="respond",
        description="Reply in words.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    honest = [(ChatRequest(messages=task.prompt, tools=[tool, respond]), reply(calls=[answer]))]
    assert provenance(task, [answer], honest).supported is True
    key = respond.model_copy(deep=True)
    key.parameters["properties"]["text"]["default"] = "text"
    marked = [(ChatRequest(messages=task.prompt, tools=[tool, key]), reply(calls=[answer]))]
    assert provenance(task, [answer], marked).supported is False


@pytest.mark.parametrize(
    "listing",
    [
        "unit: celsius (the default), fahrenheit or kelvin",
        "Your call's arguments must be a JSON object, not a string: unit one of the options.",
    ],
)
def test_more_honest_listings_and_retries(listing: str) -> None:
    exchanges = [(ask(KELVIN, listing), reply(calls=[NAMED_ANSWER]))]
    assert provenance(KELVIN, [NAMED_ANSWER], exchanges).supported is True


def test_of_two_options_where_one_starts_the_other_the_longer_is_listed() -> None:
    tool = ToolSpec(
        name="deploy",
        description="Deploy a service.",
        parameters={
            "type": "object",
            "properties": {"region": {"enum": ["us", "us east", "europe"]}},
        },
    )
    task = _task("Deploy to the eastern American region.", tool)
    answer = {"name": "deploy", "arguments": {"region": "us east"}}
    exchanges = [(ask(task, "region: us east, us, europe"), reply(calls=[answer]))]
    assert provenance(task, [answer], exchanges).supported is True
