"""Apply parsed edits to an in-memory copy of a harness tree.

Nothing touches the disk here, so a rejected patch leaves no trace. Matching is exact first;
if that finds nothing, lines are compared with their trailing whitespace ignored, and the
file's own context lines are kept. A diff hunk that matches several places goes to the one
nearest its ``@@`` line number (as ``patch`` does); a SEARCH block must match exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping

from daemon.patches.model import Edit, FileDiff, Hunk, PatchRejected, SearchReplace

_SHOWN_PLACES = 5


class _File:
    """A text file as lines without their ``\\n``, plus whether the last one had it."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.final_newline = True
        if text.endswith("\n") or not text:
            self.lines.pop()
        else:
            self.final_newline = False

    def text(self) -> str:
        tail = "\n" if self.lines and self.final_newline else ""
        return "\n".join(self.lines) + tail


def _places(lines: list[str], wanted: list[str], floor: int) -> list[int]:
    """Where ``wanted`` occurs in ``lines`` at or after ``floor``: exact, else modulo line ends."""
    last = len(lines) - len(wanted)
    exact = [i for i in range(floor, last + 1) if lines[i : i + len(wanted)] == wanted]
    if exact:
        return exact
    stripped = [w.rstrip() for w in wanted]
    return [
        i
        for i in range(floor, last + 1)
        if [line.rstrip() for line in lines[i : i + len(wanted)]] == stripped
    ]


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _line_list(places: list[int]) -> str:
    shown = ", ".join(str(p + 1) for p in places[:_SHOWN_PLACES])
    return shown + (", ..." if len(places) > _SHOWN_PLACES else "")


class Workspace:
    """The edited state of a tree: ``base`` plus every file an edit touched."""

    def __init__(self, base: Mapping[str, bytes]) -> None:
        self.base = base
        self.touched: dict[str, str | None] = {}

    def read(self, path: str) -> str | None:
        if path in self.touched:
            return self.touched[path]
        raw = self.base.get(path)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PatchRejected(f"{path} is not UTF-8 text and cannot be patched") from None

    def changes(self) -> dict[str, bytes | None]:
        """Every path whose content differs from the base (None: deleted)."""
        out: dict[str, bytes | None] = {}
        for path, text in self.touched.items():
            data = None if text is None else text.encode("utf-8")
            if data != self.base.get(path):
                out[path] = data
        return out

    def apply(self, edit: Edit) -> None:
        if isinstance(edit, SearchReplace):
            self._search_replace(edit)
        else:
            self._file_diff(edit)

    def _search_replace(self, edit: SearchReplace) -> None:
        where = f"{edit.path}: SEARCH block {edit.index}"
        text = self.read(edit.path)
        if not any(line.strip() for line in edit.search):
            if text is not None and text.strip():
                raise PatchRejected(
                    f"{where} is empty but the file exists; quote the lines to replace"
                )
            self.touched[edit.path] = "".join(line + "\n" for line in edit.replace)
            return
        if text is None:
            raise PatchRejected(f"{where}: the file does not exist in the harness")
        file = _File(text)
        search, replace = list(edit.search), list(edit.replace)
        places = _places(file.lines, search, 0)
        if not places and (_trim_blank(search) != search):
            # Models often leave a blank line after a marker; blank edges carry no meaning.
            search, replace = _trim_blank(search), _trim_blank(replace)
            places = _places(file.lines, search, 0)
        if not places:
            first = next(line for line in search if line.strip())
            raise PatchRejected(
                f"{where} matches nothing; copy the lines exactly from the current file "
                f"(its first line: {first.strip()!r})"
            )
        if len(places) > 1:
            raise PatchRejected(
                f"{where} matches {len(places)} places (lines {_line_list(places)}); "
                "include more surrounding lines so that it matches once"
            )
        at = places[0]
        file.lines[at : at + len(search)] = replace
        self.touched[edit.path] = file.text()

    def _file_diff(self, edit: FileDiff) -> None:
        source, target = edit.old_path, edit.new_path
        if source is None:
            assert target is not None  # the parser never yields a diff naming no file
            if self.read(target) is not None:
                raise PatchRejected(f"the diff creates {target}, which already exists")
            text = ""
        else:
            found = self.read(source)
            if found is None:
                raise PatchRejected(f"the diff changes {source}, which does not exist")
            text = found
        renamed = source is not None and target not in (None, source)
        if renamed and target is not None and self.read(target) is not None:
            raise PatchRejected(f"the diff renames {source} onto {target}, which exists")
        name = target or source or ""
        file = _File(text)
        _apply_hunks(name, file, edit.hunks)
        if target is None:
            if file.lines:
                raise PatchRejected(
                    f"the diff deletes {source} but its hunks leave {len(file.lines)} lines"
                )
            self.touched[name] = None
            return
        if source is not None and source != target:
            self.touched[source] = None
        self.touched[target] = file.text()


def _apply_hunks(path: str, file: _File, hunks: tuple[Hunk, ...]) -> None:
    shift = 0
    floor = 0
    for number, hunk in enumerate(hunks, 1):
        old = hunk.old
        anchor = None
        if hunk.old_start is not None:
            anchor = hunk.old_start - 1 if old else hunk.old_start
        at = _locate(
            path, number, file.lines, old, floor, None if anchor is None else anchor + shift
        )
        reached_end = at + len(old) == len(file.lines)
        own = iter(file.lines[at : at + len(old)])
        replacement: list[str] = []
        for line in hunk.lines:
            if line.kind == " ":
                replacement.append(next(own))
            elif line.kind == "-":
                next(own)
            else:
                replacement.append(line.text)
        file.lines[at : at + len(old)] = replacement
        if reached_end:
            file.final_newline = not hunk.new_ends_without_newline()
        if anchor is not None:
            shift = at - anchor
        shift += len(replacement) - len(old)
        floor = at + len(replacement)


def _locate(
    path: str, number: int, lines: list[str], old: list[str], floor: int, hint: int | None
) -> int:
    if not old:
        if hint is None:
            if not lines:
                return 0
            raise PatchRejected(
                f"{path}: hunk {number} only adds lines and its '@@' header has no line number"
            )
        return min(max(hint, floor), len(lines))
    places = _places(lines, old, floor)
    if not places:
        raise PatchRejected(
            f"{path}: hunk {number} does not apply: its context and removed lines are not in "
            f"the file (first of them: {old[0].strip()!r})"
        )
    if len(places) == 1:
        return places[0]
    if hint is None:
        raise PatchRejected(
            f"{path}: hunk {number} matches {len(places)} places (lines {_line_list(places)}) "
            "and its '@@' header has no line number; add more context"
        )
    return min(places, key=lambda p: (abs(p - hint), p))


def apply_edits(base: Mapping[str, bytes], edits: tuple[Edit, ...]) -> dict[str, bytes | None]:
    """The files ``edits`` change in tree ``base`` (None: deleted); PatchRejected otherwise."""
    workspace = Workspace(base)
    for edit in edits:
        workspace.apply(edit)
    return workspace.changes()
