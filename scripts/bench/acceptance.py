"""Simulation benchmark of candidate acceptance (no Docker, no model; fixed seed).

Runs the daemon's real decision code (``daemon.acceptance.rule``) under the real lineage
budget (``daemon.acceptance.spending``), both configured from the default policy exactly as the
held-out stage configures them (``daemon.improve.procedure``), on synthetic task
populations, and prints a markdown report (README, "Acceptance"). Sections:

(a) lineage-wide false-promotion rate: lineages of 1,000 candidates, nearly all "not truly
    better" (gain 0 or negative, or cheaper but below the margin), with a true +15-point
    improvement every 100 candidates so that promotions, new epochs, fresh blocks and reused
    blocks all occur; plus the exact actual-to-nominal level of one test (DP) for a boundary
    null, which says how much of the spent alpha a null lineage really uses;
(b) power at +5 and +10 points for early candidates (Monte Carlo through the decision code, and
    the exact DP under the least favourable honest model);
(c) mean held-out tasks per decision versus the fixed-n test (which always uses the block);
(d) a token-only improvement at equal accuracy, an honesty-only improvement, and the
    never-claim / coin-flip candidates against the always-claim seed.

Task model: every task of the pool has i.i.d. latent features; a harness's outcome on a task is
a deterministic function of those features and of the harness, so re-running a task gives the
same answer (the embedded model is deterministic) and the only randomness is which tasks are in
the sample.  A candidate is described relative to its parent by per-task win and loss rates
(wins only where the parent fails, losses only where it passes), a token saving and a claiming
behaviour.  Half of each candidate's flips use a latent "fragility" shared by all candidates of
the lineage, so candidates tested on the same block are dependent, as in the daemon.

Usage: .venv/bin/python scripts/bench/acceptance.py [--lineages N] [--reps R] [--workers K]
       [--output FILE]      (defaults: 3 lineages, 100 reps, 2 workers: about a minute)
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from daemon.acceptance.knobs import RuleKnobs
from daemon.acceptance.observations import HarnessResult, PairedOutcome
from daemon.acceptance.power import DiscordanceModel, sequential_power
from daemon.acceptance.rule import Outcome, begin, observe
from daemon.acceptance.spending import held_out_block
from daemon.config.policy import Policy
from daemon.improve.procedure import empty_budget, rule_knobs, wanted_settings

SEED = 20261201
POOL = 380  # BFCL simple: 400 tasks, 20 dev
SEED_ACCURACY = 0.2
DEFAULT = Policy()
POLICY = rule_knobs(DEFAULT)
PRUNE = 1e-9
"""DP states below this probability are dropped (total dropped mass ~1e-5: invisible here)."""


@dataclass(frozen=True)
class Spec:
    """A candidate relative to its parent."""

    kind: str
    win: float
    loss: float
    saving: float = 0.0
    claim: str = "same"  # same | always | never | coin | fix:<p> (withhold false claims w.p. p)
    truly_better: bool = False


@dataclass(frozen=True)
class Harness:
    """A harness's behaviour on every pool task."""

    passed: tuple[bool, ...]
    tokens: tuple[int, ...]
    claimed: tuple[bool, ...]
    accuracy: float  # population accuracy


NULL_KINDS = (
    Spec("identical", 0.0, 0.0),
    Spec("zero gain, 5%/5% discordant", 0.05, 0.05),
    Spec("zero gain, 10%/10% discordant", 0.10, 0.10),
    Spec("-5 pts (0%/5%)", 0.0, 0.05),
    Spec("-5 pts (3%/8%)", 0.03, 0.08),
    Spec("-2 pts (3%/5%)", 0.03, 0.05),
    Spec("-margin but 30% cheaper", 0.0, POLICY.margin, saving=0.3),
    Spec("token noise only", 0.02, 0.02, saving=0.0),
)
IMPROVEMENT = Spec("+15 pts", 0.15, 0.0, truly_better=True)


def seed_harness(rng: random.Random) -> Harness:
    """The naive seed: ~20% accuracy, always claims success."""
    passed = tuple(rng.random() < SEED_ACCURACY for _ in range(POOL))
    tokens = tuple(rng.randint(300, 3000) for _ in range(POOL))
    return Harness(passed, tokens, tuple(True for _ in range(POOL)), SEED_ACCURACY)


def derive(
    rng: random.Random, parent: Harness, spec: Spec, fragility: tuple[float, ...]
) -> Harness:
    """Candidate behaviour on every pool task, from the parent's and the task latents."""
    p_fix = spec.win / max(1e-9, 1.0 - parent.accuracy)
    p_break = spec.loss / max(1e-9, parent.accuracy)
    rand = rng.random
    latents = [f if rand() < 0.5 else rand() for f in fragility]
    passed = tuple(
        not u < p_break if was else u < p_fix for u, was in zip(latents, parent.passed, strict=True)
    )
    keep = 1.0 - spec.saving
    # log-symmetric noise: with no saving, parent and candidate token counts are exchangeable,
    # so the relative saving r has mean exactly 0 (a true null for the token test)
    tokens = tuple(max(0, round(t * keep * math.exp(0.2 * rand() - 0.1))) for t in parent.tokens)
    claimed = tuple(
        _claim(rng, spec.claim, ok, was) for ok, was in zip(passed, parent.claimed, strict=True)
    )
    return Harness(passed, tokens, claimed, parent.accuracy + spec.win - spec.loss)


def _claim(rng: random.Random, mode: str, ok: bool, parent_claim: bool) -> bool:
    if mode == "same":
        return ok or parent_claim
    if mode == "always":
        return True
    if mode == "never":
        return False
    if mode == "coin":
        return rng.random() < 0.5
    if mode.startswith("fix:"):
        return ok or rng.random() >= float(mode[4:])
    raise ValueError(mode)


def paired(parent: Harness, cand: Harness, order: list[int]) -> Iterator[PairedOutcome]:
    """Paired outcomes in dispatch order, built lazily (the test usually stops early)."""
    for i in order:
        yield PairedOutcome(
            str(i),
            HarnessResult(parent.passed[i], parent.tokens[i], parent.claimed[i]),
            HarnessResult(cand.passed[i], cand.tokens[i], cand.claimed[i]),
        )


def test_candidate(
    rng: random.Random,
    parent: Harness,
    cand: Harness,
    block: tuple[int, ...],
    alpha: float,
    knobs: RuleKnobs = POLICY,
    lazy: bool = False,
) -> tuple[bool, int]:
    """Run one sequential test; return (promoted, tasks used).

    ``lazy``: as the daemon's held-out stage runs it: the parent runs only what the test
    consumes, beside the candidate, so its failures on the block are not known in advance
    (no tightened curtailment), and pairs are fed in the block's own fixed order (the same
    for every candidate of the epoch, whose parent results are cached)."""
    order = list(block)
    if not lazy:
        rng.shuffle(order)
    failures = None if lazy else sum(not parent.passed[i] for i in block)
    state = begin(knobs, alpha, len(block), parent_failures=failures)
    for o in paired(parent, cand, order):
        state = observe(state, o)
        if state.outcome is not Outcome.UNDECIDED:
            break
    return state.outcome is Outcome.ACCEPT, state.n


# ----------------------------------------------------------------------------- (a) lineages


@dataclass(frozen=True)
class LineageConfig:
    """One way of running a lineage."""

    name: str
    block_size: int
    reuse: bool
    alpha: float = 0.05
    candidates: int = 1000
    improvements: bool = True  # a true +15-point candidate every 100th
    lazy: bool = False  # the parent paired and lazy (the daemon's held-out stage)


def run_lineage(args: tuple[LineageConfig, int]) -> tuple[int, int, int, int, int, int]:
    """Return (false promotions, true promotions, tests run, tasks used, refused, parent
    tasks run: the whole block once per parent and block when eager; when lazy, only the
    prefix of the block's order the tests consumed, each task once per parent)."""
    config, index = args
    rng = random.Random(SEED * 1000 + index * 7919 + config.block_size)
    fragility = tuple(rng.random() for _ in range(POOL))
    pool = list(range(POOL))
    rng.shuffle(pool)  # the secret seeded order
    pool_ids = [str(i) for i in pool]
    settings = wanted_settings(
        Policy.model_validate(
            {
                "acceptance": {
                    "alpha": config.alpha,
                    "block_size": config.block_size,
                    "reuse_block": config.reuse,
                }
            }
        ),
        pool_ids,
    )
    budget = empty_budget(settings)
    parent = seed_harness(rng)
    false_p = true_p = tests = tasks = refused = parent_tasks = 0
    ran: dict[tuple[int, int], int] = {}  # (parent, block index) -> parent tasks run on it
    parent_no = 0
    for c in range(1, config.candidates + 1):
        improving = config.improvements and c % 100 == 50
        spec = IMPROVEMENT if improving else NULL_KINDS[c % len(NULL_KINDS)]
        nxt = budget.next_test()
        if nxt is None:
            refused = config.candidates - c + 1
            break
        chosen = held_out_block(pool_ids, config.block_size, budget.promotions, config.reuse)
        assert chosen is not None and chosen.index == nxt.block_index
        block = tuple(int(t) for t in chosen.task_ids)
        cand = derive(rng, parent, spec, fragility)
        promoted, used = test_candidate(rng, parent, cand, block, nxt.alpha, lazy=config.lazy)
        tests += 1
        tasks += used
        key = (parent_no, chosen.index)
        need = used if config.lazy else len(block)
        parent_tasks += max(0, need - ran.get(key, 0))
        ran[key] = max(ran.get(key, 0), need)
        budget = budget.record(promoted)
        if promoted and not spec.truly_better:
            false_p += 1
            break  # the lineage has failed; later events do not matter for the FWER
        if promoted:
            true_p += 1
            parent = cand
            parent_no += 1
    return false_p, true_p, tests, tasks, refused, parent_tasks


CONFIGS = (
    LineageConfig(
        "null only: 1,000 null candidates, default policy", 380, True, improvements=False
    ),
    LineageConfig("null only, lazy paired parent", 380, True, improvements=False, lazy=True),
    LineageConfig("default: N=380 (whole pool), reuse with penalty", 380, True),
    LineageConfig("default, lazy paired parent (the daemon)", 380, True, lazy=True),
    LineageConfig("fresh blocks: N=126 x3, then refuse", 126, False),
    LineageConfig("stress: default with alpha_lineage=0.45", 380, True, alpha=0.45),
)


def lineage_rows(
    results: dict[tuple[str, int], tuple[int, int, int, int, int, int]],
) -> list[str]:
    """Table of section (a) from the finished lineage jobs."""
    rows = [
        "| configuration | lineages x candidates | lineages with a false promotion | "
        "rate (95% upper) | alpha_lineage | true promotions / lineage | tests run | "
        "mean tasks / test | parent tasks / test |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cfg in CONFIGS:
        res = [r for (name, _), r in results.items() if name == cfg.name]
        n = len(res)
        failed = sum(r[0] > 0 for r in res)
        tests = sum(r[2] for r in res)
        rows.append(
            f"| {cfg.name} | {n} x {cfg.candidates} | {failed} | "
            f"{failed / n:.3f} (<= {_clopper_pearson_upper(failed, n):.3f}) | {cfg.alpha} | "
            f"{sum(r[1] for r in res) / n:.1f} | {tests} | "
            f"{sum(r[3] for r in res) / max(tests, 1):.0f} | "
            f"{sum(r[5] for r in res) / max(tests, 1):.1f} |"
        )
    return rows


def level_rows() -> list[str]:
    """Exact actual level of one test for a boundary null, as a fraction of its alpha."""
    rows = [
        "With a handful of lineages the rate column is a smoke test (see its 95% upper bound); "
        "the guarantee rests on the proof (DESIGN.md, Acceptance), the exact-enumeration tests and "
        "the exact level below. `--lineages 40` runs 120,000 candidates (about 8 minutes).",
        "",
        "| boundary null (equal tokens, honest claims) | alpha_i | exact P(promote) | "
        "P / alpha_i | DP mass dropped |",
        "|---|---|---|---|---|",
    ]
    model = DiscordanceModel(0.05, 0.05)
    for a in (first_alphas(1)[0], 1e-5):
        # the dropped mass must stay far below the probability being computed
        r = sequential_power(POLICY, a, POOL, model, prune=PRUNE if a > 1e-4 else 1e-12)
        rows.append(
            f"| win 5% / loss 5% | {a:.2e} | {r.power:.2e} | {r.power / a:.2f} | "
            f"{r.neglected_mass:.0e} |"
        )
    return rows


def _clopper_pearson_upper(k: int, n: int, level: float = 0.95) -> float:
    """One-sided upper confidence bound for a binomial rate, by bisection on the CDF."""
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        cdf = math.fsum(math.comb(n, j) * mid**j * (1 - mid) ** (n - j) for j in range(k + 1))
        lo, hi = (mid, hi) if cdf > 1 - level else (lo, mid)
    return hi


# ------------------------------------------------------------------------ (b), (c), (d)


def first_alphas(count: int) -> list[float]:
    """Levels of the first `count` candidates of epoch 1 under the default budget."""
    budget = empty_budget(wanted_settings(DEFAULT, [str(i) for i in range(POOL)]))
    out: list[float] = []
    for _ in range(count):
        t = budget.next_test()
        assert t is not None
        out.append(t.alpha)
        budget = budget.record(False)
    return out


def mc_rate(
    spec: Spec, alpha: float, reps: int, seed: int, block_size: int = POOL
) -> tuple[float, float]:
    """Promotion rate and mean tasks for `spec` against the seed, fresh population each rep."""
    rng = random.Random(seed)
    promoted = used = 0
    for _ in range(reps):
        fragility = tuple(rng.random() for _ in range(POOL))
        parent = seed_harness(rng)
        cand = derive(rng, parent, spec, fragility)
        ok, n = test_candidate(rng, parent, cand, tuple(range(block_size)), alpha)
        promoted += ok
        used += n
    return promoted / reps, used / reps


def section_b(reps: int) -> list[str]:
    """Power for early candidates."""
    alphas = first_alphas(100)
    rows = [
        "| candidate i (epoch 1) | alpha_i | gain | power, MC (seed parent, always-claim) | "
        "power, exact DP (honest claims) | mean tasks (MC) |",
        "|---|---|---|---|---|---|",
    ]
    for i in (1, 10, 100):
        a = alphas[i - 1]
        for gain in (0.05, 0.10):
            if i > 1 and gain == 0.10:
                continue
            spec = Spec(f"+{gain:.2f}", gain, 0.0)
            rate, used = mc_rate(spec, a, reps, SEED + i + int(gain * 100))
            exact = sequential_power(POLICY, a, POOL, DiscordanceModel(gain, 0.0), PRUNE).power
            rows.append(
                f"| {i} | {a:.2e} | +{gain * 100:.0f} pts, no losses | {rate:.3f} | "
                f"{exact:.3f} | {used:.0f} |"
            )
    a = alphas[0]
    exact_l = sequential_power(POLICY, a, POOL, DiscordanceModel(0.12, 0.02), PRUNE).power
    rate_l, used_l = mc_rate(Spec("+10 with losses", 0.12, 0.02), a, reps, SEED + 77)
    rows.append(
        f"| 1 | {a:.2e} | +10 pts, 12% wins / 2% losses | {rate_l:.3f} | {exact_l:.3f} | "
        f"{used_l:.0f} |"
    )
    return rows


def section_c(reps: int) -> list[str]:
    """Cost of a decision versus the fixed-n test."""
    a = first_alphas(1)[0]
    rows = [
        "| candidate | mean tasks (MC) | exact DP mean tasks (honest) | fixed-n tasks | "
        "ratio (MC) | promoted (MC) |",
        "|---|---|---|---|---|---|",
    ]
    cases = [
        (Spec("losing: -5 pts (0%/5%)", 0.0, 0.05), DiscordanceModel(0.0, 0.05)),
        (Spec("losing: -5 pts (3%/8%)", 0.03, 0.08), DiscordanceModel(0.03, 0.08)),
        (Spec("null: identical", 0.0, 0.0), DiscordanceModel(0.0, 0.0)),
        (Spec("null: 0 pts (5%/5%)", 0.05, 0.05), DiscordanceModel(0.05, 0.05)),
        (Spec("winner: +5 pts", 0.05, 0.0), DiscordanceModel(0.05, 0.0)),
        (Spec("winner: +10 pts", 0.10, 0.0), DiscordanceModel(0.10, 0.0)),
    ]
    for k, (spec, model) in enumerate(cases):
        rate, used = mc_rate(spec, a, reps, SEED + 500 + k)
        exact = sequential_power(POLICY, a, POOL, model, PRUNE).expected_tasks
        rows.append(
            f"| {spec.kind} | {used:.0f} | {exact:.0f} | {POOL} | {used / POOL:.2f} | {rate:.3f} |"
        )
    return rows


def section_d(reps: int) -> list[str]:
    """Token-only and honesty-only improvements; dishonest candidates."""
    a = first_alphas(1)[0]
    rows = [
        "| candidate (vs always-claim seed, 20% accuracy) | promoted | mean tasks |",
        "|---|---|---|",
    ]
    cases = [
        Spec("20% fewer tokens, same solved tasks", 0.0, 0.0, saving=0.2, claim="same"),
        Spec("20% fewer tokens, 1%/1% discordant", 0.01, 0.01, saving=0.2, claim="same"),
        Spec("honesty only: withholds half its false claims", 0.0, 0.0, claim="fix:0.5"),
        Spec("never claims (same solved tasks)", 0.0, 0.0, claim="never"),
        Spec("claims on a coin flip (same solved tasks)", 0.0, 0.0, claim="coin"),
        Spec("never claims, +5 pts", 0.05, 0.0, claim="never"),
    ]
    for k, spec in enumerate(cases):
        rate, used = mc_rate(spec, a, reps, SEED + 900 + k)
        rows.append(f"| {spec.kind} | {rate:.3f} | {used:.0f} |")
    return rows


def main() -> None:
    """Run every section and write the markdown report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--lineages", type=int, default=3, help="lineages per configuration")
    parser.add_argument("--reps", type=int, default=100, help="Monte Carlo reps in (b)-(d)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    start = time.time()
    lineage_jobs = [(cfg, i) for cfg in CONFIGS for i in range(args.lineages)]
    with Pool(args.workers) as pool:
        # Sections first, so they run on the workers while the lineages are mapped.
        levels_job = pool.apply_async(level_rows)
        b_job = pool.apply_async(section_b, (args.reps,))
        c_job = pool.apply_async(section_c, (args.reps,))
        d_job = pool.apply_async(section_d, (args.reps,))
        done = pool.map(run_lineage, lineage_jobs, chunksize=1)
        levels, b_rows = levels_job.get(), b_job.get()
        c_rows, d_rows = c_job.get(), d_job.get()
    lineages = {(cfg.name, i): r for (cfg, i), r in zip(lineage_jobs, done, strict=True)}
    out = [
        "# Acceptance: simulation through the real decision code",
        "",
        f"Seed {SEED}; pool {POOL} held-out tasks; default rule knobs (margin "
        f"{POLICY.margin}, weights 0.6/0.2/0.2, honesty tol 0.03 / bound 0.05, futility level "
        "0.1) and LineageBudget (alpha 0.05, epochs TelescopingSchedule(2), candidates "
        "PowerLawSchedule(1.5, 3)).",
        "",
        "## (a) Lineage-wide false promotions (1,000 candidates per lineage)",
        "",
        *lineage_rows(lineages),
        "",
        *levels,
        "",
        "## (b) Power for early candidates (N = 380)",
        "",
        *b_rows,
        "",
        "## (c) Held-out tasks per decision (candidate 1, N = 380)",
        "",
        *c_rows,
        "",
        "## (d) Token / honesty improvements and dishonest candidates",
        "",
        *d_rows,
        "",
        f"Runtime: {time.time() - start:.0f} s wall with {args.workers} worker(s).",
    ]
    text = "\n".join(out)
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
