"""The verb table is the one source: each verb is declared once, and the daemon's verbs and
their request checks, harnessctl's parser and help, the handlers and the views all come
from it. A declaration missing one of its parts fails when it is made (or, for a handler,
when the handler module is imported), never when a client first asks."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import anyio
import pytest

from daemon.control import views
from daemon.control.ctl import build_parser
from daemon.control.handlers import HANDLERS
from daemon.control.protocol import ControlError, ErrorCode
from daemon.control.registry import Arg, DeclarationError, Handlers, Registry, option, positional
from daemon.control.server import Replies, _request
from daemon.control.verbs import VERBS

pytestmark = pytest.mark.unit


def _leaf(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> argparse.ArgumentParser:
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def test_every_verb_has_a_parser_a_handler_and_a_view() -> None:
    parser = build_parser()
    for verb in VERBS:
        leaf = _leaf(parser, verb.command)
        dests = {a.dest for a in leaf._actions}
        assert {a.name for a in verb.args if a.cli is not None} <= dests, verb.name
        assert leaf.description == verb.help
        assert verb.stream or verb.name in HANDLERS, verb.name
        assert callable(verb.view) and verb.view.__module__ == views.__name__, verb.name


def _registry() -> Registry:
    table = Registry()
    table.group("policy", "policies")
    return table


def _view(result: Any, console: Any) -> None:
    """A view for the tables the tests declare."""


def test_a_declaration_missing_a_part_fails_when_it_is_made() -> None:
    table = _registry()
    with pytest.raises(DeclarationError, match="'bare' has no view"):
        table.verb("bare", "a verb without a view", view=None)  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match=r"cannot build \['text'\]"):
        table.verb(
            "mute", "an argument harnessctl cannot take", view=_view, args=(Arg("text", str),)
        )
    with pytest.raises(DeclarationError, match="declare group 'suite' first"):
        table.verb("suite_list", "a group nobody declared", view=_view, command=("suite", "list"))
    table.verb("policy_show", "the policy", view=_view, command=("policy", "show"))
    with pytest.raises(DeclarationError, match="declared twice"):
        table.verb("policy_show", "again", view=_view)
    with pytest.raises(DeclarationError, match="'harnessctl policy show' is taken"):
        table.verb("show_policy", "the same words", view=_view, command=("policy", "show"))
    with pytest.raises(DeclarationError, match="one line"):
        table.verb("long", "help\nover two lines", view=_view)


def test_a_verb_without_a_handler_fails_when_the_handlers_are_complete() -> None:
    table = _registry()
    table.verb("ping", "answer", view=_view)
    table.verb("pong", "answer back", view=_view)
    table.verb("watch", "events", view=_view, stream=True)
    handlers = Handlers(table)

    @handlers.on("ping")
    async def ping(api: Any, args: dict[str, Any]) -> Any:
        return "pong"

    with pytest.raises(DeclarationError, match=r"verbs without a handler: \['pong'\]"):
        handlers.complete()
    with pytest.raises(DeclarationError, match="two handlers"):
        handlers.on("ping")
    with pytest.raises(DeclarationError, match="does not declare"):
        handlers.on("pang")
    with pytest.raises(DeclarationError, match="streams"):
        handlers.on("watch")


def test_the_daemon_refuses_to_import_its_handlers_when_a_verb_has_none() -> None:
    code = (
        "from daemon.control import views\n"
        "from daemon.control.verbs import VERBS\n"
        "VERBS.verb('extra', 'a verb nobody handles', view=views.stop)\n"
        "import daemon.control.handlers\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1
    assert "DeclarationError: verbs without a handler: ['extra']" in done.stderr, done.stderr


def test_requests_are_checked_against_the_declaration() -> None:
    lineage, show, propose = VERBS["lineage"], VERBS["show"], VERBS["propose"]
    assert lineage.checked({}) == {"candidates": 10}  # the declared default
    assert show.checked({"ref": "c3", "other": 1}) == {"ref": "c3"}
    assert propose.checked({"text": "t"}) == {
        "name": None,
        "text": "t",
        "dry_run": False,
        "rationale": "",
    }
    for verb, args, message in (
        (show, {}, "argument 'ref' is missing: give a string"),
        (show, {"ref": 3}, "argument 'ref' must be a string, not int 3"),
        (lineage, {"candidates": True}, "argument 'candidates' must be an integer"),
        (
            VERBS["label"],
            {"request": 1, "suite": "s", "expected": "x", "check": "exact"},
            "'check' must be an object",
        ),
    ):
        with pytest.raises(ControlError, match=message) as refused:
            verb.checked(args)
        assert refused.value.code is ErrorCode.BAD_ARGS


def test_harnessctl_sends_what_the_declaration_says() -> None:
    parser = build_parser()
    ns = parser.parse_args(["lineage", "--candidates", "3"])
    assert ns.verb is VERBS["lineage"] and ns.verb.request_from(ns) == {"candidates": 3}
    ns = parser.parse_args(["rollback", "v0002"])
    assert ns.verb.request_from(ns) == {"ref": "v0002", "reason": "rollback by harnessctl"}
    ns = parser.parse_args(["policy", "show"])
    assert ns.verb is VERBS["policy_show"] and ns.verb.request_from(ns) == {}


class _Recorder:
    """A control handler that records what reaches it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, verb: str, args: dict[str, Any]) -> Any:
        self.calls.append((verb, args))
        return {"ok": verb}

    def subscribe(self) -> Any:
        raise NotImplementedError


class _Stream:
    """The frames the server sends, decoded."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    async def send(self, data: bytes) -> None:
        self.frames.append(json.loads(data))


def test_the_server_checks_a_request_before_any_handler_sees_it() -> None:
    handler, stream = _Recorder(), _Stream()

    async def ask(verb: str, args: dict[str, Any]) -> dict[str, Any]:
        frame = {"v": 1, "id": 1, "verb": verb, "args": args}
        await _request(stream, handler, frame, Replies())  # type: ignore[arg-type]
        return stream.frames[-1]

    refused = anyio.run(ask, "show", {"ref": 12})
    assert refused["error"]["code"] == "bad_args" and handler.calls == []
    unknown = anyio.run(ask, "shw", {})
    assert unknown["error"]["code"] == "unknown_verb" and "show" in unknown["error"]["message"]
    served = anyio.run(ask, "lineage", {})
    assert served["ok"] and handler.calls == [("lineage", {"candidates": 10})]


def test_declared_options_take_their_spelling_and_type() -> None:
    table = _registry()
    verb = table.verb(
        "count",
        "count things",
        view=_view,
        args=(
            Arg("n", int, cli=positional("how many", metavar="N")),
            Arg("loud", bool, False, option("--loud", help="shout")),
            Arg("who", str, "me", option("--as", default_from=lambda: "login", help="whose")),
        ),
    )
    parser = argparse.ArgumentParser()
    for arg in verb.args:
        arg.add_to(parser)
    ns = parser.parse_args(["7", "--loud"])
    assert verb.request_from(ns) == {"n": 7, "loud": True, "who": "login"}
