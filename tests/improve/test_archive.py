"""The proposer's archive: what it shows of earlier candidates, and what it never shows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.config.policy import PatchPolicy
from daemon.evaluation import results
from daemon.evaluation.report import CoverageReport, TaskResult, build_report
from daemon.improve import briefing, intake
from daemon.improve.proposer import archive, edit_protocol
from daemon.improve.tried import TriedPrograms
from daemon.lineage import CandidateSource, Lineage, NewCandidate, Version
from daemon.patches.targets import find_targets
from daemon.store import Store
from daemon.verdict import GateResult, Verdict

pytestmark = pytest.mark.unit

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
SUITE, MODEL = "bfcl", "local:x"
DEV_IDS = [f"simple_python_{i}" for i in range(4)]
# Held-out figures that must never reach the proposer, whatever the candidate.
SECRET_TASK = "simple_python_399"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Store, Lineage, Version]]:
    store = Store(tmp_path / "state" / "harnessd.db")
    lineage = Lineage(store, tmp_path / "harnesses")
    seed = lineage.init_seed(SEED)
    yield store, lineage, seed
    store.close()


def _propose(lineage: Lineage, parent: Version, work: Path, name: str, value: object) -> int:
    sources = {"harness.py": (lineage.path(parent) / "harness.py").read_text()}
    reply = json.dumps({"edit": {"op": "set", "name": name, "value": value}, "rationale": "try"})
    parsed = edit_protocol.to_proposal(reply, sources, find_targets(sources))
    tried = TriedPrograms(lineage)
    tried.refresh()
    sub = intake.record_parsed(
        lineage,
        parent,
        parsed,
        reply,
        source=CandidateSource.PROPOSER,
        proposer_model=MODEL,
        policy=PatchPolicy(),
        work_dir=work,
        screen=lambda tree: tried.screen(parent, tree),
    )
    return sub.candidate_id


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
            transcript=[{"reply": f"called f for {i}"}],
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


def _heldout_verdict() -> Verdict:
    gates = [
        GateResult(gate="dev_screen", passed=True, measured=0.0, threshold=-0.1, note="dev ok"),
        GateResult(
            gate="accuracy",
            passed=False,
            measured=0.0123,
            threshold=0.05,
            note=f"e-value 0.37 after 17 tasks; {SECRET_TASK} lost",
        ),
    ]
    return Verdict(decision="reject", stage="heldout", reason="accuracy: e-value 0.37", gates=gates)


def _build(store: Store, lineage: Lineage, **kw: int) -> str:
    entries = briefing.archive_entries(
        lineage,
        store,
        lineage.current(),
        heldout_ids=results.candidates_run_on(store, "heldout"),
        model=MODEL,
    )
    return archive.section(
        entries, max_entries=kw.get("max_entries", 20), budget_tokens=kw.get("budget", 5000)
    )


def test_heldout_outcomes_reach_the_proposer_as_one_bit(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    store, lineage, seed = world
    cid = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 8)
    _report(store, "dev", [True, False, False, True], cid=cid, vid=None)
    _report(store, "heldout", [False], cid=cid, vid=None, ids=[SECRET_TASK])
    lineage.set_candidate(cid, "rejected", "heldout", _heldout_verdict())
    text = _build(store, lineage)
    assert f"c{cid} on v0001 (proposer): not promoted" in text
    for secret in (SECRET_TASK, "e-value", "0.0123", "17 tasks", "accuracy", "heldout"):
        assert secret not in text
    assert "dev: 2/4 solved" in text  # its dev results are dev data


def test_one_bit_even_while_interrupted_at_heldout(world: tuple[Store, Lineage, Version]) -> None:
    _, lineage, seed = world
    cid = lineage.add_candidate(
        NewCandidate(
            parent_id=seed.id,
            source=CandidateSource.PROPOSER,
            proposer_model=MODEL,
            rationale="r",
            patch="",
            raw="raw",
        )
    )
    lineage.set_candidate(cid, "interrupted", "heldout")
    cand = lineage.candidate(cid)
    assert briefing.reached_heldout(cand, set())
    assert briefing.outcome(cand, True) == "not promoted"


def test_earlier_stages_say_why_with_their_dev_figures(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    store, lineage, seed = world
    _report(store, "dev", [True, True, False, False], cid=None, vid=seed.id)
    cid = _propose(lineage, seed, tmp_path / "work", "MAX_TOKENS", 128)
    _report(store, "smoke", [True], cid=cid, vid=None, ids=DEV_IDS[:1])
    _report(store, "dev", [False, True, False, True], cid=cid, vid=None)
    screen = GateResult(
        gate="dev_screen",
        passed=False,
        measured=-0.25,
        threshold=-0.1,
        note="dev accuracy 25.0% vs parent 50.0%",
    )
    lineage.set_candidate(
        cid,
        "rejected",
        "dev",
        Verdict(
            decision="reject",
            stage="dev",
            reason="dev_screen: measured -0.25 vs threshold -0.1",
            gates=[screen],
        ),
    )
    broken = _propose(lineage, seed, tmp_path / "work", "CODE_BLOCK", "(unclosed")
    text = _build(store, lineage)
    assert "rejected at dev: dev_screen: measured -0.25" in text
    assert "(dev accuracy 25.0% vs parent 50.0%)" in text
    assert "dev: 2/4 solved, 100 tokens/task (parent 2/4" in text
    assert "newly failed: simple_python_0" in text and "newly solved: simple_python_3" in text
    assert "-MAX_TOKENS = 512" in text and "+MAX_TOKENS = 128" in text
    assert f"c{broken} on v0001 (proposer): rejected at static: CODE_BLOCK" in text
    assert "not a regular expression" in text


def test_a_repeated_patch_is_refused_and_shown_once_with_a_count(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    store, lineage, seed = world
    first = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 2)
    lineage.set_candidate(
        first,
        "rejected",
        "smoke",
        Verdict(decision="reject", stage="smoke", reason="smoke task simple_python_0: crash"),
    )
    again = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 2)
    cand = lineage.candidate(again)
    assert cand.state == "rejected" and cand.verdict is not None
    assert cand.verdict.reason == f"duplicate of c{first}; not evaluated again"
    assert cand.duplicate_of == first
    text = _build(store, lineage)
    assert f"c{first} on v0001 (proposer, proposed 2 times): rejected at smoke" in text
    assert f"c{again} " not in text


def test_the_budget_keeps_the_most_relevant_entries(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    store, lineage, seed = world
    ids = [_propose(lineage, seed, tmp_path / "work", "MAX_TOKENS", v) for v in (128, 256, 384)]
    _report(store, "dev", [True] * 4, cid=ids[0], vid=None)  # got further: more relevant
    for cid in ids:
        lineage.set_candidate(
            cid, "rejected", "dev", Verdict(decision="reject", stage="dev", reason="dev_screen")
        )
    full = _build(store, lineage)
    assert all(f"c{cid} " in full for cid in ids)
    first = lineage.candidate(ids[0])
    entry = archive.ArchiveEntry(
        first.id, first.source, first.rationale, first.patch, first.raw, "x", "v0001"
    )
    one = len(archive.render_entry(entry)) // 3
    small = _build(store, lineage, budget=one + 60)
    assert f"c{ids[0]} " in small and f"c{ids[1]} " not in small
    assert len(small) <= (one + 60) * archive.CHARS_PER_TOKEN
    assert "not shown" in _build(store, lineage, budget=0)
    assert _build(store, lineage, max_entries=1).count(" on v0001 ") == 1


def test_no_change_to_the_program_is_refused(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    _, lineage, seed = world
    text = "Rationale: tidy.\n\nharness.py\n<<<<<<< SEARCH\nimport json\n=======\nimport json  # x\n>>>>>>> REPLACE\n"  # noqa: E501
    tried = TriedPrograms(lineage)
    tried.refresh()
    sub = intake.record(
        lineage,
        seed,
        text,
        source=CandidateSource.EXTERNAL,
        proposer_model=None,
        policy=PatchPolicy(),
        work_dir=tmp_path / "work",
        screen=lambda tree: tried.screen(seed, tree),
    )
    assert not sub.accepted_for_evaluation
    assert sub.reason == "changes only comments or layout: the program is its parent's"


@pytest.mark.parametrize(
    ("state", "refused"),
    [("rejected", True), ("evaluating", True), ("proposed", True), ("interrupted", False)],
)
def test_a_repeat_is_refused_unless_the_first_was_cut_short(
    world: tuple[Store, Lineage, Version], tmp_path: Path, state: str, refused: bool
) -> None:
    """A program with a verdict, or on its way to one, is not evaluated again; one a stop
    interrupted has no verdict, so it may come again."""
    _, lineage, seed = world
    first = _propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 3)
    if state != "proposed":
        lineage.set_candidate(first, state, "smoke")  # type: ignore[arg-type]
    again = lineage.candidate(_propose(lineage, seed, tmp_path / "work", "MAX_STEPS", 3))
    assert (again.state == "rejected") is refused, again.verdict
    if refused:
        assert again.verdict is not None
        assert again.verdict.reason == f"duplicate of c{first}; not evaluated again"


def test_a_constant_that_left_dev_unchanged_is_not_offered_again(
    world: tuple[Store, Lineage, Version], tmp_path: Path
) -> None:
    """After MAX_STEPS 4 -> 5 changed nothing on dev (BFCL simple takes one step), no other
    value of MAX_STEPS is offered on that tree; a constant whose change failed elsewhere
    (the dev screen), and one on another base, still is."""
    _, lineage, seed = world
    no_change = GateResult(gate="dev_change", passed=False, measured=0.0, threshold=1.0)
    worse = GateResult(gate="dev_screen", passed=False, measured=-0.3, threshold=-0.1)
    for name, value, gate in (("MAX_STEPS", 5, no_change), ("MAX_TOKENS", 256, worse)):
        cid = _propose(lineage, seed, tmp_path / name, name, value)
        verdict = Verdict.of("dev", [gate], reason="stopped")
        lineage.set_candidate(cid, "rejected", "dev", verdict)
    assert briefing.inert_constants(lineage, seed, None) == {"MAX_STEPS"}
    assert briefing.inert_constants(lineage, seed, base=1) == set()
