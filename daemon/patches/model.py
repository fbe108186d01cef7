"""What a parsed proposal is made of: file diffs, search/replace blocks, and their failures.

Plain frozen dataclasses: the parser builds them, the applier consumes them, nothing else
depends on their layout. Line texts never include their ``\\n``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from daemon.errors import HarnessdError

LineKind = Literal[" ", "-", "+"]


class PatchRejected(HarnessdError):
    """A candidate failed a pipeline stage before it could run; ``reason`` says why."""

    def __init__(self, reason: str, *, stage: str = "static") -> None:
        super().__init__(f"patch rejected ({stage}): {reason}")
        self.stage = stage
        self.reason = reason


class NoChange(PatchRejected):
    """The patch applies but leaves every file as it was."""


@dataclass(frozen=True)
class HunkLine:
    kind: LineKind
    text: str
    # False when a "\ No newline at end of file" marker followed this line.
    newline: bool = True


@dataclass(frozen=True)
class Hunk:
    # 1-based line numbers from the "@@" header; None when the header carried none.
    old_start: int | None
    new_start: int | None
    lines: tuple[HunkLine, ...]

    @property
    def old(self) -> list[str]:
        return [line.text for line in self.lines if line.kind != "+"]

    @property
    def new(self) -> list[str]:
        return [line.text for line in self.lines if line.kind != "-"]

    def new_ends_without_newline(self) -> bool:
        news = [line for line in self.lines if line.kind != "-"]
        return bool(news) and not news[-1].newline


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a unified diff; ``old_path`` None: created, ``new_path`` None: deleted."""

    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]
    # Git's mode for the new file when the diff states one ("100644", "120000" = symlink).
    new_mode: str | None = None


@dataclass(frozen=True)
class SearchReplace:
    """Replace the one place in ``path`` that reads ``search`` with ``replace``."""

    path: str
    search: tuple[str, ...]
    replace: tuple[str, ...]
    # 1-based number of the block in the proposal, for error messages.
    index: int = 1


Edit = FileDiff | SearchReplace
ProposalFormat = Literal["diff", "search_replace"]


@dataclass(frozen=True)
class Proposal:
    rationale: str
    edits: tuple[Edit, ...]
    format: ProposalFormat


@dataclass(frozen=True)
class ParseFailure:
    """Proposer output that holds no usable patch; kept whole so the lineage can record it."""

    reason: str
    raw: str
    rationale: str = ""
