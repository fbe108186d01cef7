"""Lineage records as the rest of the daemon sees them, and the text of their git commits.

Commit messages are built from SQLite rows only, so a commit an interrupted promotion never
wrote can be rebuilt identically later.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from enum import StrEnum

from daemon.lineage.git import POINTER_TRAILER, VERSION_TRAILER
from daemon.verdict import Stage, Verdict


class CandidateState(StrEnum):
    """Where a candidate is in its life (the ``candidates`` table's ``state``).

    ``proposed`` -> ``evaluating`` -> ``rejected`` or (through a promotion only)
    ``accepted``; ``interrupted`` when harnessd stopped mid-evaluation. With the review step
    on, one that passed every gate is ``awaiting_review`` until a person decides it."""

    PROPOSED = "proposed"
    EVALUATING = "evaluating"
    AWAITING_REVIEW = "awaiting_review"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    INTERRUPTED = "interrupted"


FINAL_STATES = frozenset({CandidateState.ACCEPTED, CandidateState.REJECTED})


class PointerKind(StrEnum):
    """What switched the live version (the ``pointer`` table's ``kind``)."""

    SEED = "seed"
    PROMOTE = "promote"
    ROLLBACK = "rollback"


class Decider(StrEnum):
    """Who decided a candidate's fate: the gates alone, or a person in review."""

    GATES = "gates"
    PERSON = "person"


@dataclass(frozen=True)
class Review:
    """A candidate's review: held when it passed every gate, decided by a person.

    ``decided`` is None while it awaits review; then ``reviewer`` names the person (as
    harnessctl reported them) and ``reason`` says why (required for a rejection)."""

    held: float
    decided: float | None = None
    reviewer: str | None = None
    reason: str = ""


class CandidateSource(StrEnum):
    """Who wrote a candidate: the loop's proposer model, or a person (``harnessctl propose``)."""

    PROPOSER = "proposer"
    EXTERNAL = "external"


@dataclass(frozen=True, kw_only=True)
class NewCandidate:
    """A candidate as it is recorded, before the lineage gives it an id.

    Passed whole from intake to the ``candidates`` table, so the texts (all ``str``) are
    told apart by name, never by position.

    ``parent_id`` is the version the candidate is tested against (the live version when it
    was proposed) and ``patch`` its whole change from that version; ``base_id`` is its tree
    parent, the earlier candidate of the same version it was built on (None: built on the
    version itself), so the search tree is recorded apart from what the test compares.
    """

    parent_id: int
    source: CandidateSource
    proposer_model: str | None  # the model string, None for a person's patch
    rationale: str  # why, as the proposer or person put it (cut to the intake's limit)
    patch: str  # the normalised git diff; "" when nothing applied
    raw: str  # what the proposer or person wrote, verbatim
    base_id: int | None = None
    # The earlier candidate whose program this one repeats (rejected at the static stage).
    duplicate_of: int | None = None


def version_name(version_id: int) -> str:
    return f"v{version_id:04d}"


@dataclass(frozen=True)
class Version:
    """An accepted harness version (the seed or a promoted candidate); never changes."""

    id: int
    name: str
    parent_id: int | None
    candidate_id: int | None
    created: float
    tree_hash: str
    git_commit: str | None
    message: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Version:
        return cls(
            id=row["id"],
            name=row["name"],
            parent_id=row["parent_id"],
            candidate_id=row["candidate_id"],
            created=row["created"],
            tree_hash=row["tree_hash"],
            git_commit=row["git_commit"],
            message=row["message"],
        )


@dataclass(frozen=True)
class Candidate:
    id: int
    parent_version_id: int
    created: float
    updated: float
    source: CandidateSource
    proposer_model: str | None
    rationale: str
    patch: str
    raw: str
    state: CandidateState
    stage: Stage
    verdict: Verdict | None  # the gates' verdict (an approval or rejection does not edit it)
    # The tree parent: the earlier candidate this one was built on (None: built on the
    # version ``parent_version_id``, which is what its held-out test compares against).
    base_candidate_id: int | None = None
    review: Review | None = None  # None: never held for review
    # The earlier candidate whose program this one repeated (rejected at the static stage
    # without being evaluated); None: not a repeat.
    duplicate_of: int | None = None

    @property
    def decided_by(self) -> Decider | None:
        """Who decided: None while undecided (proposed, evaluating, awaiting review,
        interrupted); a person if a review was decided; else the gates."""
        if self.state not in FINAL_STATES:
            return None
        if self.review is not None and self.review.decided is not None:
            return Decider.PERSON
        return Decider.GATES

    @property
    def decision_reason(self) -> str:
        """Why it ended as it did: the reviewer's reason, or the gates' verdict's."""
        if self.decided_by is Decider.PERSON and self.review is not None:
            return self.review.reason
        return self.verdict.reason if self.verdict else ""

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Candidate:
        held = row["review_held"]
        review = (
            None
            if held is None
            else Review(
                held=float(held),
                decided=row["review_decided"],
                reviewer=row["reviewer"],
                reason=row["review_reason"] or "",
            )
        )
        return cls(
            id=row["id"],
            parent_version_id=row["parent_version_id"],
            created=row["created"],
            updated=row["updated"],
            source=CandidateSource(row["source"]),
            proposer_model=row["proposer_model"],
            rationale=row["rationale"],
            patch=row["patch"],
            raw=row["raw"],
            state=CandidateState(row["state"]),
            stage=Stage(row["stage"]),
            verdict=Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None,
            base_candidate_id=row["base_candidate_id"],
            review=review,
            duplicate_of=row["duplicate_of"],
        )


@dataclass(frozen=True)
class PointerChange:
    """One switch of the live version: the seed, a promotion or a rollback. ``reason`` is
    the seed's folder, the promoted candidate, or the reason a person gave a rollback."""

    id: int
    ts: float
    version_id: int
    version_name: str
    kind: PointerKind
    reason: str
    candidate_id: int | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> PointerChange:
        return cls(
            id=row["id"],
            ts=row["ts"],
            version_id=row["version_id"],
            version_name=row["version_name"],
            kind=PointerKind(row["kind"]),
            reason=row["reason"],
            candidate_id=row["candidate_id"],
        )

    @property
    def is_rollback(self) -> bool:
        return self.kind is PointerKind.ROLLBACK

    @property
    def summary(self) -> str:
        """One line for people: ``rollback: accuracy regressed``."""
        return f"{self.kind}: {self.reason}"


@dataclass(frozen=True)
class TreeEntry:
    """A version in ``harnessctl lineage`` order (depth-first), with its candidates by state."""

    version: Version
    depth: int
    is_current: bool
    candidates: dict[CandidateState, int] = field(default_factory=dict)


def build_tree(
    versions: list[Version], current_id: int, counts: dict[int, dict[CandidateState, int]]
) -> list[TreeEntry]:
    """Versions depth-first from the roots, children in id order."""
    children: dict[int | None, list[Version]] = {}
    for version in versions:
        children.setdefault(version.parent_id, []).append(version)
    entries: list[TreeEntry] = []
    pending = [(v, 0) for v in reversed(children.get(None, []))]
    while pending:
        version, depth = pending.pop()
        entries.append(
            TreeEntry(version, depth, version.id == current_id, counts.get(version.id, {}))
        )
        pending.extend((c, depth + 1) for c in reversed(children.get(version.id, [])))
    return entries


def promotion_message(
    name: str,
    candidate: Candidate,
    parent_name: str,
    verdict: Verdict,
    approval: Review | None = None,
) -> str:
    lines = [f"{name}: promote candidate {candidate.id} onto {parent_name}", ""]
    rationale = candidate.rationale.strip().splitlines()
    if rationale:
        lines += [f"Rationale: {rationale[0]}", *rationale[1:], ""]
    lines.append("Verdict: accepted")
    lines.extend(verdict.lines())
    if approval is not None:
        reason = f": {approval.reason}" if approval.reason else ""
        lines += ["", f"Approved in review by {approval.reviewer}{reason}"]
    return "\n".join(lines).strip()


def seed_message(name: str, seed_label: str) -> str:
    return f"{name}: seed from {seed_label}"


def commit_message(change: PointerChange, version: Version, previous_name: str | None) -> str:
    """The full git message for a pointer change (version message or rollback, + trailers)."""
    if change.is_rollback:
        reason = change.reason or "no reason given"
        body = f"rollback to {change.version_name} (from {previous_name})\n\nReason: {reason}"
    else:
        body = version.message
    trailers = [f"{POINTER_TRAILER}: {change.id}", f"{VERSION_TRAILER}: {change.version_name}"]
    if change.candidate_id is not None:
        trailers.append(f"Harnessd-Candidate: {change.candidate_id}")
    return body.rstrip() + "\n\n" + "\n".join(trailers) + "\n"
