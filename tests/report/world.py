"""A small recorded lineage for the report tests, written through the tables' real owners.

Three versions (the seed and two promotions, the second a child of the first), a rejected
candidate on each, held-out and dev reports on two models, a paired held-out run for each
candidate with its test in the alpha ledger, and token ledger rows over an hour. Every text
a proposer or harness controls carries :data:`HOSTILE`: markup that would run if the page
failed to escape it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from daemon.acceptance.spending import NextTest
from daemon.evaluation import results
from daemon.evaluation.report import CoverageReport, TaskResult, build_report
from daemon.gateway import ledger
from daemon.improve import alpha_ledger
from daemon.lineage import CandidateSource, Lineage, NewCandidate, Version
from daemon.patches import apply_proposal, parse_proposal
from daemon.patches.model import Proposal
from daemon.providers.base import Usage
from daemon.store import Store
from daemon.verdict import GateResult, Verdict

HOSTILE = (
    "</pre></code></td></svg></details><script>alert('x')</script>"
    '<img src=x onerror="alert(1)"><svg onload=alert(2)><a href="javascript:alert(3)">'
    "<style>@import url(http://example.invalid/x.css)</style>--><!-- ]]> &amp; \"'"
)
MODELS = ("local:smollm2-135m", "scripted:panel.toml")
TASKS = [f"bfcl:simple:simple_python_{i}" for i in range(12)]


def _report(run: str, model: str, split: str, solved: set[int], **subject: object) -> object:
    tasks = [
        TaskResult(
            id=t,
            passed=i in solved,
            claimed_success=True,
            output=HOSTILE if i % 3 == 0 else {"call": HOSTILE},
            tokens=300 + 10 * i,
            detail=HOSTILE,
        )
        for i, t in enumerate(TASKS)
    ]
    return build_report(
        run_id=run,
        suite="bfcl:simple",
        split=split,
        model=model,
        tasks=tasks,
        coverage=CoverageReport(executed_fraction=0.8),
        **subject,  # type: ignore[arg-type]
    )


def _record(
    store: Store, run: str, report: object, version_id: int | None, cid: int | None
) -> None:
    from daemon.evaluation.report import EvalReport

    assert isinstance(report, EvalReport)
    results.record_start(
        store,
        run,
        version_id=version_id,
        candidate_id=cid,
        suite=report.suite,
        split=report.split,
        model=report.model,
    )
    results.record_end(store, run, "done", report)


def _verdict(accept: bool) -> Verdict:
    gates = [
        GateResult(gate="accuracy", passed=accept, measured=0.01, threshold=0.05, note=HOSTILE),
        GateResult(gate="tokens", passed=True, measured=0.9, threshold=1.2, note=HOSTILE),
    ]
    if not accept:
        gates.append(GateResult(gate="honesty", passed=False, measured=0.4, threshold=0.1))
    return Verdict(
        decision="accept" if accept else "reject",
        stage="heldout",
        reason=HOSTILE,
        gates=gates,
    )


def _seed(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "harness.py").write_text("MARK = 0\n\n\ndef solve(task, ctx):\n    return MARK\n")
    return root


def _patch(lineage: Lineage, parent: Version, step: int, tmp: Path) -> tuple[str, Path]:
    """A real patch of the parent (its diff carries HOSTILE in a comment) and its tree."""
    text = (
        f"harness.py\n<<<<<<< SEARCH\nMARK = {step - 1}\n=======\n"
        f"MARK = {step}\n# {HOSTILE}\n>>>>>>> REPLACE\n"
    )
    proposal = parse_proposal(text)
    assert isinstance(proposal, Proposal)
    tree = tmp / f"tree{step}"
    return apply_proposal(lineage.path(parent), proposal, tree).git_diff, tree


# Each candidate's share of the lineage's alpha in the alpha ledger, by id: larger than a
# real schedule's (a 12-task block decides nothing at those), and unlike any gate threshold.
ALPHAS = {1: 0.04, 2: 0.02, 3: 0.03, 4: 0.015}


def _heldout_test(store: Store, cid: int, promoted: bool, epoch: int) -> None:
    """The candidate's held-out test in the alpha ledger, settled."""
    position = 1 + sum(t.epoch == epoch for t in alpha_ledger.tests(store))
    slot = NextTest(epoch, position, ALPHAS[cid], epoch - 1, True, False, position == 1)
    alpha_ledger.start(store, cid, slot, "block")
    alpha_ledger.finish(store, cid, "promoted" if promoted else "not_promoted", None)


def build_world(tmp: Path) -> Store:
    """The recorded lineage; returns its open store (the caller closes it)."""
    store = Store(tmp / "state" / "state.db")
    lineage = Lineage(store, tmp / "harnesses")
    seed = lineage.init_seed(_seed(tmp / "seed"))
    solved = {0: {0, 2, 4}, 1: {0, 2, 4, 6, 8, 9}, 2: {0, 1, 2, 4, 6, 8, 9, 10}}
    parent = seed
    for step in (1, 2):
        for model in MODELS:
            for split in ("heldout", "dev"):
                run = f"{parent.name}-{model}-{split}"
                report = _report(run, model, split, solved[step - 1], version=parent.name)
                _record(store, run, report, parent.id, None)
        diff, tree = _patch(lineage, parent, step, tmp)
        hostile = NewCandidate(
            parent_id=parent.id,
            source=CandidateSource.PROPOSER,
            proposer_model="scripted:proposer",
            rationale=HOSTILE,
            patch=diff,
            raw=HOSTILE,
        )
        good = lineage.add_candidate(hostile)
        bad = lineage.add_candidate(replace(hostile, patch=""))
        for cid, won in ((good, solved[step]), (bad, set())):
            run = f"c{cid}-heldout"
            _record(
                store, run, _report(run, MODELS[0], "heldout", won, candidate_id=cid), None, cid
            )
            _heldout_test(store, cid, promoted=cid == good, epoch=step)
        lineage.set_candidate(bad, "rejected", "heldout", _verdict(False))
        lineage.set_candidate(good, "evaluating", "heldout")
        parent = lineage.promote(good, tree, _verdict(True))
    for model in MODELS:
        run = f"{parent.name}-{model}-heldout"
        _record(store, run, _report(run, model, "heldout", solved[2]), parent.id, None)
    for minute in range(0, 60, 5):
        for purpose in ("solve", "propose"):
            ledger.record(
                store,
                ledger.Charge(model=MODELS[0], purpose=purpose),  # type: ignore[arg-type]
                Usage(prompt_tokens=100 + minute, completion_tokens=20),
                ts=1_800_000_000 + 60 * minute,
            )
    return store
