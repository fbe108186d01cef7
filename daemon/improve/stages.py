"""The pipeline's stages as data, and the one place a verdict is derived from them.

A candidate's evaluation is an ordered list of :class:`PipelineStage` (the list itself is
``daemon.improve.pipeline.STAGES``): each runs, returns its gate results, and the list is
cut short at the first stage that refuses (it could not run: no held-out block left, a
crashed smoke task) or after which a gate has failed, unless that stage lets the next one
still measure (the held-out test's gates are followed by the point gates on the same run;
a failed decoy still lets compute-matched be measured). A verdict then lists every gate of
the stages reached and a "not reached" line for each gate of the stages after, so every
verdict names the same gates (under the same policy). Which gate failed is
:attr:`daemon.verdict.GateResult.failed`, and nothing else decides it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from daemon.config.policy import Policy
from daemon.verdict import Gate, GateResult, PolicyUsed, Stage, Verdict

Run = TypeVar("Run")


@dataclass(frozen=True)
class StageResult:
    """What one stage measured. ``refusal``: why the stage could not run, which rejects the
    candidate though no gate failed. ``reached``: the verdict's stage, where it is not the
    stage's own (a panel of no other model leaves the candidate at ``heldout``)."""

    gates: list[GateResult] = field(default_factory=list)
    refusal: str = ""
    reached: Stage | None = None


@dataclass(frozen=True)
class PipelineStage(Generic[Run]):
    """One stage: ``run`` measures it on one candidate's evaluation; ``gates`` are the gates
    it reports under a policy (for the "not reached" lines); ``stage`` is what a verdict
    that ends with it says was reached."""

    name: str
    stage: Stage
    gates: Callable[[Policy], tuple[Gate, ...]]
    run: Callable[[Run], Awaitable[StageResult]]
    continues_after_failure: bool = False


def not_reached(
    later: Sequence[PipelineStage[Run]], policy: Policy, measured: Sequence[GateResult]
) -> list[GateResult]:
    """A "not reached" line for each gate of the ``later`` stages not yet ``measured``."""
    names = {g.gate for g in measured}
    return [
        GateResult(gate=gate, passed=True, skipped=True, note="not reached")
        for stage in later
        for gate in stage.gates(policy)
        if gate not in names
    ]


@dataclass(frozen=True)
class Passed:
    """Every stage of a prefix passed: their gates, and the stage the last one reached."""

    gates: list[GateResult]
    reached: Stage


async def run_prefix(
    stages: Sequence[PipelineStage[Run]],
    rest: Sequence[PipelineStage[Run]],
    run: Run,
    policy: Policy,
    used: PolicyUsed,
    *,
    earlier: Sequence[GateResult] = (),
) -> Verdict | Passed:
    """Run ``stages`` in order on ``run``, after stages that passed with ``earlier`` gates.
    A stage that refuses or fails ends it with the verdict (a "not reached" line for every
    gate of the stages after it and of ``rest``, the stages that would follow); if all
    pass, their gates, for the stages of ``rest`` to continue from."""
    gates: list[GateResult] = list(earlier)
    reached: Stage = stages[0].stage
    for index, stage in enumerate(stages):
        result = await stage.run(run)
        gates.extend(result.gates)
        reached = result.reached or stage.stage
        failed = any(g.failed for g in gates) and not stage.continues_after_failure
        if result.refusal or failed:
            later = [*stages[index + 1 :], *rest]
            skipped = not_reached(later, policy, gates)
            return Verdict.of(reached, [*gates, *skipped], reason=result.refusal, policy=used)
    return Passed(gates, reached)


async def run_stages(
    stages: Sequence[PipelineStage[Run]],
    run: Run,
    policy: Policy,
    used: PolicyUsed,
    *,
    earlier: Sequence[GateResult] = (),
) -> Verdict:
    """Run ``stages`` in order on ``run`` and derive the verdict, reached under ``policy``
    (the candidate's snapshot, named by ``used``). ``earlier``: the gates of the stages
    that ran before these (a candidate screened on dev, continuing at the held-out test)."""
    outcome = await run_prefix(stages, (), run, policy, used, earlier=earlier)
    if isinstance(outcome, Verdict):
        return outcome
    return Verdict.of(outcome.reached, outcome.gates, policy=used)
