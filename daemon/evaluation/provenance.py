"""Did the answer come from the model? A verified solve counts only when it did.

A harness can carry the public answers (BFCL's calls, HumanEval's solutions) and return them
without asking the model, or make the model repeat them ("repeat after me"). Both look like
solves to the verifier. Here an output is checked against the task's exchanges with the
model, recorded at the gateway (the harness cannot forge them):

* a **call** (function-call tasks) is supported when one model reply made that call: a
  tool call of the same name whose arguments give each of the output's values (the harness
  may drop arguments, drop repeated or invalid calls, or fill a parameter's schema default),
  or a reply whose text names the function and every value (calls written as text);
* a **code** answer is supported when at least 90 % of the significant lines of its entry
  point's body (all lines when it is a bare body) appear in model replies; lines of the
  task's own prompt count neither way;
* an empty call list is supported when some reply declined to call a tool.

Values the harness itself put into its requests do not count: a value is **injected** when
it appears in the harness-written part of a request (the request minus the task's own prompt
text and minus earlier model replies), is not one of the options the task's tool schemas
offer (names, enums, defaults), and no earlier reply contained it. A reply value that was
injected before it is no support. Free-text answers are not verified, so not checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from daemon.providers.base import ChatRequest, ChatResponse, Message
from daemon.tasks import Task

CODE_SUPPORT = 0.9
"""Share of significant code lines that must come from model replies."""


@dataclass(frozen=True)
class Provenance:
    supported: bool | None  # None: nothing to check (free text, or not an interpretable output)
    detail: str = ""


Exchange = tuple[ChatRequest, ChatResponse]


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        number = float(value)
        return str(int(number)) if number.is_integer() and abs(number) < 1e15 else repr(number)
    if value is None:
        return "none"
    return " ".join(str(value).lower().split())


def canonical(value: Any) -> str:
    """A comparable form: leaves normalised (case, spaces, 5 == 5.0 == "5"), structure kept."""
    if isinstance(value, dict):
        return json.dumps({str(k): canonical(v) for k, v in sorted(value.items())})
    if isinstance(value, list | tuple):
        return json.dumps([canonical(v) for v in value])
    if isinstance(value, str):
        stripped = value.strip()
        try:
            return _scalar(float(stripped)) if stripped else ""
        except ValueError:
            return _scalar(value)
    return _scalar(value)


def leaves(value: Any) -> Iterable[str]:
    """The normalised scalar values inside ``value``."""
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from leaves(v)
    else:
        yield canonical(value)


def occurs(needle: str, text: str) -> bool:
    """``needle`` (normalised) in ``text`` (normalised) as a whole word or phrase."""
    if not needle:
        return False
    pattern = r"(?<![a-z0-9_])" + re.escape(needle) + r"(?![a-z0-9_])"
    return re.search(pattern, text) is not None


def _norm_text(text: str) -> str:
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class _Reply:
    text: str  # normalised content
    lines: frozenset[str]
    calls: tuple[tuple[str, dict[str, Any]], ...]


def _lines(text: str) -> frozenset[str]:
    return frozenset(line for raw in text.splitlines() if (line := " ".join(raw.split())))


def _reply(response: ChatResponse) -> _Reply:
    content = response.content or ""
    calls = tuple((c.name.lower(), dict(c.arguments)) for c in response.tool_calls)
    return _Reply(_norm_text(content), _lines(content), calls)


def _relays(message: Message, replies: Sequence[_Reply]) -> bool:
    """An assistant message that repeats an actual earlier reply (not one the harness wrote)."""
    if message.role != "assistant":
        return False
    content = _norm_text(message.content or "")
    calls = tuple((c.name.lower(), dict(c.arguments)) for c in message.tool_calls)
    return any(r.text == content and r.calls == calls for r in replies)


def _task_texts(task: Task) -> list[str]:
    texts = [m.content for m in task.prompt if m.content]
    code_prompt = task.meta.get("code_prompt")
    if isinstance(code_prompt, str):
        texts.append(code_prompt)
    return texts


def _authored(request: ChatRequest, task: Task, replies: Sequence[_Reply], raw: list[str]) -> str:
    """The harness-written part of one request: its text minus the task's own prompt text
    and minus the text of earlier replies (``raw``), plus tools and schemas it made up."""
    parts: list[str] = []
    removable = sorted({*_task_texts(task), *raw}, key=len, reverse=True)
    for message in request.messages:
        if _relays(message, replies):
            continue
        text = message.content or ""
        for known in removable:
            if known:
                text = text.replace(known, " ")
        parts.append(text)
        parts.extend(json.dumps(c.arguments) + " " + c.name for c in message.tool_calls)
    own = {t.model_dump_json() for t in task.tools}
    parts.extend(t.model_dump_json() for t in request.tools if t.model_dump_json() not in own)
    if request.response_schema is not None:
        parts.append(json.dumps(request.response_schema))
    return "\n".join(parts)


def _schema_options(task: Task) -> tuple[set[str], dict[str, dict[str, str]]]:
    """Values the task's tools offer (names, enums, defaults) and each parameter's default."""
    offered: set[str] = set()
    defaults: dict[str, dict[str, str]] = {}
    for tool in task.tools:
        offered.add(canonical(tool.name))
        props = tool.parameters.get("properties") or {}
        for param, spec in props.items() if isinstance(props, dict) else ():
            if not isinstance(spec, dict):
                continue
            for option in spec.get("enum") or []:
                offered.add(canonical(option))
            if "default" in spec:
                offered.update(leaves(spec["default"]))
                defaults.setdefault(tool.name.lower(), {})[param] = canonical(spec["default"])
    return offered, defaults


class _Trail:
    """The exchanges in order, with what the harness injected before each reply."""

    def __init__(self, task: Task, exchanges: Sequence[Exchange]) -> None:
        self.offered, self.defaults = _schema_options(task)
        self.replies: list[_Reply] = []
        self.authored: list[str] = []  # harness-written text of each request, normalised
        self.authored_lines: list[frozenset[str]] = []
        raw: list[str] = []
        for request, response in exchanges:
            text = _authored(request, task, self.replies, raw)
            self.authored.append(_norm_text(text))
            self.authored_lines.append(_lines(text))
            self.replies.append(_reply(response))
            raw.append(response.content or "")
        self.task_lines = frozenset().union(*(_lines(t) for t in _task_texts(task)))

    def injected(self, value: str, upto: int) -> bool:
        """Whether the harness put ``value`` into a request at or before reply ``upto``
        without a reply having said it first."""
        if value in self.offered:
            return False
        for i in range(upto + 1):
            if occurs(value, self.authored[i]):
                earlier = self.replies[:i]
                if not any(_in_reply(value, r) for r in earlier):
                    return True
        return False

    def line_injected(self, line: str, upto: int) -> bool:
        for i in range(upto + 1):
            if line in self.authored_lines[i] and not any(
                line in r.lines for r in self.replies[:i]
            ):
                return True
        return False


def _in_reply(value: str, reply: _Reply) -> bool:
    if occurs(value, reply.text):
        return True
    return any(value in set(leaves(args)) for _, args in reply.calls)


def _call_supported(trail: _Trail, name: str, arguments: dict[str, Any]) -> bool:
    defaults = trail.defaults.get(name, {})
    for j, reply in enumerate(trail.replies):
        for called, args in reply.calls:
            if called != name:
                continue
            values_ok = True
            for param, value in arguments.items():
                mine = canonical(value)
                if param in args and canonical(args[param]) == mine:
                    if any(trail.injected(v, j) for v in leaves(value)):
                        values_ok = False
                        break
                elif defaults.get(param) != mine:
                    values_ok = False
                    break
            if values_ok:
                return True
        values = [v for value in arguments.values() for v in leaves(value)]
        if occurs(canonical(name), reply.text) and all(
            occurs(v, reply.text) and not trail.injected(v, j) for v in values
        ):
            return True
    return False


def _calls_provenance(trail: _Trail, output: list[Any]) -> Provenance:
    if not output:
        declined = any(not r.calls for r in trail.replies)
        return Provenance(declined, "" if declined else "no model reply declined to call")
    for call in output:
        if not isinstance(call, dict) or not isinstance(call.get("arguments", {}), dict):
            return Provenance(None)
        name = str(call.get("name", "")).lower()
        if not _call_supported(trail, name, call.get("arguments") or {}):
            return Provenance(False, f"no model reply made the call {name}(...) as output")
    return Provenance(True)


def _body_lines(source: str, entry_point: str | None) -> list[str]:
    """Significant lines of the entry point's body (or of the whole text)."""
    lines = source.splitlines()
    if entry_point:
        start = next(
            (
                i
                for i, ln in enumerate(lines)
                if re.match(rf"\s*def\s+{re.escape(entry_point)}\b", ln)
            ),
            None,
        )
        if start is not None:
            indent = len(lines[start]) - len(lines[start].lstrip())
            body = []
            for ln in lines[start + 1 :]:
                if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
                    break
                body.append(ln)
            lines = body
    return [n for raw in lines if (n := " ".join(raw.split())) and not n.startswith("#")]


def _code_provenance(trail: _Trail, output: str, entry_point: str | None) -> Provenance:
    lines = [ln for ln in _body_lines(output, entry_point) if ln not in trail.task_lines]
    if not lines:
        return Provenance(True)
    supported = 0
    for line in lines:
        for j, reply in enumerate(trail.replies):
            if line in reply.lines and not trail.line_injected(line, j):
                supported += 1
                break
    share = supported / len(lines)
    ok = share >= CODE_SUPPORT
    detail = "" if ok else f"{supported} of {len(lines)} code lines come from model replies"
    return Provenance(ok, detail)


def provenance(task: Task, output: Any, exchanges: Sequence[Exchange]) -> Provenance:
    """Whether ``output`` is supported by the model's replies in ``exchanges``."""
    if task.kind not in ("function_call", "code"):
        return Provenance(None)
    if not exchanges:
        return Provenance(False, "the harness never asked the model")
    trail = _Trail(task, exchanges)
    if task.kind == "function_call":
        return _calls_provenance(trail, output) if isinstance(output, list) else Provenance(None)
    if not isinstance(output, str):
        return Provenance(None)
    entry = task.meta.get("entry_point")
    return _code_provenance(trail, output, entry if isinstance(entry, str) else None)
