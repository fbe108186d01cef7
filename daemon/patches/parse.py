"""Turn a proposer's free text into a :class:`Proposal`, or a :class:`ParseFailure` saying why not.

Two patch formats are accepted: unified diffs (fenced or bare) and search/replace blocks,
which weaker models write more reliably::

    path/to/file.py
    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE

The rationale is a ``Rationale:`` line or section if there is one, else the prose around the
patch; either way trimmed to :data:`MAX_RATIONALE_CHARS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from daemon.patches.diff import BARRIER, DiffSyntaxError, scan_diff
from daemon.patches.model import (
    Edit,
    FileDiff,
    ParseFailure,
    Proposal,
    ProposalFormat,
    SearchReplace,
)

MAX_RATIONALE_CHARS = 600

_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
_SEARCH_RE = re.compile(r"^\s*<{5,9} ?SEARCH\s*$")
_DIVIDER_RE = re.compile(r"^\s*={5,9}\s*$")
_REPLACE_RE = re.compile(r"^\s*>{5,9} ?REPLACE\s*$")
_PATH_RE = re.compile(r"^[\w.\-/]+$")
_PATH_LABEL_RE = re.compile(r"^(?:file(?:name)?|path)\s*:\s*", re.IGNORECASE)
_RATIONALE_RE = re.compile(
    r"^\s*(?P<heading>#{1,6}\s*)?[*_]*rationale[*_]*\s*(?P<colon>[:\-—])?[*_]*\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_NO_PATCH = (
    "no patch found: expected a unified diff ('--- a/FILE', '+++ b/FILE', '@@' hunks) "
    "or SEARCH/REPLACE blocks (FILE, '<<<<<<< SEARCH', old lines, '=======', new lines, "
    "'>>>>>>> REPLACE')"
)


@dataclass
class _Fences:
    """Which lines are fence delimiters and which fenced block each line sits in."""

    delimiters: set[int]
    block_of: dict[int, int]
    blocks: list[range]


def _closes(opener: str, fence: str, line: str) -> bool:
    return fence[0] == opener[0] and len(fence) >= len(opener) and line.strip() == fence


def _find_fences(lines: list[str]) -> _Fences:
    delimiters: set[int] = set()
    block_of: dict[int, int] = {}
    blocks: list[range] = []
    opener: tuple[int, str] | None = None
    for i, line in enumerate(lines):
        match = _FENCE_RE.match(line)
        if opener is None:
            if match:
                opener = (i, match[1])
                delimiters.add(i)
        elif match and _closes(opener[1], match[1], line):
            delimiters.add(i)
            blocks.append(range(opener[0] + 1, i))
            for j in blocks[-1]:
                block_of[j] = len(blocks) - 1
            opener = None
    if opener is not None:  # an unclosed fence runs to the end of the text
        blocks.append(range(opener[0] + 1, len(lines)))
        for j in blocks[-1]:
            block_of[j] = len(blocks) - 1
    return _Fences(delimiters, block_of, blocks)


def _clean_path(line: str) -> str | None:
    text = line.strip().strip("`*\"'").strip()
    text = text.lstrip("#").strip().strip("`*\"'")
    text = _PATH_LABEL_RE.sub("", text).strip().strip("`*\"'").rstrip(":").strip("`*\"'")
    if _PATH_RE.match(text) and ("." in text or "/" in text) and not set(text) <= {"."}:
        return text
    return None


def _path_before(lines: list[str], i: int, floor: int, fences: _Fences) -> tuple[str, int] | None:
    k = i - 1
    while k > floor and (not lines[k].strip() or k in fences.delimiters):
        k -= 1
    if k <= floor:
        return None
    path = _clean_path(lines[k])
    return (path, k) if path is not None else None


def _search_replace(
    lines: list[str], fences: _Fences
) -> tuple[list[SearchReplace], set[int]] | ParseFailure:
    blocks: list[SearchReplace] = []
    consumed: set[int] = set()
    last_path: str | None = None
    floor = -1
    i = 0
    while i < len(lines):
        if not _SEARCH_RE.match(lines[i]):
            if _REPLACE_RE.match(lines[i]):
                return ParseFailure(f"line {i + 1}: '>>>>>>> REPLACE' without a SEARCH", "")
            i += 1
            continue
        number = len(blocks) + 1
        found = _path_before(lines, i, floor, fences)
        if found is not None:
            last_path = found[0]
            consumed.add(found[1])
        if last_path is None:
            return ParseFailure(
                f"SEARCH block {number} (line {i + 1}) names no file: put the file's path "
                "alone on the line before '<<<<<<< SEARCH'",
                "",
            )
        divider = next((j for j in range(i + 1, len(lines)) if _DIVIDER_RE.match(lines[j])), None)
        nested = next((j for j in range(i + 1, len(lines)) if _SEARCH_RE.match(lines[j])), None)
        if divider is None or (nested is not None and nested < divider):
            return ParseFailure(f"SEARCH block {number} (line {i + 1}) has no '=======' line", "")
        end = next((j for j in range(divider + 1, len(lines)) if _REPLACE_RE.match(lines[j])), None)
        if end is None or (nested is not None and nested < end):
            return ParseFailure(
                f"SEARCH block {number} (line {i + 1}) has no '>>>>>>> REPLACE' line", ""
            )
        blocks.append(
            SearchReplace(
                path=last_path,
                search=tuple(lines[i + 1 : divider]),
                replace=tuple(lines[divider + 1 : end]),
                index=number,
            )
        )
        consumed.update(range(i, end + 1))
        floor = end
        i = end + 1
    return blocks, consumed


def _looks_like_diff(lines: list[str]) -> bool:
    return any(
        line.startswith(("@@", "diff --git "))
        or (line.startswith("--- ") and k + 1 < len(lines) and lines[k + 1].startswith("+++ "))
        for k, line in enumerate(lines)
    )


def _diffs(lines: list[str], fences: _Fences) -> tuple[list[FileDiff], set[int]]:
    found: list[tuple[int, FileDiff]] = []
    consumed: set[int] = set()
    for block in fences.blocks:
        inner = lines[block.start : block.stop]
        if _looks_like_diff(inner):
            parsed = scan_diff(inner, trust_counts=False)
            found.extend(
                (block.start + s, f) for s, f in zip(parsed.starts, parsed.files, strict=True)
            )
            consumed.update(block)
    # Outside fences the hunk counts decide where a hunk ends, so prose after it stays prose.
    masked = [BARRIER if k in fences.block_of else line for k, line in enumerate(lines)]
    bare = scan_diff(masked, trust_counts=True)
    found.extend(zip(bare.starts, bare.files, strict=True))
    consumed |= bare.consumed
    found.sort(key=lambda item: item[0])
    return [f for _, f in found], consumed


def _trim(text: str) -> str:
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if len(text) <= MAX_RATIONALE_CHARS:
        return text
    cut = text[: MAX_RATIONALE_CHARS - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > MAX_RATIONALE_CHARS // 2 else cut).rstrip() + "…"


def _rationale(lines: list[str], patch_lines: set[int], fences: _Fences) -> str:
    def prose(k: int) -> bool:
        return k not in patch_lines and k not in fences.block_of and k not in fences.delimiters

    for k, line in enumerate(lines):
        match = _RATIONALE_RE.match(line) if prose(k) else None
        if match is None or not (match["colon"] or match["heading"] or not match["rest"]):
            continue
        parts = [match["rest"].strip("*_ ")]
        j = k + 1
        while j < len(lines) and prose(j):
            if not lines[j].strip() and any(parts):
                break
            parts.append(lines[j].strip())
            j += 1
        text = _trim(" ".join(p for p in parts if p))
        if text:
            return text
    return _trim("\n".join(line.rstrip() for k, line in enumerate(lines) if prose(k)))


def parse_proposal(text: str) -> Proposal | ParseFailure:
    """Read a proposer's reply; never raises on bad input (the raw text goes into the failure)."""
    lines = text.replace("\r\n", "\n").split("\n")
    fences = _find_fences(lines)
    edits: list[Edit]
    kind: ProposalFormat
    if any(_SEARCH_RE.match(line) or _REPLACE_RE.match(line) for line in lines):
        result = _search_replace(lines, fences)
        if isinstance(result, ParseFailure):
            return ParseFailure(result.reason, text, _rationale(lines, set(), fences))
        blocks, consumed = result
        edits, kind = list(blocks), "search_replace"
    else:
        try:
            diffs, consumed = _diffs(lines, fences)
        except DiffSyntaxError as exc:
            return ParseFailure(str(exc), text, _rationale(lines, set(), fences))
        edits, kind = list(diffs), "diff"
    rationale = _rationale(lines, consumed, fences)
    if not edits:
        return ParseFailure(_NO_PATCH, text, rationale)
    return Proposal(rationale=rationale, edits=tuple(edits), format=kind)
