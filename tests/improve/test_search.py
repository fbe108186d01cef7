"""Search beyond the live version: the base a proposal builds on, chosen from dev evidence
only; the candidate records that tree parent apart from the version its test compares with."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.config.policy import PatchPolicy
from daemon.errors import LineageError
from daemon.evaluation import results
from daemon.evaluation.report import CoverageReport, TaskResult, build_report
from daemon.improve import briefing, intake
from daemon.improve.proposer import archive, edit_protocol
from daemon.improve.proposer.search import Node, choose_base
from daemon.improve.tried import TriedPrograms
from daemon.lineage import CandidateSource, Lineage, NewCandidate, Version
from daemon.patches import parse_proposal
from daemon.patches.merge import MergeConflict
from daemon.patches.targets import find_targets
from daemon.patches.tree import diff_trees
from daemon.report import page
from daemon.report.data import gather
from daemon.store import Store
from daemon.verdict import GateResult, Verdict

pytestmark = pytest.mark.unit

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
SUITE, MODEL = "bfcl", "local:x"
DEV_IDS = [f"simple_python_{i}" for i in range(4)]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Store, Lineage, Version]]:
    store = Store(tmp_path / "state" / "harnessd.db")
    lineage = Lineage(store, tmp_path / "harnesses")
    seed = lineage.init_seed(SEED)
    yield store, lineage, seed
    store.close()


def _propose(
    lineage: Lineage,
    parent: Version,
    work: Path,
    name: str,
    value: object,
    base: intake.Base | None = None,
) -> intake.Submitted:
    tree = lineage.path(parent) if base is None else base.tree
    sources = {"harness.py": (tree / "harness.py").read_text()}
    reply = json.dumps({"edit": {"op": "set", "name": name, "value": value}, "rationale": "try"})
    parsed = edit_protocol.to_proposal(reply, sources, find_targets(sources))
    tried = TriedPrograms(lineage)
    tried.refresh()
    return intake.record_parsed(
        lineage,
        parent,
        parsed,
        reply,
        source=CandidateSource.PROPOSER,
        proposer_model=MODEL,
        policy=PatchPolicy(),
        work_dir=work,
        screen=lambda t: tried.screen(parent, t),
        base=base,
    )


def _report(
    store: Store,
    split: str,
    passed: list[bool],
    *,
    cid: int | None,
    vid: int | None,
    ids: list[str] | None = None,
) -> None:
    ids = ids or DEV_IDS
    tasks = [
        TaskResult(
            id=i,
            passed=p,
            claimed_success=True,
            tokens=100,
            detail="wrong count",
            transcript=[{"reply": f"called f for {i}"}, {"tool": "f", "result": f"out {i}"}],
        )
        for i, p in zip(ids, passed, strict=True)
    ]
    run = f"{split}-{cid}-{vid}"
    results.record_start(
        store, run, version_id=vid, candidate_id=cid, suite=SUITE, split=split, model=MODEL
    )
    report = build_report(
        run_id=run, suite=SUITE, split=split, model=MODEL, tasks=tasks, coverage=CoverageReport()
    )
    results.record_end(store, run, "done", report)


def test_thompson_builds_on_the_candidate_that_did_better_on_dev() -> None:
    rng = random.Random(7)
    live, good, poor = Node(None, 3, 8), Node(3, 6, 8), Node(4, 0, 8)
    picks = [choose_base([live, good, poor], "thompson", rng).candidate_id for _ in range(400)]
    assert picks.count(3) > 250  # the near-miss that solved more is usually built on
    assert picks.count(None) > 10  # the live version stays in the running
    assert picks.count(4) == 0  # worse on dev than the live version: no stepping stone
    many = [live, *(Node(10 + i, 2, 8) for i in range(6)), *(Node(20 + i, 3, 8) for i in range(6))]
    assert {choose_base(many, "thompson", rng).candidate_id for _ in range(200)} == {None}
    assert {choose_base([live, good], "live", rng).candidate_id for _ in range(50)} == {None}
    with pytest.raises(ValueError, match="live version"):
        choose_base([good], "thompson", rng)


def test_a_proposal_on_a_base_records_its_tree_parent_and_its_whole_change(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    """The tree parent is a candidate, the parent the live version; the recorded patch is
    the whole change from the live version, so the promotion check holds for it."""
    _, lineage, seed = world
    first = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8)
    assert first.accepted_for_evaluation
    lineage.set_candidate(first.candidate_id, "rejected", "heldout")
    tree = intake.materialise_base(lineage, first.candidate_id, tmp_path / "scratch")
    base = intake.Base(first.candidate_id, tree)
    second = _propose(lineage, seed, tmp_path / "work", "MAX_TOKENS", 128, base)
    assert second.accepted_for_evaluation, second.reason
    cand = lineage.candidate(second.candidate_id)
    assert cand.base_candidate_id == first.candidate_id
    assert cand.parent_version_id == seed.id
    assert "+MAX_STEPS = 8" in cand.patch and "+MAX_TOKENS = 128" in cand.patch
    assert second.tree is not None
    assert diff_trees(lineage.path(seed), second.tree) == cand.patch
    verdict = Verdict(decision="accept", stage="done", reason="test")
    promoted = lineage.promote(second.candidate_id, second.tree, verdict)
    assert promoted.candidate_id == second.candidate_id
    # Shown as a tree: the report nests it under its base, the archive names the base.
    html = page.tree(gather(lineage.store))
    assert html.index(f'data-candidate="c{first.candidate_id}"') < html.index(
        f"c{second.candidate_id}</a> built on c{first.candidate_id}"
    )


def test_undoing_the_base_is_no_candidate(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    _, lineage, seed = world
    first = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8)
    tree = intake.materialise_base(lineage, first.candidate_id, tmp_path / "scratch")
    back = _propose(
        lineage, seed, tmp_path / "work", "MAX_STEPS", 4, intake.Base(first.candidate_id, tree)
    )
    assert not back.accepted_for_evaluation
    assert "no change to v0001" in back.reason


def test_a_base_must_be_a_candidate_of_the_same_version(
    world: tuple[Store, Lineage, Version],
) -> None:
    _, lineage, seed = world
    new = NewCandidate(
        parent_id=seed.id,
        source=CandidateSource.PROPOSER,
        proposer_model=MODEL,
        rationale="r",
        patch="",
        raw="raw",
        base_id=99,
    )
    with pytest.raises(LineageError, match="c99 is not a candidate of version 1"):
        lineage.add_candidate(new)


def test_the_base_is_chosen_from_dev_evidence_only(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    """A held-out run and verdict change nothing in the search nodes: dev data only."""
    store, lineage, seed = world
    _report(store, "dev", [True, False, False, False], cid=None, vid=seed.id)
    live_dev = briefing._latest_dev(store, seed.id, MODEL)
    assert live_dev is not None
    a = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8).candidate_id
    b = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 2).candidate_id
    c = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 3).candidate_id  # no dev run
    _report(store, "dev", [True, True, True, False], cid=a, vid=None)
    _report(store, "dev", [False, False, False, False], cid=b, vid=None)
    _report(store, "dev", [True, True], cid=c, vid=None, ids=DEV_IDS[:2])  # other tasks
    before = briefing.search_nodes(lineage, store, seed, live_dev)
    assert before[0] == [Node(None, 1, 4), Node(a, 3, 4), Node(b, 0, 4)]
    _report(store, "heldout", [False, False], cid=a, vid=None, ids=["simple_python_399", "x"])
    lost = GateResult(gate="accuracy", passed=False, measured=0.01, threshold=0.05, note="lost")
    verdict = Verdict(decision="reject", stage="heldout", reason="accuracy", gates=[lost])
    lineage.set_candidate(a, "rejected", "heldout", verdict)
    assert briefing.search_nodes(lineage, store, seed, live_dev) == before


def test_the_archive_names_the_base_and_a_capable_proposer_sees_whole_diffs(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    store, lineage, seed = world
    _report(store, "dev", [True, False, False, False], cid=None, vid=seed.id)
    first = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8)
    tree = intake.materialise_base(lineage, first.candidate_id, tmp_path / "scratch")
    second = _propose(
        lineage, seed, tmp_path / "work", "MAX_TOKENS", 128, intake.Base(first.candidate_id, tree)
    )
    _report(store, "dev", [True, True, False, False], cid=second.candidate_id, vid=None)
    entries = briefing.archive_entries(lineage, store, seed, heldout_ids=set(), model=MODEL)
    compact = archive.section(entries, max_entries=10, budget_tokens=5000)
    whole = archive.section(entries, max_entries=10, budget_tokens=5000, full=True)
    head = f"c{second.candidate_id} on v0001 via c{first.candidate_id} (proposer)"
    assert head in compact and head in whole
    patch = lineage.candidate(second.candidate_id).patch
    assert all(f"    {line}" in whole for line in patch.splitlines())
    assert "@@" not in compact and "@@" in whole
    assert "still failed: simple_python_2, simple_python_3" in whole


def _merge(
    lineage: Lineage, seed: Version, pair: briefing.MergePair, work: Path, policy: PatchPolicy
) -> intake.Submitted:
    """What the loop's merge records: both changes merged, built on the first's tree."""
    built = intake.merge_candidates(lineage, seed, pair.first, pair.second, work / "scratch")
    assert not isinstance(built, MergeConflict), built
    first, diff = built
    return intake.record_parsed(
        lineage,
        seed,
        parse_proposal(diff),
        json.dumps({briefing.MERGE_KEY: [pair.first, pair.second]}),
        source=CandidateSource.PROPOSER,
        proposer_model=None,
        policy=policy,
        work_dir=work / "work",
        base=intake.Base(pair.first, first),
    )


def test_merge_pairs_candidates_whose_dev_wins_complement_each_other_once(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    store, lineage, seed = world
    _report(store, "dev", [False, False, False, False], cid=None, vid=seed.id)
    live_dev = briefing._latest_dev(store, seed.id, MODEL)
    assert live_dev is not None
    a = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8).candidate_id
    b = _propose(lineage, seed, tmp_path / "work", "MAX_TOKENS", 128).candidate_id
    c = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 3).candidate_id
    _report(store, "dev", [True, True, False, False], cid=a, vid=None)
    _report(store, "dev", [False, False, True, False], cid=b, vid=None)
    _report(store, "dev", [False, False, False, False], cid=c, vid=None)  # wins nothing
    # The one with more wins is the tree, the other's change goes on top.
    pairs = briefing.merge_pairs(lineage, store, seed, live_dev)
    assert pairs == [briefing.MergePair(a, b, frozenset(DEV_IDS[:3]))]
    pair = pairs[0]
    merged = _merge(lineage, seed, pair, tmp_path / "m1", PatchPolicy())
    assert merged.accepted_for_evaluation, merged.reason
    cand = lineage.candidate(merged.candidate_id)
    assert cand.base_candidate_id == a and cand.proposer_model is None
    assert "+MAX_STEPS = 8" in cand.patch and "+MAX_TOKENS = 128" in cand.patch
    assert briefing.merged_pair(cand.raw) == (a, b)
    # Each pair is merged once, whatever the merge's own fate.
    assert briefing.merge_pairs(lineage, store, seed, live_dev) == []


def test_a_subset_of_wins_is_no_merge(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    store, lineage, seed = world
    _report(store, "dev", [True, False, False, False], cid=None, vid=seed.id)
    live_dev = briefing._latest_dev(store, seed.id, MODEL)
    assert live_dev is not None
    a = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8).candidate_id
    b = _propose(lineage, seed, tmp_path / "work", "MAX_TOKENS", 128).candidate_id
    _report(store, "dev", [True, True, True, False], cid=a, vid=None)
    # b's only win beyond the live version (task 1) is one of a's; task 0 the live solves.
    _report(store, "dev", [True, True, False, False], cid=b, vid=None)
    assert briefing.merge_pairs(lineage, store, seed, live_dev) == []
    assert briefing.merged_pair("not json") is None
    assert briefing.merged_pair(json.dumps({"merge": [1, "2"]})) is None


def test_a_merge_is_held_to_the_patch_limits_as_a_whole(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    """Each change alone fits the limit; on top of each other they do not, and what would be
    promoted is the whole change."""
    _, lineage, seed = world
    small = PatchPolicy(max_changed_lines=3)
    a = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8).candidate_id
    b = _propose(lineage, seed, tmp_path / "work", "MAX_TOKENS", 128).candidate_id
    pair = briefing.MergePair(a, b, frozenset({"t"}))
    refused = _merge(lineage, seed, pair, tmp_path / "m", small)
    assert not refused.accepted_for_evaluation
    assert refused.reason.startswith("as a whole change from v0001:"), refused.reason
    assert _merge(lineage, seed, pair, tmp_path / "m2", PatchPolicy()).accepted_for_evaluation


def test_two_changes_to_one_line_are_no_merge(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    _, lineage, seed = world
    a = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8).candidate_id
    b = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 2).candidate_id
    clash = intake.merge_candidates(lineage, seed, a, b, tmp_path / "scratch")
    assert clash == MergeConflict("harness.py", "both sides changed the same lines")
