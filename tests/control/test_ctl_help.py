"""harnessctl's commands and help come from the verb table (``daemon.control.verbs``), and
the README's command table lists every verb and nothing else."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.control.ctl import build_parser
from daemon.control.verbs import VERBS

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parents[2] / "README.md"


Leaves = dict[tuple[str, ...], tuple[str | None, dict[str, Any]]]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Leaves:
    """``{command words: (help line, the parser's defaults)}`` for every leaf command."""
    found: Leaves = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                words = (*path, name)
                leaves = _commands(child, words)
                if leaves:
                    found.update(leaves)
                    assert helps[name] == VERBS.groups[name], name
                else:
                    assert child.description == helps[name], name
                    found[words] = (helps[name], child._defaults)
    return found


def test_every_command_is_a_verb_of_the_table_with_its_help() -> None:
    commands = _commands(build_parser())
    assert set(commands) == {v.command for v in VERBS}
    for verb in VERBS:
        help_line, defaults = commands[verb.command]
        assert help_line == verb.help
        assert defaults["verb"] is verb  # what is sent and the view come from the table


def _readme_commands() -> list[str]:
    """The ``harnessctl ...`` spellings in the first column of the README's command table."""
    text = README.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `harnessctl ")]
    assert rows, "the README has no harnessctl command table"
    spelled = []
    for row in rows:
        first = row.split("|")[1]
        for code in re.findall(r"`([^`]+)`", first):
            spelled.append(code.removeprefix("harnessctl ").strip())
    return spelled


def test_the_readme_lists_every_verb_and_no_other() -> None:
    spelled = _readme_commands()
    for verb in VERBS:
        words = " ".join(verb.command)
        assert any(s == words or s.startswith(words + " ") for s in spelled), (
            f"README.md's command table does not list 'harnessctl {words}'"
        )
    firsts = {v.command[0] for v in VERBS}
    unknown = [s for s in spelled if s.split()[0] not in firsts]
    assert not unknown, f"README.md lists harnessctl commands that do not exist: {unknown}"


def test_the_daemon_serves_every_verb_of_the_table() -> None:
    from daemon.control.handlers import HANDLERS

    # ``watch`` is the server's own (a stream, not a reply).
    assert {v.name for v in VERBS if v.name in HANDLERS} | {"watch"} == {v.name for v in VERBS}
