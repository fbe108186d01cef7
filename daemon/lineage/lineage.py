"""The lineage: every candidate with its verdict, and the accepted versions it produced.

State lives in SQLite (tables ``versions``, ``candidates``, ``pointer``) and under ``root``
(the ``harnesses/`` folder): ``versions/vNNNN/`` immutable trees, a git history with one
commit per pointer change, and ``current``, a symlink to the live version.

A promotion or rollback commits in one SQLite transaction; that is its commit point. The
version tree is complete on disk before it (written aside, fsynced, renamed); the git commit
and the ``current`` switch come after and are redone idempotently by :meth:`reconcile`, which
the daemon runs at start-up. So after ``kill -9`` at any moment and a restart, ``current``
names a complete accepted version and git agrees with SQLite.

Methods are synchronous; the daemon calls them in a worker thread. Mutations hold a thread
lock and an ``flock`` on ``root/.lock``, so two processes never interleave them.
"""

from __future__ import annotations

import fcntl
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from daemon.errors import LineageError, NotAwaitingReview, StaleParent, UnknownRef
from daemon.lineage import candidates, versions
from daemon.lineage.candidates import (
    counts_by_parent,
    hold_for_review,
    insert_candidate,
    list_candidates,
    load_candidate,
    reject_reviewed,
    update_candidate,
)
from daemon.lineage.fs import StepHook, remove_tree, write_version_dir
from daemon.lineage.git import VERSION_TRAILER, GitHistory
from daemon.lineage.reconcile import LineagePaths, Reconciler
from daemon.lineage.records import (
    FINAL_STATES,
    Candidate,
    CandidateState,
    NewCandidate,
    PointerChange,
    PointerKind,
    Review,
    TreeEntry,
    Version,
    build_tree,
    promotion_message,
    seed_message,
    version_name,
)
from daemon.patches.model import ParseFailure
from daemon.patches.tree import TreeError, diff_trees
from daemon.store import Store
from daemon.verdict import Stage, Verdict

__all__ = ["Candidate", "Lineage", "PointerChange", "TreeEntry", "Version"]

_NAME_RE = re.compile(r"^v(\d+)$")
_SHA_RE = re.compile(r"^[0-9a-f]{4,40}$")


def _no_fault(step: str) -> None:
    """No fault injection: the default ``fault`` hook."""


class Lineage:
    def __init__(self, store: Store, root: Path, *, fault: StepHook | None = None) -> None:
        self.store = store
        self.root = root
        self.paths = LineagePaths(root)
        self.versions_dir = self.paths.versions_dir
        self.current_link = self.paths.current_link
        self.git = GitHistory(root)
        self._fault: StepHook = fault or _no_fault
        self._lock = threading.RLock()
        self._depth = 0

    def checkpoint(self, step: str) -> None:
        """Mark a step boundary of a mutation; tests inject crashes here through ``fault``."""
        self._fault(step)

    # ---- locking -------------------------------------------------------------------------

    @contextmanager
    def _mutating(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self.versions_dir.mkdir(parents=True, exist_ok=True)
            with (self.root / ".lock").open("a") as lock_file:
                fcntl.flock(lock_file, fcntl.LOCK_EX)
                self._depth = 1
                self.git.lock_fds = (lock_file.fileno(),)
                try:
                    self.git.ensure()
                    yield
                finally:
                    self._depth = 0
                    self.git.lock_fds = ()
                    fcntl.flock(lock_file, fcntl.LOCK_UN)

    # ---- reading -------------------------------------------------------------------------

    def path(self, version: Version) -> Path:
        return self.paths.of(version)

    def _version(self, version_id: int) -> Version | None:
        return versions.get(self.store, version_id)

    def versions(self) -> list[Version]:
        return versions.all_versions(self.store)

    def current(self) -> Version:
        live = versions.current(self.store)
        if live is None:
            raise LineageError(f"the lineage in {self.root} has no version yet (no seed)")
        return live

    def get(self, ref: str | int) -> Version:
        """A version by name (``v0003``), id, ``current``, or git commit prefix (4+ hex)."""
        text = str(ref).strip().lower()
        if text == "current":
            return self.current()
        match = _NAME_RE.match(text)
        if match or text.isdigit():
            found = self._version(int(match[1] if match else text))
            if found is not None:
                return found
        if _SHA_RE.match(text):
            found = self._by_commit(text)
            if found is not None:
                return found
        raise UnknownRef(
            f"no accepted version '{ref}': use a name (v0003), a version id or a git commit "
            "prefix; 'harnessctl lineage' lists them"
        )

    def _by_commit(self, prefix: str) -> Version | None:
        found = versions.by_commit_prefix(self.store, prefix)
        if len(found) > 1:
            raise LineageError(f"git commit prefix '{prefix}' is ambiguous; give more digits")
        if found:
            return found[0]
        # Rollback commits are not versions, but they name the version they restored.
        matches = {
            c.trailers[VERSION_TRAILER]
            for c in self.git.log()
            if c.sha.startswith(prefix) and VERSION_TRAILER in c.trailers
        }
        if len(matches) > 1:
            raise LineageError(f"git commit prefix '{prefix}' is ambiguous; give more digits")
        return self.get(matches.pop()) if matches else None

    def candidate(self, candidate_id: int) -> Candidate:
        return load_candidate(self.store, candidate_id)

    def candidates(
        self,
        *,
        state: CandidateState | None = None,
        parent: Version | int | None = None,
        limit: int | None = None,
    ) -> list[Candidate]:
        """Candidates, newest first, optionally of one state or one parent version."""
        parent_id = parent.id if isinstance(parent, Version) else parent
        return list_candidates(self.store, state, parent_id, limit)

    def candidate_counts(self) -> dict[tuple[str, str], int]:
        """How many candidates are in each (state, stage): the verdicts and where the rest
        are."""
        return candidates.counts_by_state_and_stage(self.store)

    def history(self) -> list[PointerChange]:
        """Every switch of the live version, oldest first (seed, promotions, rollbacks)."""
        return versions.history(self.store)

    def tree(self) -> list[TreeEntry]:
        """All versions depth-first from the seed, children by id (for ``harnessctl lineage``)."""
        versions = self.versions()
        if not versions:
            return []
        return build_tree(versions, self.current().id, counts_by_parent(self.store))

    def diff(self, a: str | int | Version, b: str | int | Version) -> str:
        """The normalised git diff from version ``a`` to version ``b``."""
        old = a if isinstance(a, Version) else self.get(a)
        new = b if isinstance(b, Version) else self.get(b)
        return diff_trees(self.path(old), self.path(new))

    # ---- candidates ----------------------------------------------------------------------

    def add_candidate(
        self,
        new: NewCandidate,
        *,
        state: CandidateState = CandidateState.PROPOSED,
        stage: Stage = Stage.PROPOSED,
        verdict: Verdict | None = None,
    ) -> int:
        """Record a candidate (a rejected one too: ``REJECTED`` with its verdict)."""
        return insert_candidate(self.store, new, state=state, stage=stage, verdict=verdict)

    def add_unparseable(self, new: NewCandidate, failure: ParseFailure) -> int:
        """Record proposer output that held no usable patch: rejected at stage ``parse``,
        with ``new``'s raw text (the failure's) kept and no patch."""
        verdict = Verdict(
            decision="reject", stage=Stage.STATIC, reason=f"unparseable: {failure.reason}"
        )
        return self.add_candidate(
            new, state=CandidateState.REJECTED, stage=Stage.PARSE, verdict=verdict
        )

    def set_candidate(
        self,
        candidate_id: int,
        state: CandidateState,
        stage: Stage,
        verdict: Verdict | None = None,
    ) -> None:
        """Move a candidate along the pipeline; accepted and rejected are final."""
        update_candidate(self.store, candidate_id, state, stage, verdict)

    # ---- review ([gates.review]) -----------------------------------------------------------

    def stale_parent(self, candidate: Candidate) -> StaleParent | None:
        """Why ``candidate`` cannot be promoted onto the live version (its parent is not
        live), or None. The message names both versions and what to do."""
        live = self.current()
        if candidate.parent_version_id == live.id:
            return None
        parent = self.get(candidate.parent_version_id).name
        cid = candidate.id
        if candidate.state == CandidateState.AWAITING_REVIEW:
            message = (
                f"candidate c{cid} was tested against {parent}, but {live.name} is live now: "
                f"its held-out evidence is about {parent}, not {live.name}, so it is not "
                f"promoted onto {live.name}. Reject it ('harnessctl reject c{cid} --reason "
                f"...'), or make {parent} live again ('harnessctl rollback {parent}') and "
                "approve it then"
            )
        else:
            message = (
                f"candidate {cid} was made from version {candidate.parent_version_id} but "
                f"{live.name} is live now; evaluate it again against {live.name}"
            )
        return StaleParent(message, candidate_id=cid, parent=parent, live=live.name)

    def hold_for_review(self, candidate_id: int, verdict: Verdict) -> None:
        """A candidate that passed every gate waits for a person (``awaiting_review``).
        Refused (:class:`StaleParent`) if its parent is no longer live, as a promotion is."""
        with self._mutating():
            stale = self.stale_parent(self.candidate(candidate_id))
            if stale is not None:
                raise stale
            hold_for_review(self.store, candidate_id, verdict)

    def reject_reviewed(self, candidate_id: int, reviewer: str, reason: str) -> Candidate:
        """A person rejects a candidate awaiting review (its gates' verdict is kept)."""
        with self._mutating():
            held = self.candidate(candidate_id).review
            review = Review(
                held=held.held if held else time.time(),
                decided=time.time(),
                reviewer=reviewer.strip(),
                reason=reason.strip(),
            )
            reject_reviewed(self.store, candidate_id, review)
            return self.candidate(candidate_id)

    # ---- pointer changes -----------------------------------------------------------------

    def _materialise(self, source: Path, name: str) -> str:
        final = self.versions_dir / name
        # No row names this directory (ids only grow), so it is a crashed attempt's leftover.
        remove_tree(final)
        try:
            return write_version_dir(source, final, self.checkpoint)
        except TreeError as exc:
            raise LineageError(str(exc)) from None

    @contextmanager
    def _unrecorded_on_failure(self, name: str) -> Iterator[None]:
        """Remove a new version directory again if its transaction does not commit."""
        try:
            self.checkpoint("db:before_commit")
            yield
        except BaseException:
            remove_tree(self.versions_dir / name)
            raise

    def _finish(self) -> None:
        """Everything after the commit point; idempotent, also run by reconcile."""
        repair = self._reconciler()
        repair.sync_git()
        repair.fix_current()

    def init_seed(self, seed_dir: Path) -> Version:
        """The first version, copied from ``seed_dir``; later calls return it unchanged."""
        with self._mutating():
            first = self._version(1)
            if first is not None:
                return first
            name = version_name(1)
            digest = self._materialise(seed_dir, name)
            now = time.time()
            with self._unrecorded_on_failure(name), self.store.tx() as conn:
                versions.insert_version(
                    conn,
                    version_id=1,
                    name=name,
                    parent_id=None,
                    candidate_id=None,
                    created=now,
                    tree_hash=digest,
                    message=seed_message(name, seed_dir.name),
                )
                versions.insert_pointer(
                    conn,
                    ts=now,
                    version_id=1,
                    kind=PointerKind.SEED,
                    reason=seed_dir.name,
                    candidate_id=None,
                )
            self.checkpoint("db:committed")
            self._finish()
            return self.current()

    def promote(
        self, candidate_id: int, tree: Path, verdict: Verdict, approval: Review | None = None
    ) -> Version:
        """Make the candidate's tree the next version and the live one.

        The candidate's parent must still be current (else the verdict compared against a
        version that is no longer live: :class:`StaleParent`), and ``tree`` must be that
        parent plus the recorded patch, so the lineage's patches always explain its
        versions. A candidate awaiting review needs a person's ``approval`` (recorded in the
        same transaction). If this raises after the SQLite commit, the promotion stands and
        :meth:`reconcile` finishes it.
        """
        with self._mutating():
            candidate = self.candidate(candidate_id)
            if candidate.state in FINAL_STATES:
                raise LineageError(f"candidate {candidate_id} is already {candidate.state}")
            awaiting = candidate.state == CandidateState.AWAITING_REVIEW
            if awaiting != (approval is not None):
                raise NotAwaitingReview(
                    f"candidate c{candidate_id} awaits review: only 'harnessctl approve "
                    f"c{candidate_id}' promotes it"
                    if approval is None
                    else f"candidate c{candidate_id} does not await review "
                    f"(it is {candidate.state})"
                )
            stale = self.stale_parent(candidate)
            if stale is not None:
                raise stale
            parent = self.current()
            self._check_tree(candidate, parent, tree)
            new_id = versions.next_id(self.store)
            name = version_name(new_id)
            self.checkpoint("promote:start")
            digest = self._materialise(tree, name)
            message = promotion_message(name, candidate, parent.name, verdict, approval)
            now = time.time()
            with self._unrecorded_on_failure(name), self.store.tx() as conn:
                versions.insert_version(
                    conn,
                    version_id=new_id,
                    name=name,
                    parent_id=parent.id,
                    candidate_id=candidate_id,
                    created=now,
                    tree_hash=digest,
                    message=message,
                )
                versions.insert_pointer(
                    conn,
                    ts=now,
                    version_id=new_id,
                    kind=PointerKind.PROMOTE,
                    reason=f"candidate {candidate_id}",
                    candidate_id=candidate_id,
                )
                candidates.mark_accepted(conn, candidate_id, verdict, now, approval)
            self.checkpoint("db:committed")
            self._finish()
            version = self._version(new_id)
            assert version is not None
            return version

    def _check_tree(self, candidate: Candidate, parent: Version, tree: Path) -> None:
        """The tree must be exactly the parent plus the candidate's recorded patch."""
        try:
            actual = diff_trees(self.path(parent), tree)
        except TreeError as exc:
            raise LineageError(str(exc)) from None
        if actual != candidate.patch:
            raise LineageError(
                f"the tree given for candidate {candidate.id} ({tree}) is not {parent.name} plus "
                "the candidate's recorded patch; it changed since it was evaluated"
            )

    def rollback(self, ref: str | int, reason: str) -> Version:
        """Make an earlier accepted version live again; recorded like a promotion."""
        if not reason.strip():
            raise LineageError("a rollback needs a reason (it goes into the lineage)")
        with self._mutating():
            target = self.get(ref)
            live = self.current()
            if target.id == live.id:
                raise LineageError(f"{target.name} is already the live version")
            self.checkpoint("rollback:start")
            now = time.time()
            with self.store.tx() as conn:
                versions.insert_pointer(
                    conn,
                    ts=now,
                    version_id=target.id,
                    kind=PointerKind.ROLLBACK,
                    reason=reason.strip(),
                    candidate_id=None,
                )
            self.checkpoint("db:committed")
            self._finish()
            return target

    def _reconciler(self) -> Reconciler:
        return Reconciler(self.store, self.paths, self.git, self.checkpoint)

    def reconcile(self) -> list[str]:
        """Start-up repair after a crash; returns one sentence per fix for the event log."""
        with self._mutating():
            return self._reconciler().run()
