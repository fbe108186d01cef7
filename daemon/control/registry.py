"""The verb registry's types: one :class:`Verb` per control verb, everything else derived.

A verb's declaration (in :mod:`daemon.control.verbs`, the one table) holds what both ends of
the control socket agree on: its name on the wire, its typed request arguments (the server
validates every request against them, :meth:`Verb.request`), how ``harnessctl`` spells it and
its arguments (the parser and its help are built from them), and the view that prints its
reply. The daemon's handler for it is registered against the same table with
:meth:`Handlers.on`, and :meth:`Handlers.complete` refuses a table with a verb left unhandled,
so the handler module fails at import rather than a client at run time. Handlers live apart
(:mod:`daemon.control.handlers`) because they load the whole daemon, which harnessctl never
imports.

Every declaration mistake (a duplicate, a command in an undeclared group, an argument
harnessctl cannot take, a missing view or handler) raises :class:`DeclarationError` when the
table or the handler module is imported: it is a bug, never a client's error.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from daemon.control.protocol import ControlError, ErrorCode

if TYPE_CHECKING:
    from rich.console import Console

    from daemon.control.client import ControlClient

__all__ = [
    "REQUIRED",
    "Arg",
    "Cli",
    "DeclarationError",
    "Handlers",
    "Registry",
    "Verb",
    "option",
    "positional",
]


class DeclarationError(Exception):
    """A verb declared wrongly or left without a handler: a bug in the table."""


class _Required(Enum):
    REQUIRED = "required"


# An argument's default when the request must carry it.
REQUIRED = _Required.REQUIRED

# What each JSON kind is called in a refusal.
_KIND_TEXT: dict[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    dict: "an object",
    object: "a JSON value",
}


@dataclass(frozen=True)
class Cli:
    """How harnessctl spells one argument: a positional (no flags) or an option."""

    flags: tuple[str, ...] = ()
    help: str | None = None
    metavar: str | None = None
    default: Any = None
    # A default worked out when the parser is built (the login name), not at import.
    default_from: Callable[[], Any] | None = None
    required: bool = False


def positional(help: str | None = None, *, metavar: str | None = None) -> Cli:
    return Cli(help=help, metavar=metavar)


def option(
    *flags: str,
    help: str,
    default: Any = None,
    default_from: Callable[[], Any] | None = None,
    required: bool = False,
    metavar: str | None = None,
) -> Cli:
    return Cli(flags, help, metavar, default, default_from, required)


@dataclass(frozen=True)
class Arg:
    """One argument of a verb.

    ``kind`` is its JSON type in the request (``str``, ``int``, ``bool``, ``dict`` for an
    object, ``object`` for any JSON value), or for an argument harnessctl keeps to itself
    (``sent=False``: a file to read, where to write the reply) the type argparse converts
    it to. ``default`` is what the daemon takes when the request leaves it out; ``REQUIRED``
    refuses such a request. ``cli`` is how harnessctl takes it; None when the verb's own
    ``request`` builds it from other arguments.
    """

    name: str
    kind: type
    default: Any = REQUIRED
    cli: Cli | None = None
    sent: bool = True

    def checked(self, args: dict[str, Any]) -> Any:
        """This argument's value in ``args``, or its default; ``bad_args`` if it is neither."""
        value = args.get(self.name)
        if value is None:
            if self.default is REQUIRED:
                raise ControlError(
                    ErrorCode.BAD_ARGS,
                    f"argument '{self.name}' is missing: give {_KIND_TEXT[self.kind]}",
                )
            return self.default
        wrong_int = self.kind is int and isinstance(value, bool)  # JSON true is not 1
        if not isinstance(value, self.kind) or wrong_int:
            raise ControlError(
                ErrorCode.BAD_ARGS,
                f"argument '{self.name}' must be {_KIND_TEXT[self.kind]}, "
                f"not {type(value).__name__} {value!r:.40}",
            )
        return value

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """This argument on harnessctl's command line, as ``cli`` spells it."""
        cli = self.cli
        if cli is None:
            return
        kwargs: dict[str, Any] = {"help": cli.help}
        if self.kind is bool:
            kwargs["action"] = "store_true"
        else:
            kwargs["default"] = cli.default_from() if cli.default_from else cli.default
            kwargs["metavar"] = cli.metavar
            if self.kind in (int, Path):
                kwargs["type"] = self.kind
        if not cli.flags:
            parser.add_argument(self.name, **kwargs)
            return
        if cli.required:
            kwargs["required"] = True
        parser.add_argument(*cli.flags, dest=self.name, **kwargs)


# What prints a verb's reply (for a streaming verb: its events) for people.
View = Callable[[Any, "Console"], None]
# harnessctl's own reading of its command line into a request.
RequestBuilder = Callable[[argparse.Namespace], dict[str, Any]]
# What harnessctl does with a reply before its view (write a file, wait for the daemon).
Then = Callable[["ControlClient", argparse.Namespace, Any], Any]


@dataclass(frozen=True)
class Verb:
    """One control verb, as the table declares it (see :meth:`Registry.verb`)."""

    name: str
    command: tuple[str, ...]  # harnessctl's words: ("status",), ("policy", "show")
    help: str  # one line: harnessctl's help and description for the command
    view: View
    args: tuple[Arg, ...] = ()
    request: RequestBuilder | None = None  # default: each sent argument from its option
    then: Then | None = None
    unbounded: bool = False  # may take minutes: no timeout on its reply
    stream: bool = False  # replies once, then streams events until the client leaves
    wide: bool = False  # a view that fits the terminal: takes --wide for all of it

    def checked(self, args: dict[str, Any]) -> dict[str, Any]:
        """The request's arguments, checked against the declaration, defaults filled in
        (other keys are ignored, as they always were)."""
        return {a.name: a.checked(args) for a in self.args if a.sent}

    def request_from(self, ns: argparse.Namespace) -> dict[str, Any]:
        """The request harnessctl sends for a parsed command line."""
        if self.request is not None:
            return self.request(ns)
        return {a.name: getattr(ns, a.name) for a in self.args if a.sent}

    def send(self, client: ControlClient, ns: argparse.Namespace) -> Any:
        """Ask the daemon; a streaming verb returns its events as they come."""
        if self.stream:
            return client.watch()
        result = client.call(self.name, **self.request_from(ns))
        return result if self.then is None else self.then(client, ns, result)


@dataclass
class Registry:
    """The table of verbs, in the order harnessctl lists them, and its command groups."""

    verbs: dict[str, Verb] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)

    def group(self, word: str, help: str) -> None:
        """A first word shared by two-word commands (``policy show``), with its help line."""
        if word in self.groups:
            raise DeclarationError(f"command group '{word}' declared twice")
        self.groups[word] = help

    def verb(
        self,
        name: str,
        help: str,
        *,
        view: View,
        command: tuple[str, ...] | None = None,
        args: tuple[Arg, ...] = (),
        request: RequestBuilder | None = None,
        then: Then | None = None,
        unbounded: bool = False,
        stream: bool = False,
        wide: bool = False,
    ) -> Verb:
        """Declare a verb; ``command`` defaults to its name as one word."""
        verb = Verb(
            name, command or (name,), help, view, args, request, then, unbounded, stream, wide
        )
        self._check(verb)
        self.verbs[name] = verb
        return verb

    def _check(self, verb: Verb) -> None:
        where = f"verb '{verb.name}'"
        if verb.name in self.verbs:
            raise DeclarationError(f"{where} declared twice")
        if not verb.help.strip() or "\n" in verb.help:
            raise DeclarationError(f"{where}: its help must be one line")
        if not callable(verb.view):
            raise DeclarationError(f"{where} has no view: give view=<a function of views>")
        if len(verb.command) not in (1, 2):
            raise DeclarationError(f"{where}: a command is one or two words")
        if len(verb.command) == 2 and verb.command[0] not in self.groups:
            raise DeclarationError(f"{where}: declare group '{verb.command[0]}' first")
        if any(v.command == verb.command for v in self.verbs.values()):
            raise DeclarationError(f"{where}: 'harnessctl {' '.join(verb.command)}' is taken")
        names = [a.name for a in verb.args]
        if len(set(names)) != len(names):
            raise DeclarationError(f"{where}: an argument is declared twice ({names})")
        if verb.request is None:
            unspelled = [a.name for a in verb.args if a.sent and a.cli is None]
            if unspelled:
                raise DeclarationError(
                    f"{where}: harnessctl cannot build {unspelled} from its command line: "
                    "give each a cli spelling, or the verb a request function"
                )
        if verb.stream and (verb.args or verb.request or verb.then):
            raise DeclarationError(f"{where}: a streaming verb takes no arguments")

    def __getitem__(self, name: str) -> Verb:
        return self.verbs[name]

    def __contains__(self, name: object) -> bool:
        return name in self.verbs

    def __iter__(self) -> Iterator[Verb]:
        return iter(self.verbs.values())

    def __len__(self) -> int:
        return len(self.verbs)


# A daemon-side handler: (the handler object, the checked request) -> the reply's result.
Handler = Callable[[Any, dict[str, Any]], Awaitable[Any]]
H = TypeVar("H", bound=Handler)


class Handlers:
    """The daemon's handler for every verb of a table that replies (a streaming verb is
    the server's own: it subscribes the client to events)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._by_name: dict[str, Handler] = {}

    def on(self, name: str) -> Callable[[H], H]:
        """Register the decorated function as the handler of verb ``name``."""
        if name not in self.registry:
            raise DeclarationError(f"a handler for verb '{name}', which the table does not declare")
        if self.registry[name].stream:
            raise DeclarationError(f"verb '{name}' streams: the server serves it, not a handler")
        if name in self._by_name:
            raise DeclarationError(f"verb '{name}' has two handlers")

        def register(fn: H) -> H:
            self._by_name[name] = fn
            return fn

        return register

    def complete(self) -> None:
        """Refuse a table with a verb that would reach no handler."""
        missing = [v.name for v in self.registry if not v.stream and v.name not in self._by_name]
        if missing:
            raise DeclarationError(f"verbs without a handler: {missing}")

    def __getitem__(self, name: str) -> Handler:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
