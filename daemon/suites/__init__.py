"""Task suites: public data and your own files, dev / held-out splits, ground-truth checkers.

``load_suite("bfcl:simple,irrelevance", cache_dir)``, ``load_suite("humaneval", ...)`` or
``load_suite("file:/path/tasks.jsonl", ...)`` (your own tasks: :mod:`daemon.suites.filesuite`),
``load_suite("bfcl:multi_turn_base", ...)`` (multi-turn tool use on simulated APIs, kind
``tool_use``: its categories cannot be mixed with the single-call ones), and
``load_suite("agentdojo:banking", ...)`` / ``"agentdojo:banking:injections"`` (AgentDojo's
workspace, travel, banking or slack user tasks, benign or with injections planted).
Loading reads the pinned wheel (downloading it once with the package client if the cache
lacks it) or the files, so call it from a worker thread in async code. Suites are parsed
once per process and shared; a file suite is read again by :func:`check_suite`, which the
daemon runs at start-up and before applying a policy (or suite file) edit.

A policy names one suite (split into dev and held-out tasks) or two (``[suite]
heldout_suite``: the held-out pool from a suite of its own, :mod:`daemon.suites.mixed`);
:func:`policy_suite` and :func:`policy_splits` are what an evaluation uses. With ``[suite]
counterfactual`` (the default), :func:`evaluation_copies` puts counterfactual copies in the
public tasks' place (:mod:`daemon.suites.rewrite`), in the dev split and the held-out pool
alike, with the same share of generated tasks in each: both come from the same
transformation, so nothing on a task's surface says which split it is in (a harness that
knows the public tasks sees no public task, and cannot treat held-out tasks otherwise than
the dev tasks its proposer learned from). :func:`heldout_evidence` says which it is.

Owns: what every suite offers (``base``), BFCL's single-call suites and checker (``bfcl``,
``bfcl_checker``, ``bfcl_schema``), HumanEval (``humaneval``), the multi-turn tool suites
(``bfcl_multi_turn``, ``agentdojo``) with their episodes in a worker process
(``episode``, ``envworker``; the worker's own code in ``toolenv``), your own task files
(``filesuite``, ``filetasks``, ``filerules``, ``filecalls``, ``filepython``), a held-out pool
from a second suite (``mixed``), counterfactual copies of public tasks (``rewrite``), the
dev / held-out splits (``splits``) and hidden code checks through the sandbox
(``codecheck``).

May import: config (policy, pinned assets, the ``toolenv`` extra), providers.base
(messages), tasks, errors, and ``sandbox`` (the code-check boundary that judges code a
harness wrote).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from daemon.config.policy import Policy, SuitePolicy
from daemon.errors import ConfigError
from daemon.suites.agentdojo import SUITES as AGENTDOJO
from daemon.suites.agentdojo import AgentDojoSuite
from daemon.suites.base import CheckResult, CodeChecker, Suite, UnknownTask
from daemon.suites.bfcl import CATEGORIES, BfclSuite
from daemon.suites.bfcl_multi_turn import CATEGORIES as MULTI_TURN
from daemon.suites.bfcl_multi_turn import BfclMultiTurnSuite
from daemon.suites.filesuite import FileSuite
from daemon.suites.humaneval import HumanEvalSuite
from daemon.suites.mixed import DEV as DEV_PREFIX
from daemon.suites.mixed import HELDOUT as HELDOUT_PREFIX
from daemon.suites.mixed import MixedSuite, check_distinct
from daemon.suites.splits import Splits, split


@dataclass(frozen=True)
class ReplicationDraw:
    """The tasks a replication runs: ``suite`` (the held-out pool remade from another seed
    when ``remade``), ``task_ids`` to run, and which of them the test had used (``reused``:
    only when too few unused ones remained, and only as new copies)."""

    suite: Suite
    task_ids: list[str]
    remade: bool
    reused: list[str]


__all__ = [
    "CheckResult",
    "CodeChecker",
    "ReplicationDraw",
    "Splits",
    "Suite",
    "UnknownTask",
    "check_suite",
    "evaluated_suite",
    "evaluation_copies",
    "generated_ids",
    "heldout_evidence",
    "load_suite",
    "parse_spec",
    "policy_splits",
    "policy_suite",
    "replication_suite",
    "split",
    "watched_paths",
]

_VALID = (
    "'bfcl:<categories>' (comma-separated, from: "
    + ", ".join(CATEGORIES)
    + "; or from: "
    + ", ".join(MULTI_TURN)
    + "), 'humaneval', 'agentdojo:<suite>' or "
    "'agentdojo:<suite>:injections' (suite: " + ", ".join(AGENTDOJO) + "), "
    "or 'file:PATH' (a .jsonl file of your own tasks, or a folder of them)"
)
_loaded: dict[tuple[str, Path], Suite] = {}
_mixes: dict[tuple[str, str], MixedSuite] = {}
_copies: dict[tuple[int, str, int, float], tuple[Suite, Suite]] = {}
_lock = threading.Lock()


def parse_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """``(suite, categories)`` of a suite spec, categories deduplicated in the given order;
    for ``file:PATH``, ``("file", (PATH,))``."""
    name, _, tail = spec.strip().partition(":")
    if name == "humaneval" and not tail:
        return "humaneval", ()
    if name == "file":
        if tail.strip():
            return "file", (tail.strip(),)
        raise ConfigError(f"suite '{spec}': no path after 'file:'; valid suites: {_VALID}")
    if name == "agentdojo":
        parts = tuple(tail.split(":"))
        if parts[0] in AGENTDOJO and parts[1:] in ((), ("injections",)):
            return "agentdojo", parts
        raise ConfigError(f"suite '{spec}': not an AgentDojo suite; valid suites: {_VALID}")
    if name == "bfcl":
        categories = tuple(dict.fromkeys(c.strip() for c in tail.split(",") if c.strip()))
        multi = [c for c in categories if c in MULTI_TURN]
        unknown = [c for c in categories if c not in CATEGORIES and c not in MULTI_TURN]
        if categories and not unknown and len(multi) in (0, len(categories)):
            return "bfcl", categories
        problem = f"unknown BFCL categories {unknown}" if unknown else "no BFCL category given"
        if categories and not unknown:
            problem = "multi-turn categories cannot be mixed with single-call ones"
        raise ConfigError(f"suite '{spec}': {problem}; valid suites: {_VALID}")
    raise ConfigError(f"unknown suite '{spec}'; valid suites: {_VALID}")


def _canonical(spec: str) -> tuple[str, tuple[str, ...]]:
    name, parts = parse_spec(spec)
    if name == "file":
        return f"file:{Path(parts[0]).expanduser().resolve()}", parts
    joiner = ":" if name == "agentdojo" else ","
    return name + (":" + joiner.join(parts) if parts else ""), parts


def _build(spec: str, cache_dir: Path) -> tuple[tuple[str, Path], Suite]:
    canonical, parts = _canonical(spec)
    key = (canonical, cache_dir.resolve())
    if canonical.startswith("file:"):
        return key, FileSuite.load(Path(canonical[len("file:") :]))
    if canonical == "humaneval":
        return key, HumanEvalSuite.load(cache_dir)
    if canonical.startswith("agentdojo:"):
        injections = parts[1:] == ("injections",)
        return key, AgentDojoSuite.load(parts[0], cache_dir, injections=injections)
    if parts[0] in MULTI_TURN:
        return key, BfclMultiTurnSuite.load(parts, cache_dir)
    return key, BfclSuite.load(parts, cache_dir)


def load_suite(spec: str, cache_dir: Path) -> Suite:
    """The suite named by ``spec`` (the policy's ``[suite] name``), loaded once per process
    (a file suite: until :func:`check_suite` reads it again)."""
    canonical, _ = _canonical(spec)
    with _lock:
        suite = _loaded.get((canonical, cache_dir.resolve()))
        if suite is None:
            key, suite = _build(spec, cache_dir)
            _loaded[key] = suite
        return suite


def policy_suite(p: SuitePolicy, cache_dir: Path) -> Suite:
    """The suite an evaluation under this policy uses: ``name``, or ``name`` for dev tasks
    mixed with ``heldout_suite`` for the held-out pool."""
    dev = load_suite(p.name, cache_dir)
    if p.heldout_suite is None:
        return dev
    heldout = load_suite(p.heldout_suite, cache_dir)
    with _lock:
        mix = _mixes.get((dev.name, heldout.name))
        if mix is None or mix.dev is not dev or mix.heldout is not heldout:
            mix = MixedSuite(dev, heldout)
            _mixes[(dev.name, heldout.name)] = mix
        return mix


def policy_splits(p: SuitePolicy, cache_dir: Path, seed: str) -> Splits:
    """The dev split and held-out pool of the policy's suite(s), ordered by ``seed``."""
    return _splits(policy_suite(p, cache_dir), p, seed)


def _splits(suite: Suite, p: SuitePolicy, seed: str) -> Splits:
    if isinstance(suite, MixedSuite):
        return suite.splits(seed=seed, dev_size=p.dev_size, heldout_size=p.heldout_size)
    return split(
        suite.task_ids(),
        seed=seed,
        dev_size=p.dev_size,
        heldout_size=p.heldout_size,
        suite=f"suite '{p.name}'",
    )


def _generated_part(pool: list[str], share: float, seed: str) -> list[str]:
    """Which of ``pool`` get a generated task: ``share`` of them, chosen by ``seed`` (so the
    split between copies and generated tasks is as secret as the tasks)."""
    ranked = sorted(pool, key=lambda t: hashlib.sha256(f"{seed}\0{t}".encode()).digest())
    return ranked[: round(share * len(pool))]


def _with_evidence(
    member: BfclSuite | HumanEvalSuite, pools: list[list[str]], seed: str, share: float
) -> Suite:
    """``member`` with every id of ``pools`` (a split each) a counterfactual copy, and
    ``share`` of each pool's generatable ids a generated task (so each split holds the same
    share: which kind a task is says nothing about its split)."""
    made: BfclSuite | HumanEvalSuite = member.counterfactual([t for p in pools for t in p], seed)
    if share > 0:
        chosen = [
            t
            for pool in pools
            for t in _generated_part(made.generatable(pool), share, f"generated-part\0{seed}")
        ]
        made = made.with_generated(chosen, f"generated\0{seed}")
    return made


def _inner(ids: list[str], prefix: str) -> list[str]:
    return [t[len(prefix) :] for t in ids if t.startswith(prefix)]


def evaluation_copies(
    suite: Suite, splits: Splits, seed: str, generated_share: float = 0.0
) -> Suite:
    """``suite`` with its dev split and held-out pool replaced by counterfactual copies made
    from ``seed`` (the policy's ``split_seed`` or the installation's secret) and, for
    ``generated_share`` of each split's BFCL one-call tasks or HumanEval problems, by tasks
    generated from it (:mod:`daemon.suites.generated`). Both splits come from one
    transformation, so a task's surface does not say which split it is in. A mix rewrites
    each member that is a public suite (its dev member's dev split, its held-out member's
    pool); suites that cannot be rewritten come back as they are (:func:`heldout_evidence`
    says so). Made once per process and seed."""
    key = (id(suite), seed, hash((tuple(splits.dev), tuple(splits.heldout))), generated_share)
    with _lock:
        known = _copies.get(key)
        if known is not None and known[0] is suite:
            return known[1]
    made: Suite = suite
    if isinstance(suite, BfclSuite | HumanEvalSuite):
        made = _with_evidence(suite, [splits.dev, splits.heldout], seed, generated_share)
    elif isinstance(suite, MixedSuite):
        dev, held = suite.dev, suite.heldout
        if isinstance(dev, BfclSuite | HumanEvalSuite):
            # A seed of its own: where the two members share public tasks, a task in both
            # splits must not be the same copy on both sides.
            dev_seed = f"{seed}\0dev-member"
            dev = _with_evidence(dev, [_inner(splits.dev, DEV_PREFIX)], dev_seed, generated_share)
        if isinstance(held, BfclSuite | HumanEvalSuite):
            held = _with_evidence(
                held, [_inner(splits.heldout, HELDOUT_PREFIX)], seed, generated_share
            )
        made = MixedSuite(dev, held)
    with _lock:
        _copies[key] = (suite, made)
    return made


def evaluated_suite(p: SuitePolicy, cache_dir: Path, seed: str) -> Suite:
    """The suite every evaluation under ``p`` runs on: :func:`policy_suite`, with the held-out
    pool's counterfactual copies when ``p.counterfactual`` (``seed``: the policy's
    ``split_seed`` or the installation's secret, the one its splits are ordered by).
    Blocking like :func:`load_suite`."""
    suite = policy_suite(p, cache_dir)
    held = suite.heldout if isinstance(suite, MixedSuite) else suite
    if not p.counterfactual or not isinstance(held, BfclSuite | HumanEvalSuite):
        return suite  # your own tasks, or a suite that cannot be rewritten: as it is
    # Same ids, other tasks: the copies are what every run (the parent's and the
    # candidate's alike, dev and held-out) sees and is judged on.
    pool = policy_splits(p, cache_dir, seed)
    return evaluation_copies(suite, pool, f"counterfactual\0{seed}", p.generated_share)


def replication_suite(
    p: SuitePolicy, cache_dir: Path, seed: str, label: str, used: Collection[str], size: int
) -> ReplicationDraw:
    """A fresh draw of ``size`` held-out tasks for a replication (``label``: which, e.g.
    ``replication:c12``): the held-out pool remade as counterfactual copies (and generated
    tasks, at ``p.generated_share``) from a seed of its own, derived from ``seed`` (the
    policy's ``split_seed`` or the installation's secret) and ``label``, so none is a task the
    held-out test saw. Ids the test ``used`` are left out while enough others remain; if too
    few do, used ids fill the draw, as new copies (``reused`` names them). A suite that
    cannot be remade (your own tasks, the tool suites) gives its unused held-out tasks only.
    Blocking like :func:`load_suite`."""
    suite = policy_suite(p, cache_dir)
    pool = policy_splits(p, cache_dir, seed)
    held = suite.heldout if isinstance(suite, MixedSuite) else suite
    fresh = f"{label}\0{seed}"
    remade = p.counterfactual and isinstance(held, BfclSuite | HumanEvalSuite)
    made = (
        evaluation_copies(suite, pool, f"counterfactual\0{fresh}", p.generated_share)
        if remade
        else evaluated_suite(p, cache_dir, seed)
    )
    # Which ids, in an order as secret as the copies (a hash of the fresh seed), so the draw
    # is no prefix of the pool's own order, which the held-out blocks follow.
    ranked = sorted(pool.heldout, key=lambda t: hashlib.sha256(f"{fresh}\0{t}".encode()).digest())
    seen = set(used)
    chosen = [t for t in ranked if t not in seen][:size]
    reused: list[str] = []
    if remade and len(chosen) < size:
        reused = [t for t in ranked if t in seen][: size - len(chosen)]
    return ReplicationDraw(made, chosen + reused, remade, reused)


def generated_ids(suite: Suite) -> frozenset[str]:
    """The ids of ``suite`` (as an evaluation names them) whose task was generated."""
    if isinstance(suite, BfclSuite | HumanEvalSuite):
        return suite.generated
    if isinstance(suite, MixedSuite):
        return frozenset(
            prefix + t
            for prefix, member in ((DEV_PREFIX, suite.dev), (HELDOUT_PREFIX, suite.heldout))
            if isinstance(member, BfclSuite | HumanEvalSuite)
            for t in member.generated
        )
    return frozenset()


def heldout_evidence(p: SuitePolicy) -> str:
    """One line for ``policy check``: what the held-out tasks are, and what to do where a
    harness could know them in advance."""
    held = p.heldout_suite or p.name
    name, parts = parse_spec(held)
    public = name in ("bfcl", "humaneval", "agentdojo")
    rewritable = name == "humaneval" or (name == "bfcl" and not set(parts) & set(MULTI_TURN))
    if not public:
        return f"held-out tasks: '{held}', your own tasks (a harness cannot know them in advance)"
    if rewritable and p.counterfactual:
        line = (
            f"held-out tasks: counterfactual copies of '{held}' made from this installation's "
            "secret (numbers, exact strings, names and order rewritten)"
        )
        if p.heldout_suite is None:
            line += ", the dev tasks made the same way (a task's surface does not say its split)"
        one_call = name == "humaneval" or bool(set(parts) & {"simple", "multiple"})
        what = "problems" if name == "humaneval" else "one-call tasks"
        if one_call and p.generated_share > 0:
            line += (
                f", {p.generated_share:.0%} of its {what} generated anew from it "
                "(new functions and questions: [gates.generated] wants a gain there too)"
            )
        elif one_call:
            line += (
                "; no generated tasks ([suite] generated_share = 0): a harness that knows what "
                "the public tasks mean can gain on their copies; set generated_share = 0.5"
            )
        else:
            line += (
                "; no generated tasks: only the simple and multiple categories are generated, "
                "so [gates.generated] does not apply and a harness that knows what the public "
                "tasks mean can gain on their copies; add simple or multiple to the suite, or "
                "set [suite] heldout_suite to a private suite of your own tasks"
            )
        return line
    if rewritable:
        return (
            f"held-out tasks: the public tasks of '{held}' ([suite] counterfactual = false): a "
            "harness that knows them can be promoted; set counterfactual = true"
        )
    return (
        f"held-out tasks: the public tasks of '{held}', which cannot be rewritten safely (their "
        "tool environments' state is fixed data): a harness that knows them can be promoted; "
        "set [suite] heldout_suite to a private suite of your own tasks (README 'Your own "
        "tasks', or `harnessctl label` on live requests)"
    )


def check_suite(policy: Policy, cache_dir: Path) -> None:
    """Load the policy's suite(s), file suites afresh, and split them as the policy asks;
    ConfigError otherwise. Only a policy that passes makes its fresh file suites current.

    Blocking (it may read the data wheel or files): call it from a worker thread.
    """
    p = policy.suite
    specs = [p.name] if p.heldout_suite is None else [p.name, p.heldout_suite]
    fresh: dict[tuple[str, Path], Suite] = {}
    members: list[Suite] = []
    for spec in specs:
        if _canonical(spec)[0].startswith("file:"):
            key, suite = _build(spec, cache_dir)
            fresh[key] = suite
        else:
            suite = load_suite(spec, cache_dir)
        members.append(suite)
    suite = members[0] if len(members) == 1 else MixedSuite(members[0], members[1])
    if isinstance(suite, MixedSuite):
        check_distinct(suite.dev, suite.heldout)
    seed = p.split_seed or "only-the-sizes-are-checked-here"
    _splits(suite, p, seed)
    if policy.gates.security.enabled:  # its injection split is split the same way
        spec = policy.gates.security.injection_suite(p.name)
        split(
            load_suite(spec, cache_dir).task_ids(),
            seed=seed,
            dev_size=p.dev_size,
            heldout_size=p.heldout_size,
            suite=f"suite '{spec}'",
        )
    with _lock:
        _loaded.update(fresh)


def watched_paths(p: SuitePolicy, cache_dir: Path) -> list[Path]:
    """The files the policy's file suites were read from (their edits re-check the policy)."""
    paths: list[Path] = []
    for spec in [p.name] if p.heldout_suite is None else [p.name, p.heldout_suite]:
        with _lock:
            suite = _loaded.get((_canonical(spec)[0], cache_dir.resolve()))
        if isinstance(suite, FileSuite):
            paths.extend(suite.sources)
    return paths
