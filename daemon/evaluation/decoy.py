"""The decoy: the real model, answering another task's question.

To tell a solve that came from the model from one the harness carried in (a memorised
answer, or one it had the model repeat), the candidate's held-out wins run again with the
task's own words replaced, in every request the harness sends, by a different task's. The
harness cannot tell: its task, its tools and the reply format are unchanged, and replies
carry no model name (the gateway strips it). Whatever the harness wrote itself stays as it
is, so an answer it put into its own request comes back all the same. A harness whose win
survives the decoy produced that answer without the model reading the question: the win is
not counted.

A harness can try to tell (a canary: "repeat the question", then compare). So the decoy's
words the model repeats in a reply are swapped back for the task's own, and the reply's
prompt-token count is the one the harness's own request would have had (by the provider's
count: exact for the embedded model, an estimate for others). Other replies still answer
another question, and ``ctx.tokens_left()`` still falls by what was spent, so a harness can
always tell in the end; which is why provenance, not the decoy, is the defence against
answers the harness steers the model to (DESIGN.md, "Model-free solves").
"""

from __future__ import annotations

import re
from typing import Any

from daemon.providers.base import ChatRequest, ChatResponse, Message, ToolCall
from daemon.tasks import Task


def _texts(task: Task, role: str) -> list[str]:
    return [m.content for m in task.prompt if m.role == role and m.content]


def replacements(task: Task, decoy: Task) -> list[tuple[str, str]]:
    """(the task's text, the decoy's text) pairs, longest first, by role and position; a role
    the decoy lacks takes the decoy's last text of the user role."""
    pairs: dict[str, str] = {}
    fallback = (_texts(decoy, "user") or [""])[-1]
    for role in ("system", "user"):
        mine, theirs = _texts(task, role), _texts(decoy, role)
        for i, text in enumerate(mine):
            pairs[text] = theirs[min(i, len(theirs) - 1)] if theirs else fallback
    code, other = task.meta.get("code_prompt"), decoy.meta.get("code_prompt")
    if isinstance(code, str) and code:
        pairs[code] = other if isinstance(other, str) else fallback
    return sorted(pairs.items(), key=lambda kv: len(kv[0]), reverse=True)


def _swap(text: str | None, pairs: list[tuple[str, str]]) -> str | None:
    if not text:
        return text
    # Placeholders first, so a decoy text containing another task text is not swapped twice.
    # Whatever the case and spacing: a harness that quotes the question re-spaced would
    # otherwise show the model the real question, and lose its honest wins to the decoy.
    marks: list[tuple[str, str]] = []
    for i, (mine, theirs) in enumerate(pairs):
        mark = f"\x00{i}\x00"
        words = mine.split()
        if not words:
            continue
        pattern = re.compile(r"\s+".join(map(re.escape, words)), re.IGNORECASE)
        text, found = pattern.subn(mark, text)  # the mark has no backslash
        if found:
            marks.append((mark, theirs))
    for mark, theirs in marks:
        text = text.replace(mark, theirs)
    return text


def decoy_request(request: ChatRequest, pairs: list[tuple[str, str]]) -> ChatRequest:
    """``request`` with the task's own words replaced by the decoy task's."""
    messages = [
        m
        if not m.content
        else Message.model_validate(m.model_dump() | {"content": _swap(m.content, pairs)})
        for m in request.messages
    ]
    return request.model_copy(update={"messages": messages})


def _swap_values(value: Any, back: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return _swap(value, back)
    if isinstance(value, dict):
        return {k: _swap_values(v, back) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap_values(v, back) for v in value]
    return value


def decoy_reply(
    response: ChatResponse, pairs: list[tuple[str, str]], prompt_shift: int
) -> ChatResponse:
    """The decoy's ``response`` as the harness sees it: the decoy task's texts in it swapped
    back for the task's own, and ``prompt_shift`` (own request's prompt tokens minus the
    swapped one's) added to its prompt tokens."""
    back = sorted(((theirs, mine) for mine, theirs in pairs if theirs), key=lambda kv: -len(kv[0]))
    calls = [
        ToolCall(id=c.id, name=c.name, arguments=_swap_values(c.arguments, back))
        for c in response.tool_calls
    ]
    usage = response.usage.model_copy(
        update={"prompt_tokens": max(0, response.usage.prompt_tokens + prompt_shift)}
    )
    content = _swap(response.content, back)
    return response.model_copy(update={"content": content, "tool_calls": calls, "usage": usage})
