"""Read unified diffs, as git writes them and as language models approximate them.

Tolerated: ``a/``/``b/`` prefixes or none, timestamps after the path, git's extended headers
(new/deleted file, rename, mode, index), ``@@`` headers without numbers or with wrong line
counts (inside a fenced block the counts are ignored and the block's structure decides), and
blank context lines whose leading space was lost. Binary patches are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from daemon.patches.model import FileDiff, Hunk, HunkLine, LineKind

_HUNK_RE = re.compile(r"^@@+ *-(\d+)(?:,(\d+))? +\+(\d+)(?:,(\d+))? *@@+")
_MODE_HEADERS = ("new file mode ", "deleted file mode ", "old mode ", "new mode ")
_SKIPPED_HEADERS = ("index ", "similarity index ", "dissimilarity index ")
# A masked line (e.g. inside a fence that the caller parses separately) ends any hunk.
BARRIER = "\x00"


class DiffSyntaxError(ValueError):
    """The text looks like a diff but cannot be read as one; the message says where."""


@dataclass
class _FileBuilder:
    first_line: int
    git_old: str | None = None
    git_new: str | None = None
    old: str | None = None
    new: str | None = None
    has_file_headers: bool = False
    is_new: bool = False
    is_deleted: bool = False
    rename_from: str | None = None
    rename_to: str | None = None
    new_mode: str | None = None
    hunks: list[Hunk] = field(default_factory=list)

    def build(self) -> FileDiff:
        if self.has_file_headers:
            old, new = self.old, self.new
        else:
            old = self.rename_from or self.git_old
            new = self.rename_to or self.git_new
            if self.is_new:
                old = None
            if self.is_deleted:
                new = None
        if old is None and new is None:
            raise DiffSyntaxError(f"line {self.first_line + 1}: a diff names no file")
        changes_something = (
            self.hunks or self.is_new or self.is_deleted or self.rename_from or self.new_mode
        )
        if not changes_something:
            raise DiffSyntaxError(
                f"line {self.first_line + 1}: the diff for {new or old} has no hunks"
            )
        return FileDiff(old_path=old, new_path=new, hunks=tuple(self.hunks), new_mode=self.new_mode)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        return inner.encode("latin-1", "backslashreplace").decode("unicode_escape")
    return value


def _header_path(value: str, prefix: str) -> str | None:
    value = value.split("\t", 1)[0].strip()
    value = _unquote(value)
    if value == "/dev/null":
        return None
    return value[len(prefix) :] if value.startswith(prefix) else value


def _git_paths(rest: str) -> tuple[str | None, str | None]:
    """Split ``a/P b/Q`` from a ``diff --git`` line (paths may contain spaces)."""
    rest = rest.strip()
    if rest.startswith("a/"):
        for at in (m.start() for m in re.finditer(" b/", rest)):
            if rest[2:at] == rest[at + 3 :]:
                return rest[2:at], rest[at + 3 :]
        at = rest.find(" b/")
        if at > 0:
            return rest[2:at], rest[at + 3 :]
    parts = rest.split()
    if len(parts) == 2:
        return parts[0], parts[1]
    return None, None


def _is_file_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _read_hunk(lines: list[str], i: int, trust_counts: bool) -> tuple[Hunk, int]:
    """Read the hunk whose ``@@`` header is ``lines[i]``; return it and the next index."""
    match = _HUNK_RE.match(lines[i])
    old_start = new_start = old_count = new_count = None
    if match:
        old_start, new_start = int(match[1]), int(match[3])
        old_count = int(match[2]) if match[2] is not None else 1
        new_count = int(match[4]) if match[4] is not None else 1
    use_counts = trust_counts and old_count is not None and new_count is not None
    body: list[HunkLine] = []
    bare_blank: list[bool] = []
    olds = news = 0
    j = i + 1
    while j < len(lines):
        line = lines[j]
        if line.startswith("\\"):
            if body:
                body[-1] = HunkLine(body[-1].kind, body[-1].text, newline=False)
            j += 1
            continue
        if use_counts and olds >= (old_count or 0) and news >= (new_count or 0):
            break
        if line.startswith(("@@", "diff --git ", BARRIER)):
            break
        if not use_counts and _is_file_header(lines, j):
            break
        kind: LineKind
        if line == "" or line[0] == " ":
            kind = " "
        elif line[0] in "-+":
            kind = "-" if line[0] == "-" else "+"
        else:
            break
        body.append(HunkLine(kind, line[1:]))
        bare_blank.append(line == "")
        olds += kind != "+"
        news += kind != "-"
        j += 1
    # Blank lines after a hunk are usually spacing, not context that lost its space.
    while body and bare_blank[-1] and not use_counts:
        body.pop()
        bare_blank.pop()
    if not any(line.kind != " " for line in body):
        raise DiffSyntaxError(f"line {i + 1}: the hunk '{lines[i].strip()}' changes no line")
    return Hunk(old_start, new_start, tuple(body)), j


def _read_git_header(lines: list[str], i: int, builder: _FileBuilder) -> int:
    """Consume git's extended header lines after ``diff --git``; return the next index."""
    while i < len(lines):
        line = lines[i]
        if line.startswith("new file mode "):
            builder.is_new = True
            builder.new_mode = line.split()[-1]
        elif line.startswith("deleted file mode "):
            builder.is_deleted = True
        elif line.startswith("new mode "):
            builder.new_mode = line.split()[-1]
        elif line.startswith("rename from "):
            builder.rename_from = _unquote(line[len("rename from ") :].strip())
        elif line.startswith("rename to "):
            builder.rename_to = _unquote(line[len("rename to ") :].strip())
        elif line.startswith(("copy from ", "copy to ")):
            raise DiffSyntaxError(f"line {i + 1}: file copies are not supported; add the file")
        elif line.startswith(("GIT binary patch", "Binary files ")):
            raise DiffSyntaxError(f"line {i + 1}: binary patches are not supported")
        elif not line.startswith(_MODE_HEADERS + _SKIPPED_HEADERS):
            return i
        i += 1
    return i


@dataclass
class ParsedDiff:
    files: list[FileDiff]
    # Indices of the lines that belong to the diff (headers and hunk lines).
    consumed: set[int]
    # Index of each file's first line, parallel to ``files``.
    starts: list[int]


def scan_diff(lines: list[str], *, trust_counts: bool) -> ParsedDiff:
    """Find every file diff in ``lines``, skipping prose between them."""
    files: list[FileDiff] = []
    starts: list[int] = []
    consumed: set[int] = set()
    current: _FileBuilder | None = None

    def finish() -> None:
        nonlocal current
        if current is not None:
            files.append(current.build())
            starts.append(current.first_line)
            current = None

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            finish()
            current = _FileBuilder(first_line=i)
            current.git_old, current.git_new = _git_paths(line[len("diff --git ") :])
            end = _read_git_header(lines, i + 1, current)
            consumed.update(range(i, end))
            i = end
        elif _is_file_header(lines, i):
            fresh_git = current is not None and not current.has_file_headers and not current.hunks
            if not fresh_git:
                finish()
                current = _FileBuilder(first_line=i)
            assert current is not None
            current.has_file_headers = True
            current.old = _header_path(lines[i][4:], "a/")
            current.new = _header_path(lines[i + 1][4:], "b/")
            consumed.update((i, i + 1))
            i += 2
        elif line.startswith("@@"):
            if current is None:
                raise DiffSyntaxError(
                    f"line {i + 1}: a hunk comes before any '--- a/FILE' / '+++ b/FILE' header"
                )
            hunk, end = _read_hunk(lines, i, trust_counts)
            current.hunks.append(hunk)
            consumed.update(range(i, end))
            i = end
        else:
            i += 1
    finish()
    return ParsedDiff(files=files, consumed=consumed, starts=starts)


def parse_unified_diff(text: str) -> list[FileDiff]:
    """Every file diff in ``text`` (a patch file); DiffSyntaxError if none or malformed."""
    lines = text.replace("\r\n", "\n").split("\n")
    files = scan_diff(lines, trust_counts=True).files
    if not files:
        raise DiffSyntaxError(
            "no file diff found (expected '--- a/FILE', '+++ b/FILE', '@@' hunks)"
        )
    return files
