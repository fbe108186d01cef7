"""Did the answer come from the model? A verified solve counts only when it did.

A harness can carry the public answers (BFCL's calls, HumanEval's solutions) and return them
without asking the model, or make the model repeat them ("repeat after me"). Both look like
solves to the verifier. Here an output is checked against the task's exchanges with the
model, recorded at the gateway (the harness cannot forge them):

* a **call** (function-call tasks) is supported when one model reply made that call: a
  tool call of the same name whose arguments give each of the output's values (the harness
  may drop arguments, drop repeated or invalid calls, fill a parameter's schema default, or
  replace a value the model gave outside a parameter's enum by the option nearest to it),
  or a reply whose text names the function and every value (calls written as text);
* a **code** answer is supported when at least 90 % of its significant code (all of it, by
  characters; comments and plain imports aside) is lines that appear in model replies;
  lines of the task's own prompt count neither way;
* an empty call list is supported when some reply declined to call a tool;
* in a **tool-use** task, every tool call that got a result must be supported like a call
  (values the environment said before count as the model's to relay).

An **enum option** the harness singled out for the task (beside the parameter's name, by
name, or in the tool schemas it sent: the enum cut down to it, a default, ``const`` or
example set to it, a made-up tool with such a value; a listing of all the options is the
task's) is its choice, not the model's, unless the model had written, before, a value it is
the nearest to (:meth:`_Trail.chosen_at`).

Values the harness itself put into its requests do not count: a value is **injected** when
it appears in the harness-written part of a request (the request minus the task's own prompt
text, relayed model replies and the harness's **fixed block**), the task itself does not
state it (its prompt and its own tool schemas: descriptions, enums, defaults), and no earlier
reply contained it. A reply value that was injected before it is no support. The fixed block
is the text the harness sends identically to every task (an instruction, examples): the
harness's design, not a leak (:func:`fixed_lines` finds it over a run's tasks).

**Relay is not authorship.** A value bound to a parameter counts as the model's only when
the model bound it: a call whose request already stated the pairing (the parameter's name
with the value beside it, ``unit=cm``, ``"base": 10``, in text the harness wrote for this
task and no earlier reply wrote) is the harness's; and reply text that copies its request
(an echo, "repeat after me") supports no value. A task's knowledge a harness brings from the
public suite is met by held-out tasks it cannot know (:mod:`daemon.suites.rewrite`); what is
checked here is that what the task did not say, or what the harness paired for it, did not
come from the harness. "Appears" sees through the disguises any model undoes on
request: case, spacing and punctuation between its letters or digits (``S-a-n F r a n``),
the value reversed, a whole number in hex, octal or binary; code lines likewise, also when
commented out or numbered.

A **free-text answer** (kind ``answer``) is supported when its words come from model
replies: every number, and 90 % of the rest by characters (cutting an answer out of a
reply, reformatting it, dropping words: the model's; a computed or memorised answer, an
advertisement, the client's system prompt repeated: the harness's). A tool-use task's final
text is not checked: its calls are.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from daemon.evaluation.disguise import (
    WORD,
    Spelled,
    decoded,
    disguises,
    form_of,
    in_pieces,
    norm_text,
)
from daemon.providers.base import ChatRequest, ChatResponse, Message
from daemon.tasks import Task

CODE_SUPPORT = 0.9
"""Share of the significant code (by characters) that must come from model replies."""

LONG_LINE = 16
"""Characters (spaces aside) from which every code line must come from a model reply."""

MIN_LINE_WORDS = 10
"""Letters and digits from which a code line is looked for in disguise, not only whole."""


@dataclass(frozen=True)
class Provenance:
    supported: bool | None  # None: nothing to check (free text, or not an interpretable output)
    detail: str = ""


Exchange = tuple[ChatRequest, ChatResponse]


@dataclass(frozen=True)
class EnvironmentText:
    text: str  # what a task's trusted environment said: a tool result, a later turn
    after: int  # the number of model exchanges before it
    call: tuple[str, dict[str, Any]] | None = None  # the (name, arguments) it answered


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


def _hidden_in(value: str, spelled: Spelled) -> bool:
    return (
        occurs(value, spelled.text)
        or any(spelled.holds(form) for form in disguises(value))
        or in_pieces(value, spelled)
    )


@dataclass(frozen=True)
class _Reply:
    text: str  # normalised content, minus what copies the harness's part of its request
    fresh: str  # minus what copies any of its request (the task's words too): what it bound
    whole: str  # normalised content
    lines: frozenset[str]
    calls: tuple[tuple[str, dict[str, Any]], ...]


def _lines(text: str) -> frozenset[str]:
    return frozenset(line for raw in text.splitlines() if (line := " ".join(raw.split())))


RELAY_WORDS = 5
"""Words in a row from which reply text that the harness's part of its request also holds
is a copy (an echo, a "repeat after me"), which supports no value."""


def own_words(reply: str, request: str) -> str:
    """``reply`` (normalised) with every run of ``RELAY_WORDS`` or more words that
    ``request`` also holds in that order blanked out: what the reply said that its request
    did not."""
    text = norm_text(reply)
    said = list(WORD.finditer(text))
    if len(said) < RELAY_WORDS:
        return text
    heard = WORD.findall(norm_text(request))
    grams = {tuple(heard[i : i + RELAY_WORDS]) for i in range(len(heard) - RELAY_WORDS + 1)}
    words = [m.group() for m in said]
    copied = [False] * len(said)
    for i in range(len(said) - RELAY_WORDS + 1):
        if tuple(words[i : i + RELAY_WORDS]) in grams:
            copied[i : i + RELAY_WORDS] = [True] * RELAY_WORDS
    if not any(copied):
        return text
    out, last = [], 0
    for m, c in zip(said, copied, strict=True):
        if c:
            out += [text[last : m.start()], " "]
            last = m.end()
    return " ".join("".join([*out, text[last:]]).split())


def _reply(response: ChatResponse, authored: str, request: ChatRequest) -> _Reply:
    content = response.content or ""
    calls = tuple((c.name.lower(), dict(c.arguments)) for c in response.tool_calls)
    heard = "\n".join(m.content or "" for m in request.messages)
    own, fresh = own_words(content, authored), own_words(content, heard)
    return _Reply(own, fresh, norm_text(content), _lines(content), calls)


def _relays(message: Message, replies: Sequence[_Reply]) -> bool:
    """An assistant message that repeats an actual earlier reply (not one the harness wrote)."""
    if message.role != "assistant":
        return False
    content = norm_text(message.content or "")
    calls = tuple((c.name.lower(), dict(c.arguments)) for c in message.tool_calls)
    return any(r.whole == content and r.calls == calls for r in replies)


def _task_texts(task: Task) -> list[str]:
    texts = [m.content for m in task.prompt if m.content]
    code_prompt = task.meta.get("code_prompt")
    if isinstance(code_prompt, str):
        texts.append(code_prompt)
    return texts


def _strings(value: Any) -> set[str]:
    """Every key and scalar in a JSON-like value, as text."""
    if isinstance(value, dict):
        return {str(k) for k in value}.union(*(_strings(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value))
    return {value if isinstance(value, str) else json.dumps(value)}


TASK_LINE = 20
"""Characters from which one line of the task's own text counts as the task's when quoted
alone (shorter ones, "Args:", are too common to say where they came from)."""


def _task_patterns(task: Task) -> list[re.Pattern[str]]:
    """The task's own texts, and each of their lines of ``TASK_LINE`` characters or more,
    as patterns matching them whatever the case and spacing: a harness that quotes the
    question re-spaced or a line of the code prompt alone still only quotes the task."""
    texts = set(_task_texts(task))
    texts |= {
        ln.strip() for t in list(texts) for ln in t.splitlines() if len(ln.strip()) >= TASK_LINE
    }
    words = [t.split() for t in sorted(texts, key=len, reverse=True)]
    return [re.compile(r"\s+".join(map(re.escape, w)), re.IGNORECASE) for w in words if w]


def _authored(
    request: ChatRequest, task: Task, replies: Sequence[_Reply], fixed: frozenset[str] = frozenset()
) -> str:
    """The harness-written part of one request: its text minus the task's own prompt text
    and minus assistant turns that relay earlier replies, plus tools and schemas it made up.
    (Earlier replies quoted inside other messages stay: what they said is checked against
    the replies themselves, and cutting a reply's text out everywhere would let a short
    reply, steered to be "s", cut an injected value apart.)"""
    parts: list[str] = []
    removable = _task_patterns(task)
    for message in request.messages:
        if _relays(message, replies):
            continue
        text = message.content or ""
        for known in removable:
            text = known.sub(" ", text)
        # Names and ids reach the model too (a tool result's name, a speaker's name).
        parts.extend([text, message.name or "", message.tool_call_id or ""])
        parts.extend(f"{json.dumps(c.arguments)} {c.name} {c.id}" for c in message.tool_calls)
    if fixed:
        parts = [
            "\n".join(ln for ln in p.splitlines() if " ".join(ln.split()) not in fixed)
            for p in parts
        ]
    # Of tools the harness rewrote, only what it added: trimming a schema (dropping its
    # descriptions) adds nothing, while the task's own enum options stay the task's.
    own = set().union(*(_strings(t.model_dump()) for t in task.tools))
    own_text = norm_text(" ".join(sorted(own)))
    for tool in request.tools:
        added = _strings(tool.model_dump()) - own
        # A description cut short is still the task's own words.
        parts.extend(sorted(a for a in added if norm_text(a) not in own_text))
    if request.response_schema is not None:
        parts.append(json.dumps(request.response_schema))
    return "\n".join(parts)


Options = dict[str, dict[str, frozenset[str]]]


def _schema_options(task: Task) -> tuple[set[str], dict[str, dict[str, str]], Options]:
    """Values the task's tools offer (names, enums, defaults), each parameter's default and
    each parameter's enum options (canonical), by tool."""
    offered: set[str] = set()
    defaults: dict[str, dict[str, str]] = {}
    enums: Options = {}
    for tool in task.tools:
        offered.add(canonical(tool.name))
        props = tool.parameters.get("properties") or {}
        for param, spec in props.items() if isinstance(props, dict) else ():
            if not isinstance(spec, dict):
                continue
            # A parameter's own options, or those of the enums nested in it (an array of
            # units, an object with a unit): leaves of its value may be among them.
            options = frozenset(canonical(o) for e in _enums_in(spec) for o in e)
            offered.update(options)
            if options:
                enums.setdefault(tool.name.lower(), {})[param] = options
            if "default" in spec:
                offered.update(leaves(spec["default"]))
                defaults.setdefault(tool.name.lower(), {})[param] = canonical(spec["default"])
    return offered, defaults, enums


DESCRIPTION_WORDS = 3
"""Words from which a schema description, restated in the harness's text, is cut out before
options are looked for there (a shorter one, "The unit", would cut words the harness
wrote)."""


def _descriptions(value: Any) -> Iterable[str]:
    """Every description in a JSON schema."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "description" and isinstance(item, str):
                yield item
            else:
                yield from _descriptions(item)
    elif isinstance(value, list):
        for item in value:
            yield from _descriptions(item)


def _property_names(value: Any) -> Iterable[str]:
    """Every property name in a JSON schema."""
    if isinstance(value, dict):
        props = value.get("properties")
        if isinstance(props, dict):
            yield from (str(k) for k in props)
        for item in value.values():
            yield from _property_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _property_names(item)


def _enums_in(spec: Any) -> list[list[Any]]:
    """The enums of one parameter's schema: its own, or those nested in its items and
    properties, each in its schema's order."""
    if not isinstance(spec, dict):
        return []
    found = [spec["enum"]] if isinstance(spec.get("enum"), list) and spec["enum"] else []
    props = spec.get("properties")
    for inner in [spec.get("items"), *(props.values() if isinstance(props, dict) else ())]:
        found += _enums_in(inner)
    return found


def _enum_lists(task: Task) -> list[list[Any]]:
    """Each enum of the task's tools (nested ones too), in its schema's order."""
    found = []
    for tool in task.tools:
        props = tool.parameters.get("properties") or {}
        for spec in props.values() if isinstance(props, dict) else ():
            found += _enums_in(spec)
    return found


BLANK_OPTIONS = frozenset({"none", ""})
"""Options a provider's adapter may drop from an enum it sends (some APIs refuse null)."""


def _props(schema: Any) -> dict[str, Any]:
    """A JSON schema's properties, or none when it has no such mapping."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _marks(schema: Any) -> list[Any]:
    """The values a schema points a model at besides its enum: default, ``const``, examples
    (a list, or one value), its nested schemas' too."""
    if not isinstance(schema, dict):
        return []
    examples = schema.get("examples")
    found = [schema.get("default"), schema.get("const")]
    found += examples if isinstance(examples, list) else [examples]
    for inner in [schema.get("items"), *_props(schema).values()]:
        found += _marks(inner)
    return [m for m in found if m is not None]


def _narrowed(task: Task, request: ChatRequest) -> set[tuple[str, str, str]]:
    """(tool, parameter, option) for each option of a task's enum (nested ones too) that a
    request's tool schemas single out: an enum cut down to it (a schema cut to the answer
    tells the model which to take; dropping the enum altogether, or keeping a run from its
    first option, a long enum cut short, names none), a default, ``const`` or example set
    to it other than the task's own, or a tool the task does not have with such a value."""
    kept: set[tuple[str, str, str]] = set()
    own = {t.name.lower(): t for t in task.tools}
    options = {
        (name, param): {canonical(o) for e in _enums_in(spec) for o in e}
        for name, t in own.items()
        for param, spec in _props(t.parameters).items()
    }
    for tool in request.tools:
        mine = own.get(tool.name.lower())
        if mine is None:
            # A tool of the harness's own: an option among its schema's values (a default,
            # an example, an enum that is not all of the task's; not its words: a "text"
            # parameter names no option), whatever its name.
            marked = {canonical(v) for v in _marks(tool.parameters)}
            sent_enums = [{canonical(v) for v in e} for e in _enums_in(tool.parameters)]
            for (n, p), full in options.items():
                kept.update((n, p, o) for o in full & marked)
                for values in sent_enums:
                    if not values >= full - BLANK_OPTIONS:
                        kept.update((n, p, o) for o in full & values)
            continue
        sent = _props(tool.parameters)
        for param, spec in _props(mine.parameters).items():
            if options.get((tool.name.lower(), param)) and param in sent:
                kept.update(_singled_in(tool.name.lower(), param, spec, sent[param]))
    return kept


def _singled_in(tool: str, param: str, spec: Any, given: Any) -> set[tuple[str, str, str]]:
    """The options one parameter's schema as sent singles out (see :func:`_narrowed`)."""
    out: set[tuple[str, str, str]] = set()
    full = {canonical(o) for e in _enums_in(spec) for o in e}
    theirs = {canonical(m) for m in _marks(spec)}
    for mark in map(canonical, _marks(given)):
        if mark in full and mark not in theirs:
            out.add((tool, param, mark))
    for sent, own in zip(_enums_in(given), _enums_in(spec), strict=False):
        wanted = [canonical(o) for o in own if canonical(o) not in BLANK_OPTIONS]
        said = [canonical(o) for o in sent]
        cut_short = len(wanted) >= LONG_ENUM and len(said) >= 2 and said == wanted[: len(said)]
        if not set(said) >= set(wanted) and not cut_short:
            out.update((tool, param, o) for o in said if o in full)
    return out


def _written_binding(param: str) -> re.Pattern[str]:
    """``param`` given a value in text (normalised): ``unit=kelvn``, ``"unit": "kelvn"``."""
    name = re.escape(param.lower())
    return re.compile(rf"(?<![a-z0-9_]){name}[\"']?\s*[=:]\s*[\"']?([^\"',)\s]+)")


class _Trail:
    """The exchanges in order, with what the harness injected before each reply."""

    def __init__(
        self,
        task: Task,
        exchanges: Sequence[Exchange],
        heard: Sequence[EnvironmentText] = (),
        fixed: frozenset[str] = frozenset(),
    ) -> None:
        self.offered, self.defaults, self.enums = _schema_options(task)
        self.stated, self.stated_text, self.stated_numbers = _task_statements(task)
        self.prompt_text = norm_text("\n".join(_task_texts(task)))
        self.heard = [(h.after, norm_text(h.text)) for h in heard]
        self.replies: list[_Reply] = []
        self.authored: list[Spelled] = []  # harness-written text of each request
        self.authored_lines: list[frozenset[str]] = []
        self.decoded: list[list[Spelled]] = []  # the same, with encodings undone
        # The same views with the task's enum listings cut out, and the options each request's
        # own tool schemas kept of a task's enum when they dropped others: where the harness
        # singled out an option for this task (see ``chosen``).
        enums = [_enum_words(options) for options in _enum_lists(task)]
        described = [d for t in task.tools for d in [t.description, *_descriptions(t.parameters)]]
        # Names too: an option that is a word of a parameter's name (``date`` of
        # ``start_date``) is named by any rendering of the schema.
        names = [n for t in task.tools for n in [t.name, *_property_names(t.parameters)]]
        self.described_text = norm_text("\n".join([*described, *names]).replace("_", " "))
        phrases = {tuple(WORD.findall(norm_text(d))) for d in described}
        listings = Listings(enums, (p for p in phrases if len(p) >= DESCRIPTION_WORDS))
        self.unlisted: list[list[Spelled]] = []
        self.unlisted_words: list[list[list[str]]] = []
        self.narrowed: list[set[tuple[str, str, str]]] = []
        for request, response in exchanges:
            text = _authored(request, task, self.replies, fixed)
            self.authored.append(Spelled(text))
            self.authored_lines.append(_lines(text))
            self.decoded.append([Spelled(plain) for plain in decoded(text)])
            views = (self.authored[-1], *self.decoded[-1])
            self.unlisted.append([Spelled(listings.cut(v.text)) for v in views])
            self.unlisted_words.append([WORD.findall(v.text) for v in self.unlisted[-1]])
            self.narrowed.append(_narrowed(task, request))
            # Only a copy of what the harness wrote is a relay: a reply quoting the task's
            # own words (a long string value, the function's name) says what the task said.
            self.replies.append(_reply(response, text, request))
        self.task_lines = frozenset().union(*(_lines(t) for t in _task_texts(task)))

    def said_by_task(self, value: str) -> bool:
        """Whether the task itself states ``value``: its prompt, or its own tool schemas
        (descriptions, enums, defaults), however the harness re-sends them."""
        if value in self.offered or value in self.stated or occurs(value, self.stated_text):
            return True
        return value in self.stated_numbers

    def paired(self, param: str, value: Any, upto: int) -> bool:
        """Whether text the harness wrote for this task (its fixed block aside), at or
        before request ``upto``, put ``value`` beside the parameter's name (``unit=cm``,
        ``"base": 10``, "set limit to 5") before any reply did: then a reply making that
        binding only relays it (even where the question pairs them too: then the model had
        only to read, and the harness read for it). Options the task's schema gives (enums,
        defaults) are the task's."""
        first = next(iter(leaves(value)), "")
        if not first or first in self.offered:
            return False
        name = WORD.findall(param.lower())
        said = WORD.findall(first)
        if not name or not said:
            return False
        for i in range(upto + 1):
            if _pairs(name, said, WORD.findall(self.authored[i].text)):
                # What the environment said before (a tool result's "folder": "x") is its to
                # say, and the model's to use.
                env = [text for after, text in self.heard if after <= i]
                if any(_pairs(name, said, WORD.findall(text)) for text in env):
                    return False
                return not any(_binds(r, param, first) for r in self.replies[:i])
        return False

    def injected(self, value: str, upto: int) -> bool:
        """Whether the harness put ``value`` into a request at or before reply ``upto``
        without a reply having said it first (values the task states are never injected)."""
        if self.said_by_task(value):
            return False
        for i in range(upto + 1):
            if any(occurs(value, text) for after, text in self.heard if after <= i):
                break  # the environment said it before this request: relaying it is fine
            if any(_hidden_in(value, s) for s in (self.authored[i], *self.decoded[i])):
                earlier = self.replies[:i]
                if not any(_in_reply(value, r) for r in earlier):
                    return True
        return False

    def handed(self, tool: str, param: str, option: str, upto: int) -> bool:
        """Whether the harness singled out ``option`` for this task (:meth:`chosen_at`), and
        not as the nearest option to a value the model had written before it did
        (:meth:`suggested`: "did you mean celsius?")."""
        at = self.chosen_at(tool, param, option, upto)
        return at is not None and not self.suggested(tool, param, option, at)

    def chosen_at(self, tool: str, param: str, option: str, upto: int) -> int | None:
        """The first request, at or before ``upto``, whose text the harness wrote for this
        task (its fixed block aside) singled out ``option`` of the parameter's enum before
        any reply said it; None if none did. Singling out is:

        * the option beside the parameter's name ("Set unit to celsius");
        * the option by name anywhere ("Hint: celsius"), for an option of
          ``MENTIONED_OPTION`` characters or more that the task's question and its schema's
          descriptions and names do not state: in the first request seen through the
          disguises :mod:`daemon.evaluation.disguise` undoes, in later ones (retries, error
          messages) only whole;
        * the request's tool schemas marking it (:func:`_narrowed`): its enum cut down to
          it, a default, ``const`` or example set to it, a made-up tool with such a value.

        Listing the options (the task's schema restated, see :class:`Listings`) names none,
        and the parameter's default is the harness's to fill anyway. The options are the
        task's words, so :meth:`injected` and :meth:`paired` let them through; without this,
        a harness that knows the answer for a task (a table of public answers) hands it
        over as one of them."""
        options = self.enums.get(tool, {}).get(param)
        if not options or option not in options or self.defaults.get(tool, {}).get(param) == option:
            return None
        name = WORD.findall(param.lower())
        said = WORD.findall(option)
        by_name = (
            len(option) >= MENTIONED_OPTION
            and option not in SCHEMA_WORDS
            and not option.replace(".", "").isdigit()
            and not occurs(option, self.prompt_text)
            and not occurs(option, self.described_text)
        )
        # From the request after the environment said it, the option is the model's to use.
        heard = [after for after, text in self.heard if occurs(option, text)]
        for i in range(min([upto + 1, *heard])):
            views = self.unlisted[i]
            if (
                name
                and said
                and any(_pairs(name, said, words) for words in self.unlisted_words[i])
                and not any(_binds(r, param, option) for r in self.replies[:i])
            ):
                return i
            if by_name and i == 0:
                named = any(_hidden_in(option, v) for v in views)
            else:
                named = by_name and any(v.holds(form) for v in views for form in disguises(option))
            singled = named or (tool, param, option) in self.narrowed[i]
            if singled and not any(_in_reply(option, r) for r in self.replies[:i]):
                return i
        return None

    def suggested(self, tool: str, param: str, option: str, upto: int) -> bool:
        """Whether a reply before request ``upto`` gave the parameter a value outside its
        enum (its own, not injected) to which ``option`` is the nearest: then a retry that
        asks "did you mean celsius?" offers what snapping would have chosen (the task's)."""
        options = self.enums.get(tool, {}).get(param)
        for j, reply in enumerate(self.replies[:upto]):
            given = [a[param] for called, a in reply.calls if called == tool and param in a]
            # A call written as text: ``unit=kelvn``, ``"unit": "kelvn"``.
            given += [m.group(1) for m in _written_binding(param).finditer(reply.whole)]
            for value in given:
                if _snapped(options, value, option) and not any(
                    self.injected(v, j) for v in leaves(value)
                ):
                    return True
        return False

    def line_injected(self, line: str, upto: int) -> bool:
        """Whether the harness wrote ``line`` (or its words, e.g. commented out, numbered,
        spaced) into a request before reply ``upto`` without a reply having written it.
        Short lines (``else:``, ``return x``) are compared whole: their words turn up in any
        instruction."""
        words = WORD.findall(norm_text(line))
        forward = form_of(words)
        backward = form_of([w[::-1] for w in reversed(words)])
        for i in range(upto + 1):
            if len(forward.text) >= MIN_LINE_WORDS:
                views = (self.authored[i], *self.decoded[i])
                hidden = any(v.holds(form) for v in views for form in (forward, backward))
            else:
                hidden = line in self.authored_lines[i]
            if hidden and not any(line in r.lines for r in self.replies[:i]):
                return True
        return False


MENTIONED_OPTION = 6
"""Characters from which an enum option named alone in the harness's text for a task is its
choice: shorter ones ("json", "text", "error", "all", "1") are common words and numbers of
honest instructions and retries (and where no fixed block is known, as in live replay, an
instruction is per-task text), and count only beside their parameter's name."""

SCHEMA_WORDS = frozenset({"string", "number", "integer", "object", "array", "boolean"})
"""JSON Schema's type names: any retry about a call's arguments writes them ("a JSON object,
not a string"), so an option spelt so counts only beside its parameter's name."""

LONG_ENUM = 5
"""Options from which an enum may be listed cut short (``a, b, c, ..., y, z``)."""

PAIR_WINDOW = 3
"""Words between a parameter's name and a value from which they are no longer paired."""


def _pairs(name: list[str], value: list[str], words: list[str]) -> bool:
    """Whether ``value``'s words start within ``PAIR_WINDOW`` words after ``name``'s."""
    n, v = len(name), len(value)
    for i in range(len(words) - n + 1):
        if words[i : i + n] != name:
            continue
        end = i + n
        for j in range(end, min(end + PAIR_WINDOW + 1, len(words) - v + 1)):
            if words[j : j + v] == value:
                return True
    return False


LISTING_JOINS = frozenset({"or", "and", "nor", "the", "default"})
"""Words that may stand between two options of a listing ("celsius or fahrenheit",
"celsius (the default), fahrenheit")."""

LISTING_FILLER = 2
"""Words at most between two options of a listing: joining words, numbers and marks of one
or two characters ("1. celsius 2. fahrenheit", "celsius (°C), fahrenheit (°F)")."""

GAP = "|"
"""What a cut-out listing or description leaves: a mark that is no word, so the words on
either side stay two words (they do not run together into one)."""

Enum = list[tuple[str, ...]]
"""An enum's options as words, in its schema's order."""


def _enum_words(options: Sequence[Any]) -> Enum:
    words = [tuple(WORD.findall(canonical(o))) for o in options]
    return [w for w in dict.fromkeys(words) if w]


def _filler(word: str) -> bool:
    return word in LISTING_JOINS or word.isdigit() or len(word) <= 2


class _Enum:
    """One enum's options as words, in its schema's order, and by first word (the longest
    first: of ``us`` and ``us east``, the longer is the one written)."""

    def __init__(self, options: Enum) -> None:
        self.options = options
        self.by_first: dict[str, list[tuple[str, ...]]] = {}
        for option in sorted(options, key=len, reverse=True):
            self.by_first.setdefault(option[0], []).append(option)

    def at(self, words: list[str], i: int, taken: set[tuple[str, ...]]) -> tuple[str, ...] | None:
        """The option not in ``taken`` that ``words`` write from ``i``, if any."""
        for option in self.by_first.get(words[i], ()) if i < len(words) else ():
            if option not in taken and tuple(words[i : i + len(option)]) == option:
                return option
        return None


def _listing_at(words: list[str], at: int, enum: _Enum) -> int:
    """The end of a listing of ``enum``'s options starting at word ``at``, or ``at`` when
    there is none. A listing is every option once, in any order (a set printed in an error
    message), or, of an enum of ``LONG_ENUM`` options or more, a run of two or more from
    the first or to the last option in the schema's or sorted order (a long enum cut short,
    ``a, b, ..., y, z``), at most ``LISTING_FILLER`` filler words between two: the same for
    every task with that schema, so it names no option for this one. Words around it that
    point at one option ("the last one") are not seen: held-out tasks the harness cannot
    know meet that."""
    found: list[tuple[str, ...]] = []
    taken: set[tuple[str, ...]] = set()
    end = at
    while True:
        start, skipped = end, 0
        if found:
            while skipped < LISTING_FILLER and start < len(words) and _filler(words[start]):
                if enum.at(words, start, taken) is not None:
                    break  # an option of a word or two is an option, not a filler
                start, skipped = start + 1, skipped + 1
        option = enum.at(words, start, taken)
        if option is None:
            break
        found.append(option)
        taken.add(option)
        end = start + len(option)
    options = enum.options
    if len(found) == len(options) and found:
        return end
    if len(found) >= 2 and len(options) >= LONG_ENUM:
        for order in (options, sorted(options)):
            if found == order[: len(found)] or found == order[-len(found) :]:
                return end
    return at


class Listings:
    """Cuts what names no option for one task out of a text: every listing of its enums'
    options (see :func:`_listing_at`) and every one of its schema descriptions (``phrases``,
    as words), each found only where its first word is (a long multi-turn request is read in
    one pass, not once per enum)."""

    def __init__(self, enums: Sequence[Enum], phrases: Iterable[tuple[str, ...]] = ()) -> None:
        self.enums = [_Enum(list(e)) for e in dict.fromkeys(tuple(e) for e in enums if e)]
        self.by_first: dict[str, list[_Enum]] = {}
        for enum in self.enums:
            for first in enum.by_first:
                self.by_first.setdefault(first, []).append(enum)
        self.phrases: dict[str, list[tuple[str, ...]]] = {}
        for phrase in sorted(set(phrases), key=len, reverse=True):
            if phrase:
                self.phrases.setdefault(phrase[0], []).append(phrase)

    def _end_at(self, words: list[str], at: int) -> int:
        end = at
        for phrase in self.phrases.get(words[at], ()):
            if tuple(words[at : at + len(phrase)]) == phrase:
                end = at + len(phrase)
                break
        for enum in self.by_first.get(words[at], ()):
            end = max(end, _listing_at(words, at, enum))
        return end

    def cut(self, text: str) -> str:
        """``text``'s words (normalised) with the listings and descriptions cut out: what is
        left names an option only where the text singled it out."""
        words = WORD.findall(norm_text(text))
        if not self.enums:
            return " ".join(words)
        out: list[str] = []
        i = 0
        while i < len(words):
            end = self._end_at(words, i)
            if end > i:
                out.append(GAP)
                i = end
            else:
                out.append(words[i])
                i += 1
        return " ".join(out)


def _binds(reply: _Reply, param: str, value: str) -> bool:
    """Whether the reply itself bound ``value`` to ``param`` (a call, or its own text)."""
    for _, args in reply.calls:
        if param in args and value in set(leaves(args[param])):
            return True
    # An echo of the question pairs what the question pairs: that is no binding of its own.
    return _pairs(WORD.findall(param.lower()), WORD.findall(value), WORD.findall(reply.fresh))


def _number_values(text: str) -> set[str]:
    """Every number a text writes in digits, canonical (``10cm``, ``$1,000``, ``2.5%``)."""
    found = set()
    for m in re.finditer(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?", text):
        found.add(canonical(m.group().replace(",", "")))
    return found


def _task_statements(task: Task) -> tuple[set[str], str, set[str]]:
    """What the task states: its schemas' strings (canonical), its text and schemas as one
    normalised text, and the numbers they write."""
    strings = set().union(*(_strings(t.model_dump()) for t in task.tools))
    values = {canonical(x) for x in strings}
    text = norm_text("\n".join([*_task_texts(task), *sorted(strings)]))
    return values, text, _number_values(text)


def _in_reply(value: str, reply: _Reply) -> bool:
    if occurs(value, reply.text) or Spelled(reply.text).holds(disguises(value)[0]):
        return True
    return any(value in set(leaves(args)) for _, args in reply.calls)


def _snapped(options: frozenset[str] | None, given: Any, mine: str) -> bool:
    """Whether the harness replaced a value the model gave outside a parameter's enum with
    the option nearest to it: the task's value, chosen where the model broke the schema.

    Nearest, not any: a harness that has the model write a placeholder ("?") for every
    enumerated parameter and then picks the option itself (from a table of public answers,
    say) would otherwise have every such choice counted as the model's. Nearness is
    difflib's similarity of the canonical forms (what ``get_close_matches`` ranks by); ties
    count, a value sharing nothing with any option supports none."""
    if not options:
        return False
    said = canonical(given)
    if mine not in options or said in options:
        return False
    likeness = {o: difflib.SequenceMatcher(None, said, o).ratio() for o in options}
    nearest = max(likeness.values())
    return nearest > 0 and likeness[mine] == nearest


def _call_supported(trail: _Trail, name: str, arguments: dict[str, Any]) -> bool:
    defaults = trail.defaults.get(name, {})
    enums = trail.enums.get(name, {})
    for j, reply in enumerate(trail.replies):
        for called, args in reply.calls:
            if called != name:
                continue
            values_ok = True
            for param, value in arguments.items():
                mine = canonical(value)
                if param in args and canonical(args[param]) == mine:
                    if (
                        any(trail.injected(v, j) for v in leaves(value))
                        or trail.paired(param, value, j)
                        or any(trail.handed(name, param, v, j) for v in leaves(value))
                    ):
                        values_ok = False
                        break
                elif defaults.get(param) != mine and not (
                    param in args
                    and _snapped(enums.get(param), args[param], mine)
                    # What the model wrote must be its own too: a harness that told it
                    # "celsiu" and snapped that to "celsius" chose the option itself.
                    and not any(trail.injected(v, j) for v in leaves(args[param]))
                    and not trail.paired(param, args[param], j)
                    and not trail.handed(name, param, mine, j)
                ):
                    values_ok = False
                    break
            if values_ok:
                return True
        values = [v for value in arguments.values() for v in leaves(value)]
        if (
            occurs(canonical(name), reply.text)
            and all(occurs(v, reply.text) and not trail.injected(v, j) for v in values)
            and not any(trail.paired(p, v, j) for p, v in arguments.items())
            and not any(
                trail.handed(name, p, leaf, j) for p, v in arguments.items() for leaf in leaves(v)
            )
        ):
            return True
    return False


def _calls_provenance(trail: _Trail, output: list[Any]) -> Provenance:
    if not output:
        declined = any(not r.calls for r in trail.replies)
        return Provenance(declined, "" if declined else "no model reply declined to call")
    for call in output:
        if not isinstance(call, dict) or not isinstance(call.get("arguments", {}), dict):
            return Provenance(False, "an output entry is not a call")
        name = str(call.get("name", "")).lower()
        if not _call_supported(trail, name, call.get("arguments") or {}):
            return Provenance(False, f"no model reply made the call {name}(...) as output")
    return Provenance(True)


_IMPORT = re.compile(r"(import|from\s+[\w.]+\s+import)\s+[\w., ()*]+$")


def _code_lines(source: str) -> list[str]:
    """Significant lines of the whole output: everything in it runs (helpers, a second
    definition of the entry point, module-level code), so every line needs the model, not
    only the first textual ``def`` of the entry point (a one-line ``def`` delegating to
    harness-written code would otherwise check nothing). Comments and plain imports carry
    no answer (the checker's sandbox has only the standard library) and are skipped."""
    lines = (" ".join(raw.split()) for raw in source.splitlines())
    return [n for n in lines if n and not n.startswith("#") and not _IMPORT.match(n)]


def _weight(line: str) -> int:
    return len("".join(line.split()))


def _code_provenance(trail: _Trail, output: str) -> Provenance:
    """Weighted by characters, so a dense harness-written line cannot hide among many short
    ones the model wrote; and no line longer than ``LONG_LINE`` may be the harness's, so one
    memorised line cannot hide among many long lines of the model's own (wrong) attempt, left
    below it as dead code. (Short fix-ups, ``else:``, ``return result``, stay possible.)"""
    lines = [ln for ln in _code_lines(output) if ln not in trail.task_lines]
    if not lines:
        return Provenance(True)
    supported, longest = 0, 0
    for line in lines:
        if any(
            line in reply.lines and not trail.line_injected(line, j)
            for j, reply in enumerate(trail.replies)
        ):
            supported += _weight(line)
        else:
            longest = max(longest, _weight(line))
    share = supported / sum(_weight(ln) for ln in lines)
    if share < CODE_SUPPORT:
        return Provenance(
            False, f"{share:.0%} of the code (by characters) comes from model replies"
        )
    if longest > LONG_LINE:
        return Provenance(False, f"a code line of {longest} characters comes from no model reply")
    return Provenance(True)


ANSWER_SUPPORT = 0.9
"""Share of a free-text answer (its words, by characters) that must come from model replies."""


ANSWER_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
"""A number as written in an answer (``51``, ``1,000``, ``3.5``); compared by value."""


def _ascii_digits(text: str) -> str:
    """``text`` with every decimal digit in ASCII (full-width ``５１``, Arabic-Indic ``٥١``):
    a verifier reading numbers reads those too, so they must not pass unseen."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)


def _answer_numbers(text: str) -> set[float]:
    return {float(m.replace(",", "")) for m in ANSWER_NUMBER.findall(_ascii_digits(text))}


def _answer_provenance(trail: _Trail, output: str) -> Provenance:
    """A free-text answer is the model's when what it says is: every number in it (by value,
    however written: ``1,000`` is ``1000``, ``51.0`` is ``51``; digits in any script; a
    number inside a word, ``51st``, too), and ``ANSWER_SUPPORT`` of its other words by
    characters, written by some reply (not as a copy of what the harness wrote, and not
    after the harness injected it). A harness may cut an answer out of a reply, reformat it
    or drop words; an answer it wrote itself (a computed or memorised one, an advertisement,
    the client's system prompt repeated) is its own."""
    text = _ascii_digits(output)
    words = [w for w in WORD.findall(norm_text(text)) if not any(c.isdigit() for c in w)]

    def said(word: str) -> bool:
        return any(
            occurs(word, reply.text) and not trail.injected(word, j)
            for j, reply in enumerate(trail.replies)
        )

    def said_number(value: float) -> bool:
        return any(
            value in _answer_numbers(reply.text) and not trail.injected(canonical(value), j)
            for j, reply in enumerate(trail.replies)
        )

    missing = next((v for v in sorted(_answer_numbers(text)) if not said_number(v)), None)
    if missing is not None:
        return Provenance(
            False, f"the number {canonical(missing)} in the answer comes from no model reply"
        )
    if not words:
        return Provenance(True)
    supported = sum(len(w) for w in words if said(w))
    share = supported / sum(len(w) for w in words)
    if share < ANSWER_SUPPORT:
        return Provenance(
            False, f"{share:.0%} of the answer (by characters) comes from model replies"
        )
    return Provenance(True)


def first_lines(task: Task, exchanges: Sequence[Exchange]) -> frozenset[str]:
    """The lines of the harness-written part of the task's first request (what a fixed
    block is found in)."""
    if not exchanges:
        return frozenset()
    return _lines(_authored(exchanges[0][0], task, []))


FIXED_MIN_TASKS = 3
"""Tasks from which the lines every one of them was sent are the harness's fixed block."""


def fixed_lines(per_task: Sequence[frozenset[str]]) -> frozenset[str]:
    """The harness's fixed block: the lines of its first request that every task got (from
    ``FIXED_MIN_TASKS`` tasks; fewer tell nothing apart)."""
    if len(per_task) < FIXED_MIN_TASKS:
        return frozenset()
    return frozenset.intersection(*per_task)


def provenance(
    task: Task,
    output: Any,
    exchanges: Sequence[Exchange],
    heard: Sequence[EnvironmentText] = (),
    fixed: frozenset[str] = frozenset(),
) -> Provenance:
    """Whether ``output`` (tool use: each call in ``heard``) is supported by the replies;
    ``fixed``: the harness's fixed block (:func:`fixed_lines`), which is its design."""
    if task.kind == "tool_use":  # a text answer alone is free text: not checked
        calls = [h.call for h in heard if h.call is not None]
        trail = _Trail(task, exchanges, heard, fixed)
        unsupported = [n for n, args in calls if not _call_supported(trail, n.lower(), args)]
        if unsupported:
            return Provenance(False, f"no model reply made the tool call {unsupported[0]}(...)")
        return Provenance(True if calls else None)
    if task.kind not in ("function_call", "code", "answer"):
        return Provenance(None)
    if task.kind == "answer" and not (
        isinstance(output, str) and WORD.search(norm_text(_ascii_digits(output)))
    ):
        return Provenance(None)  # nothing said: no solve to own
    if not exchanges:
        return Provenance(False, "the harness never asked the model")
    trail = _Trail(task, exchanges, fixed=fixed)
    if task.kind == "answer":
        return _answer_provenance(trail, output)
    # An output of the wrong shape is unsupported, not unchecked: were the verifier ever to
    # accept one, it must not count as the model's.
    if task.kind == "function_call":
        if isinstance(output, list):
            return _calls_provenance(trail, output)
        return Provenance(False, "the output is not a list of calls")
    if not isinstance(output, str):
        return Provenance(False, "the output is not source text")
    return _code_provenance(trail, output)
