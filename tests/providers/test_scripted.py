"""The scripted provider: rule and sequence modes, usage, max_tokens, strict files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from provider_helpers import MakeSettings

from daemon.config.policy import RetryPolicy
from daemon.errors import ProviderConfigError, ProviderError
from daemon.providers import make_provider
from daemon.providers.base import ChatRequest, Message, Provider, ToolCall, ToolSpec
from daemon.providers.scripted import count_tokens

pytestmark = [pytest.mark.anyio, pytest.mark.unit]


def _script(tmp_path: Path, text: str, name: str = "replies.toml") -> str:
    (tmp_path / name).write_text(textwrap.dedent(text))
    return f"scripted:{name}"


def _ask(text: str, *, system: str | None = None, max_tokens: int = 512) -> ChatRequest:
    messages = [Message(role="system", content=system)] if system else []
    messages.append(Message(role="user", content=text))
    return ChatRequest(messages=messages, max_tokens=max_tokens)


def _provider(ref: str, make_settings: MakeSettings) -> Provider:
    return make_provider(ref, make_settings(), RetryPolicy())


RULES = """
    mode = "rules"

    [[rules]]
    match = "(?i)triangle"
    system = "geometry"
    tool_calls = [{ name = "triangle_area", arguments = { base = 10, height = 5 } }]
    usage = { prompt_tokens = 100, completion_tokens = 20 }

    [[rules]]
    match_any = "capital"
    content = "Paris"

    [[rules]]
    content = "I do not know."
"""


async def test_rules_first_match_wins(tmp_path: Path, make_settings: MakeSettings) -> None:
    provider = _provider(_script(tmp_path, RULES), make_settings)
    hit = await provider.chat(_ask("Area of a Triangle?", system="You do geometry."))
    assert hit.tool_calls == [
        ToolCall(id="call_0_0", name="triangle_area", arguments={"base": 10, "height": 5})
    ]
    assert hit.content is None and hit.finish_reason == "tool_calls"
    assert (hit.usage.prompt_tokens, hit.usage.completion_tokens) == (100, 20)
    # The system pattern is required too: without it the catch-all answers.
    assert (await provider.chat(_ask("Area of a triangle?"))).content == "I do not know."
    capital = await provider.chat(
        ChatRequest(
            messages=[
                Message(role="user", content="What is the capital of France?"),
                Message(role="assistant", content="Let me think."),
                Message(role="user", content="Well?"),
            ]
        )
    )
    assert capital.content == "Paris"
    assert capital.model == provider.ref


async def test_no_matching_rule_is_an_error(tmp_path: Path, make_settings: MakeSettings) -> None:
    ref = _script(tmp_path, 'mode = "rules"\n[[rules]]\nmatch = "^yes$"\ncontent = "ok"\n')
    provider = _provider(ref, make_settings)
    with pytest.raises(ProviderError, match=r"no rule in .*replies\.toml matches") as caught:
        await provider.chat(_ask("no"))
    assert caught.value.kind == "scripted"


async def test_computed_usage_is_deterministic(tmp_path: Path, make_settings: MakeSettings) -> None:
    provider = _provider(_script(tmp_path, RULES), make_settings)
    tool = ToolSpec(name="f", parameters={"type": "object", "properties": {}})
    request = ChatRequest(messages=[Message(role="user", content="x" * 40)], tools=[tool])
    first, second = await provider.chat(request), await provider.chat(request)
    assert first.usage == second.usage
    prompt_text = "x" * 40 + json.dumps(tool.model_dump())
    assert first.usage.prompt_tokens == count_tokens(prompt_text)
    assert first.usage.completion_tokens == count_tokens("I do not know.") == 4


async def test_replies_longer_than_max_tokens_are_cut(
    tmp_path: Path, make_settings: MakeSettings
) -> None:
    ref = _script(tmp_path, 'mode = "rules"\n[[rules]]\ncontent = "' + "word " * 40 + '"\n')
    provider = _provider(ref, make_settings)
    response = await provider.chat(_ask("go", max_tokens=10))
    assert response.usage.completion_tokens == 10
    assert response.finish_reason == "length"
    assert response.content is not None and len(response.content) == 200 * 10 // 50


async def test_sequence_mode_in_turn(tmp_path: Path, make_settings: MakeSettings) -> None:
    ref = _script(
        tmp_path,
        """
        mode = "sequence"
        [[replies]]
        content = "patch 1"
        [[replies]]
        error = "simulated outage"
        [[replies]]
        content = "patch 2"
        """,
    )
    provider = _provider(ref, make_settings)
    assert (await provider.chat(_ask("propose"))).content == "patch 1"
    with pytest.raises(ProviderError, match="simulated outage") as caught:
        await provider.chat(_ask("propose"))
    assert caught.value.kind == "unavailable"
    assert (await provider.chat(_ask("propose"))).content == "patch 2"
    with pytest.raises(ProviderError, match=r"all 3 replies .* are used"):
        await provider.chat(_ask("propose"))


@pytest.mark.parametrize(("after_last", "expected"), [("repeat_last", "b"), ("cycle", "a")])
async def test_sequence_after_the_last_reply(
    tmp_path: Path, make_settings: MakeSettings, after_last: str, expected: str
) -> None:
    ref = _script(
        tmp_path,
        f'mode = "sequence"\nafter_last = "{after_last}"\n'
        '[[replies]]\ncontent = "a"\n[[replies]]\ncontent = "b"\n',
    )
    provider = _provider(ref, make_settings)
    seen = [(await provider.chat(_ask("?"))).content for _ in range(3)]
    assert seen == ["a", "b", expected]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'mode = "rules"\n[[rules]]\ncontent = "x"\ncontnet = "y"\n',
            r"unknown key 'rules\.0\.contnet'",
        ),
        (
            'mode = "rules"\n[[rules]]\nmatch = "(unclosed"\ncontent = "x"\n',
            r"rules\.0\.match.*regular expression",
        ),
        ('mode = "rules"\n[[rules]]\nmatch = "x"\n', "needs content, tool_calls or error"),
        ('mode = "sequence"\n[[rules]]\ncontent = "x"\n', "mode 'sequence' needs"),
        ('mode = "chaos"\n[[rules]]\ncontent = "x"\n', r"key 'mode'"),
        (
            'mode = "rules"\n[[rules]]\ncontent = "x"\nusage = { prompt_tokens = -1 }\n',
            "prompt_tokens",
        ),
        ("mode = \n", "not valid TOML"),
    ],
)
def test_strict_files_name_the_file_and_key(
    tmp_path: Path, make_settings: MakeSettings, text: str, message: str
) -> None:
    ref = _script(tmp_path, text, name="bad.toml")
    with pytest.raises(ProviderConfigError, match=message) as caught:
        _provider(ref, make_settings)
    assert "bad.toml" in str(caught.value)


def test_relative_paths_resolve_against_the_base_dir(
    tmp_path: Path, make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scripts").mkdir()
    _script(tmp_path, RULES, name="scripts/r.toml")
    monkeypatch.chdir("/")
    provider = _provider("scripted:scripts/r.toml", make_settings)
    assert provider.ref == "scripted:scripts/r.toml"


async def test_one_call_per_reply_keeps_the_first_call(
    tmp_path: Path, make_settings: MakeSettings
) -> None:
    """``parallel_tool_calls=False``: a scripted reply of several calls is what a model asked
    for one call writes, its first; the usage it computes counts only that one."""
    ref = _script(
        tmp_path,
        """
        mode = "rules"

        [[rules]]
        tool_calls = [
            { name = "area", arguments = { side = 1 } },
            { name = "area", arguments = { side = 1 } },
        ]
        """,
    )
    provider = _provider(ref, make_settings)
    both = await provider.chat(_ask("area?"))
    one = await provider.chat(_ask("area?").model_copy(update={"parallel_tool_calls": False}))
    assert [c.name for c in both.tool_calls] == ["area", "area"]
    assert [c.name for c in one.tool_calls] == ["area"] and one.finish_reason == "tool_calls"
    assert one.usage.completion_tokens < both.usage.completion_tokens
