"""The docs name only what exists: paths, commands, policy and settings keys, Python names.

README.md, DESIGN.md, docs/*.md and the READMEs beside the seeds and the benchmarks tell
people which file to open, which command to type and which key to set. When code moves, a
verb is renamed or a key retired, this test names the document, the line and the reference
left behind. What it reads, outside and inside code blocks:

* **paths**: a token in backticks that looks like a file path (it has a ``/`` or a file
  suffix), relative to the repository or to the document; markdown link targets, relative to
  the document, with their ``#anchor`` (a heading of the target);
* **commands**: ``harnessctl ...`` and ``harnessd ...`` in backticks or shell blocks, walked
  through the real parsers (:func:`daemon.control.ctl.build_parser`,
  :func:`daemon.cli.build_parser`): every command word and every option must exist;
* **keys**: ``[section] key`` in backticks and every key of a ```` ```toml ```` block, against
  the policy model (:class:`daemon.config.policy.Policy`) or the settings model
  (:class:`daemon.config.settings.Settings`), whichever has the section;
* **Python names**: ``daemon.x.y.NAME``, ``path/to/module.NAME``, ``module.NAME`` for a module
  of ``daemon``/``sandbox``, ``Class.attr`` for a class defined there: imported and looked up;
* **section references**: ``DESIGN.md, "Section"``: a heading of that document starts so.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import tomllib
import types
import typing
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "DESIGN.md", "seeds/README.md", "scripts/bench/README.md")

# Paths the docs name that exist only once harnessd is set up or has run, so never in a
# checkout: each is git-ignored or made outside the repository.
RUN_TIME_PATHS = (
    ".state/",  # the state dir: database, sockets, endpoint token, model and data cache
    ".venv/",  # the virtualenv scripts/setup makes
    "harnessd.toml",  # the user's own config in the working directory; none is shipped
    "harnesses/current",  # the live version's link, made in the lineage at the first start
)
# Names the docs use for files a user makes (examples, not files of this repository).
EXAMPLE_FILES = ("report.html", "tasks.jsonl", "bench.log", "helpers.py", "check.py")
# A token is taken for a path when it has a "/" or ends with one of these.
FILE_SUFFIXES = (".py", ".md", ".toml", ".json", ".jsonl", ".txt", ".cmake", ".service")

_FENCE = re.compile(r"^\s*```(\w*)")
# A backtick span: no blank line inside (an unpaired backtick must not swallow a page).
_SPAN = re.compile(r"`((?:[^`\n]|\n(?![ \t]*\n))+)`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_PATH = re.compile(r"^\.?[A-Za-z_][\w.*-]*(?:/[\w.*-]+)*/?$")
_COMMAND = re.compile(r"(?:^|\s)(?:[\w./-]*/)?(harnessctl|harnessd)\s+(.*)$")
_KEY = re.compile(r"^\[([a-z_][a-z0-9_.]*)\](?:\s+([a-z_][a-z0-9_]*))?")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
# ``DESIGN.md``, "Section": the quoted words may wrap onto the next line.
_SECTION_REF = re.compile(
    r"`?(DESIGN\.md|README\.md|docs/[\w-]+\.md)`?,?\s+\"([^\"\n]+(?:\n[^\"\n]+)?)\""
)
_SHELLS = ("", "sh", "bash", "console", "shell")
# Where a command line in backticks or a shell line ends (``a | b``, ``a && b``, ``a / b``).
_COMMAND_ENDS = ("|", "/", "&&", ";", ">")
# Where files a doc may name by their bare name live (a checkout may hold a virtualenv too).
_SOURCE_FOLDERS = ("daemon", "sandbox", "tests", "scripts", "seeds", "policies", "docs")


@dataclass(frozen=True)
class Document:
    """A markdown page split into what the checks read."""

    path: Path  # where the page lives (relative links resolve against its folder)
    prose: str  # the text with code blocks blanked (line numbers kept)
    blocks: list[tuple[int, str, str]]  # (first line, language, body) of each code block

    @classmethod
    def parse(cls, path: Path, text: str) -> Document:
        prose: list[str] = []
        blocks: list[tuple[int, str, str]] = []
        open_block: tuple[int, str, list[str]] | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            fence = _FENCE.match(line)
            if fence and open_block is None:
                open_block = (number + 1, fence[1], [])
                prose.append("")
            elif fence and open_block is not None:
                blocks.append((open_block[0], open_block[1], "\n".join(open_block[2])))
                open_block = None
                prose.append("")
            elif open_block is not None:
                open_block[2].append(line)
                prose.append("")
            else:
                prose.append(line)
        return cls(path, "\n".join(prose), blocks)

    def spans(self) -> Iterator[tuple[int, str]]:
        """Each backtick span, whitespace collapsed, with the line it starts on."""
        for m in _SPAN.finditer(self.prose):
            yield self.prose.count("\n", 0, m.start()) + 1, " ".join(m[1].split())

    def headings(self) -> list[str]:
        return [m[2] for line in self.prose.splitlines() if (m := _HEADING.match(line))]


def slug(heading: str) -> str:
    """The anchor a markdown renderer (GitHub's rule) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Document) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for heading in doc.headings():
        base = slug(heading)
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


@dataclass
class Findings:
    """What one document names that does not exist, and how many references were checked."""

    problems: list[str] = field(default_factory=list)
    checked: Counter[str] = field(default_factory=Counter)


class Checker:
    """Checks one document's references, reporting each problem as ``file:line: `ref`: why``."""

    def __init__(self, doc: Document, name: str) -> None:
        self.doc = doc
        self.name = name
        self.found = Findings()

    def report(self, line: int, ref: str, why: str) -> None:
        self.found.problems.append(f"{self.name}:{line}: `{ref}`: {why}")

    def run(self) -> Findings:
        for line, span in self.doc.spans():
            self.span(line, span)
        for line, lang, body in self.doc.blocks:
            if lang == "toml":
                self.toml_block(line, body)
            elif lang in _SHELLS:
                for offset, code in enumerate(body.splitlines()):
                    code = re.split(r"(?:^|\s)#", code)[0]
                    self.command(line + offset, code)
                    self.paths(line + offset, code, in_code=True)
        for m in _LINK.finditer(self.doc.prose):
            self.link(self.doc.prose.count("\n", 0, m.start()) + 1, m[1])
        for m in _SECTION_REF.finditer(self.doc.prose):
            line = self.doc.prose.count("\n", 0, m.start()) + 1
            self.section_ref(line, m[1], " ".join(m[2].split()))
        return self.found

    # -- one backtick span

    def span(self, line: int, span: str) -> None:
        if key := _KEY.match(span):
            self.key(line, key[0], key[1].split("."), key[2])
        elif not self.command(line, span):
            name = span.removesuffix("()")
            if _DOTTED.match(name) and not name.endswith(FILE_SUFFIXES):
                self.python_name(line, name)
        self.paths(line, span)

    def paths(self, line: int, text: str, *, in_code: bool = False) -> None:
        """Path-like tokens; in a code block (where program output shows units such as
        ``ms/token``) only those that start at a top-level entry of the repository."""
        for token in text.split():
            token = token.strip("()[],;")
            if not _PATH.match(token) or token in FILE_SUFFIXES:
                continue
            if "/" not in token and not token.endswith(FILE_SUFFIXES):
                continue
            top = token.split("/")[0]
            if in_code and not ((ROOT / top).exists() or token.startswith(RUN_TIME_PATHS)):
                continue
            self.path(line, token)

    # -- paths and links

    def path(self, line: int, token: str) -> None:
        self.found.checked["path"] += 1
        if token.startswith(RUN_TIME_PATHS) or token in EXAMPLE_FILES:
            return
        bases = (ROOT, self.doc.path.parent)
        if any(_exists(base, token) for base in bases):
            return
        # ``daemon/patches/targets.reached_targets``: a module's path, then a name in it.
        module, _, attr = token.rpartition(".")
        if "/" in module and (ROOT / f"{module}.py").is_file():
            self.python_name(line, f"{module.replace('/', '.')}.{attr}", shown=token)
            return
        if "/" not in token and any(fnmatch(n, token) for n in _tracked_names()):
            return  # a file named by itself, e.g. a test beside the full path named before
        self.report(line, token, "no such file or folder in the repository")

    def link(self, line: int, target: str) -> None:
        if re.match(r"^[a-z]+:", target):
            return  # a web address
        self.found.checked["link"] += 1
        where, _, anchor = target.partition("#")
        path = (self.doc.path.parent / where).resolve()
        if where and not path.exists():
            self.report(line, target, "the link's target does not exist")
            return
        if anchor and (not where or path.suffix == ".md"):
            doc = _document(path) if where else self.doc
            if anchor not in anchors(doc):
                page = path.name if where else "this page"
                self.report(line, target, f"no heading of {page} has the anchor #{anchor}")

    def section_ref(self, line: int, page: str, section: str) -> None:
        self.found.checked["section"] += 1
        target = ROOT / page
        if not target.is_file():
            self.report(line, page, "no such document")
            return
        heads = [h.replace("`", "") for h in _document(target).headings()]
        if not any(h.startswith(section) for h in heads):
            self.report(line, f'{page}, "{section}"', f"no heading of {page} starts so")

    # -- commands

    def command(self, line: int, text: str) -> bool:
        m = _COMMAND.search(text)
        if m is None:
            return False
        self.found.checked["command"] += 1
        why = unknown_words(m[1], m[2].split())
        if why:
            self.report(line, f"{m[1]} {m[2]}".strip(), why)
        return True

    # -- policy and settings keys

    def key(self, line: int, ref: str, section: list[str], key: str | None) -> None:
        self.found.checked["key"] += 1
        why = unknown_key(section, key)
        if why:
            self.report(line, ref, why)

    def toml_block(self, line: int, body: str) -> None:
        try:
            data = tomllib.loads(body)
        except tomllib.TOMLDecodeError as exc:
            self.report(line, body.splitlines()[0] if body else "", f"not TOML: {exc}")
            return
        for section, key in _toml_keys(data):
            self.found.checked["key"] += 1
            why = unknown_key(section, key) if section else unknown_top_level_setting(key)
            if why:
                shown = f"[{'.'.join(section)}] {key}" if section else key
                self.report(line, shown, why)

    # -- Python names

    def python_name(self, line: int, name: str, shown: str | None = None) -> None:
        if name in _event_kinds():
            self.found.checked["event"] += 1
            return
        head, *rest = name.split(".")
        if head in ("daemon", "sandbox"):
            targets = [name]
        elif head in _module_index():
            targets = [f"{m}.{'.'.join(rest)}" for m in _module_index()[head]]
        elif head in _class_index():
            targets = [f"{m}.{name}" for m in _class_index()[head]]
        else:
            return  # a variable, a standard-library name: nothing of ours to look up
        self.found.checked["name"] += 1
        if not any(resolves(t) for t in targets):
            self.report(line, shown or name, f"does not resolve (tried {', '.join(targets)})")


def _exists(base: Path, token: str) -> bool:
    if "*" in token:
        return any(base.glob(token.rstrip("/")))
    path = base / token
    return path.is_dir() if token.endswith("/") else path.exists()


def _toml_keys(data: dict[str, Any], section: tuple[str, ...] = ()) -> Iterator[Any]:
    for key, value in data.items():
        if isinstance(value, dict) and _submodel_path([*section, key]):
            yield from _toml_keys(value, (*section, key))
        else:
            yield list(section), key


@cache
def _tracked_names() -> frozenset[str]:
    return frozenset(
        p.name
        for folder in _SOURCE_FOLDERS
        for p in (ROOT / folder).rglob("*")
        if "__pycache__" not in p.parts
    )


@cache
def _event_kinds() -> frozenset[str]:
    """The event kinds of the events table (``tests/test_event_kinds.py`` keeps that table
    equal to the kinds the daemon emits)."""
    table = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    rows = table.split("## Events", 1)[1].split("\n## ", 1)[0].splitlines()
    return frozenset(k for r in rows if r.startswith("| `") for k in re.findall(r"`([a-z_.]+)`", r))


@cache
def _document(path: Path) -> Document:
    return Document.parse(path, path.read_text(encoding="utf-8"))


# -- the parsers


@cache
def _parsers() -> dict[str, argparse.ArgumentParser]:
    from daemon.cli import build_parser as harnessd_parser
    from daemon.control.ctl import build_parser as harnessctl_parser

    return {"harnessctl": harnessctl_parser(), "harnessd": harnessd_parser()}


def _commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_words(program: str, words: list[str]) -> str | None:
    """Why ``program words...`` is not a command line of ours (None: it is). Placeholders and
    values are let through; command words and options are looked up in the real parser."""
    parser = _parsers()[program]
    path = [program]
    i = 0
    while i < len(words):
        word = words[i].strip("[](),;'\"")
        i += 1
        if word in _COMMAND_ENDS:
            break
        if word in ("", "...", "--"):
            continue
        if word.startswith("-"):
            flag = word.split("=")[0]
            actions = {s: a for a in parser._actions for s in a.option_strings}
            if flag not in actions:
                return f"'{' '.join(path)}' has no option {flag} (it has {', '.join(actions)})"
            if actions[flag].nargs != 0 and "=" not in word:
                i += 1  # its value
            continue
        commands = _commands_of(parser)
        if not commands:
            continue  # a positional value of the command
        if word not in commands:
            return f"'{' '.join(path)}' has no command {word!r} (it has {', '.join(commands)})"
        parser = commands[word]
        path.append(word)
    return None


# -- the policy and settings models


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (unwrapping ``X | None``), or None for a plain value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if (model := _submodel(arg)) is not None:
                return model
    return None


def _roots() -> dict[str, type[BaseModel]]:
    from daemon.config.policy import Policy
    from daemon.config.settings import Settings

    return {"policy": Policy, "harnessd.toml": Settings}


def _submodel_path(section: list[str]) -> tuple[str, type[BaseModel]] | None:
    """Which file owns ``[a.b]`` (the policy or harnessd.toml) and the model of that table."""
    for owner, root in _roots().items():
        model: type[BaseModel] | None = root
        for part in section:
            info = model.model_fields.get(part) if model else None
            model = _submodel(info.annotation) if info else None
        if model is not None:
            return owner, model
    return None


def unknown_key(section: list[str], key: str | None) -> str | None:
    found = _submodel_path(section)
    if found is None:
        return f"no table [{'.'.join(section)}] in the policy or in harnessd.toml"
    owner, model = found
    if key is not None and key not in model.model_fields:
        return (
            f"the {owner}'s [{'.'.join(section)}] has no key {key!r} "
            f"(it has {', '.join(model.model_fields)})"
        )
    return None


def unknown_top_level_setting(key: str) -> str | None:
    settings = _roots()["harnessd.toml"]
    return None if key in settings.model_fields else f"harnessd.toml has no key {key!r}"


# -- Python names


def _modules() -> list[str]:
    names = []
    for path in [*(ROOT / "daemon").rglob("*.py"), *(ROOT / "sandbox").rglob("*.py")]:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if "guest" not in parts:  # the guest runtime runs in the sandbox, not importable here
            names.append(".".join(parts))
    return sorted(names)


@cache
def _module_index() -> dict[str, list[str]]:
    """A module's last name (``briefing``) -> its full names (``daemon.improve.briefing``)."""
    index: dict[str, list[str]] = {}
    for name in _modules():
        index.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return index


@cache
def _class_index() -> dict[str, list[str]]:
    """A class defined in daemon or sandbox -> the modules that define one of that name."""
    index: dict[str, list[str]] = {}
    for name in _modules():
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.is_file():
            path = ROOT / name.replace(".", "/") / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                index.setdefault(node.name, []).append(name)
    return index


def _has(obj: Any, attr: str) -> bool:
    if hasattr(obj, attr):
        return True
    if isinstance(obj, type):  # fields without a class attribute: pydantic, dataclasses
        fields = {
            *getattr(obj, "model_fields", {}),
            *getattr(obj, "__dataclass_fields__", {}),
            *(a for k in obj.__mro__ for a in getattr(k, "__annotations__", {})),
        }
        return attr in fields
    return False


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names something: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not _has(obj, attr):
                return False
            obj = getattr(obj, attr, None)
        return True
    return False


def check(path: Path, text: str) -> Findings:
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    return Checker(Document.parse(path, text), name).run()


def documents() -> list[Path]:
    return [*(ROOT / d for d in DOCUMENTS), *sorted((ROOT / "docs").glob("*.md"))]


def test_the_docs_name_only_what_exists() -> None:
    problems: list[str] = []
    checked: Counter[str] = Counter()
    for path in documents():
        found = check(path, path.read_text(encoding="utf-8"))
        problems += found.problems
        checked += found.checked
    assert not problems, "the docs name what does not exist:\n" + "\n".join(problems)
    # The scan sees the docs' references, not nothing.
    least = {"path": 100, "command": 30, "key": 40, "name": 10, "link": 20, "event": 10}
    for kind, count in least.items():
        assert checked[kind] >= count, (kind, checked)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = Document.parse(ROOT / "README.md", (ROOT / "README.md").read_text(encoding="utf-8"))
    linked = {m[1].partition("#")[0] for m in _LINK.finditer(readme.prose)}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages, "no docs/ pages"
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"


_BAD = [
    ("see `daemon/improve/nowhere.py`", "daemon/improve/nowhere.py", "no such file"),
    ("read [the page](docs/no_such_page.md)", "docs/no_such_page.md", "does not exist"),
    ("see [above](#no-such-heading)", "#no-such-heading", "anchor"),
    ("run `harnessctl frobnicate c7`", "harnessctl frobnicate c7", "no command 'frobnicate'"),
    ("run `harnessctl lineage --no-such-flag`", "harnessctl lineage", "no option --no-such-flag"),
    ("run `harnessd policy frob FILE`", "harnessd policy frob", "no command 'frob'"),
    ("set `[proposer] no_such_key`", "[proposer] no_such_key", "no key 'no_such_key'"),
    ("set `[gates.nope] enabled = true`", "[gates.nope]", "no table [gates.nope]"),
    ("set `[local] n_ctxx = 8192`", "[local] n_ctxx", "harnessd.toml's [local] has no key"),
    ("```toml\n[endpoint]\nenable = true\n```", "[endpoint] enable", "no key 'enable'"),
    ("the stages, `daemon.improve.pipeline.NO_STAGES`", "NO_STAGES", "does not resolve"),
    ("`daemon/patches/targets.no_function`", "targets.no_function", "does not resolve"),
    ("`briefing.no_such_function` decides", "briefing.no_such_function", "does not resolve"),
    ("a field, `Verdict.no_such_field`", "Verdict.no_such_field", "does not resolve"),
    ('as `DESIGN.md`, "No such section" says', '"No such section"', "no heading"),
    ("the event `heldout.resumd`", "heldout.resumd", "does not resolve"),
]


@pytest.mark.parametrize(("bad", "shown", "why"), _BAD)
def test_a_reference_to_nothing_is_reported_with_its_line(bad: str, shown: str, why: str) -> None:
    text = f"# A page\n\nIt is fine up to here: `daemon/improve/loop.py`.\n\n{bad}\n"
    line = 5 if not bad.startswith("```") else 6
    found = check(ROOT / "docs" / "planted.md", text)
    assert len(found.problems) == 1, found.problems
    problem = found.problems[0]
    assert problem.startswith(f"docs/planted.md:{line}: `"), problem
    assert shown in problem and why in problem, problem


def test_real_references_of_every_kind_pass() -> None:
    good = [
        "# Start",
        "`daemon/improve/pipeline.py`, [the design](../DESIGN.md#harnessd-design-notes),",
        "[up](#start); `harnessctl show c7 --json`, `harnessd eval DIR --suite bfcl:simple",
        "[--json]`; `[gates.review] enabled`, `[local] n_ctx`; `daemon.improve.pipeline.STAGES`,",
        "`daemon/patches/targets.reached_targets`, `Verdict.reason`, the event `heldout.pinned`;",
        '`DESIGN.md`, "Power you can state".',
        "```toml",
        "[proposer]",
        'model = "openai:qwen2.5-coder:7b"',
        "```",
    ]
    found = check(ROOT / "docs" / "good.md", "\n".join(good) + "\n")
    assert found.problems == []
    assert set(found.checked) == {"path", "link", "command", "key", "name", "section", "event"}


# -- the README's layout table


def missing_from_layout(readme: str) -> list[str]:
    """The packages of daemon and sandbox, and daemon's top-level modules, that the README's
    layout table does not name."""
    table = readme.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    named = {
        code.rstrip("/")
        for row in table.splitlines()
        if row.startswith("| `")
        for code in re.findall(r"`([^`]+)`", row.split("|")[1])
    }
    wanted = [
        *(str(p.parent.relative_to(ROOT)) for p in sorted(ROOT.glob("daemon/**/__init__.py"))),
        *(str(p.parent.relative_to(ROOT)) for p in sorted(ROOT.glob("sandbox/**/__init__.py"))),
        *(str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("daemon/*.py"))),
    ]
    # daemon's own package is its top-level modules, each named.
    return [w for w in wanted if w not in named and w not in ("daemon", "daemon/__init__.py")]


def test_the_readme_layout_names_every_package_and_top_level_module() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert missing_from_layout(readme) == []


def test_a_layout_without_a_module_is_caught() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(r for r in readme.splitlines() if r.startswith("| `daemon/pyast.py`"))
    assert missing_from_layout(readme.replace(row + "\n", "")) == ["daemon/pyast.py"]
