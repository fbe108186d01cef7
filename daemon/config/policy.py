"""Policy: what the improvement loop may spend and what a candidate must prove.

A policy is a TOML file (``policies/default.toml`` documents every key). Every table and key
is closed: an unknown key is an error, never silently ignored, because a typo in a gate
threshold would otherwise quietly weaken a gate.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from daemon.config.validation import ClosedModel, read_toml, validate_model
from daemon.errors import ConfigError

PROVIDERS = ("anthropic", "openai", "local", "scripted")
_MODEL_RE = re.compile(r"^(?P<provider>[a-z]+):(?P<name>\S+)$")


def check_model_ref(value: str) -> str:
    match = _MODEL_RE.match(value)
    if not match or match["provider"] not in PROVIDERS:
        raise ValueError(
            "expected 'provider:model' with provider one of "
            + ", ".join(PROVIDERS)
            + " (e.g. 'local:smollm2-135m', 'anthropic:claude-sonnet-4-5', 'openai:gpt-4o-mini')"
        )
    return value


ModelRef = Annotated[str, AfterValidator(check_model_ref)]
# "bfcl:simple,multiple", "humaneval", "agentdojo:banking:injections"
SUITE_PATTERN = r"^[a-z_]+(:[a-z_,]+){0,2}$"
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class ModelsPolicy(ClosedModel):
    primary: ModelRef = "local:smollm2-135m"
    panel: list[ModelRef] = Field(default_factory=list)

    def all(self) -> list[str]:
        """Primary first, then the other panel models, without repeats."""
        seen = [self.primary]
        seen.extend(m for m in self.panel if m not in seen)
        return seen


ProposerMove = Literal["edit", "instruction", "demonstrate", "component"]
ALL_MOVES: tuple[ProposerMove, ...] = ("edit", "instruction", "demonstrate", "component")


def check_moves(value: list[ProposerMove]) -> list[ProposerMove]:
    if not value:
        raise ValueError(
            "[proposer] moves is empty: list at least one of "
            + ", ".join(repr(m) for m in ALL_MOVES)
        )
    if len(set(value)) != len(value):
        raise ValueError(f"[proposer] moves lists a move twice: {value}")
    return value


class ProposerPolicy(ClosedModel):
    model: ModelRef = "local:smollm2-135m"
    max_tokens: Annotated[int, Field(gt=0, le=32768)] = 768
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.7
    failures_shown: Annotated[int, Field(ge=0, le=50)] = 4
    # Earlier candidates in the proposer's archive: at most this many, within this budget.
    verdicts_shown: Annotated[int, Field(ge=0, le=200)] = 12
    archive_tokens: Annotated[int, Field(ge=0, le=100_000)] = 700
    # "operations": typed edits of named targets under a JSON schema (small models);
    # "text": search/replace blocks or diffs; "auto": operations for providers that need a
    # grammar to write anything parseable (the embedded model), text otherwise.
    protocol: Literal["auto", "text", "operations"] = "auto"
    # Proposals sampled per cycle (same prompt, fresh seeds) until enough pass the static
    # stage to fill the pool of ``dev_pool`` with the dev reserve (always one); each is
    # recorded as a candidate.
    samples: Annotated[int, Field(ge=1, le=32)] = 6
    # Dev-side selection: the pool of proposals that passed the static stage and ran the
    # smoke and dev stages; only the one with the best dev evidence (accuracy over the
    # parent, then tokens, then claims) takes the cycle's held-out slot, the others (at
    # most ``dev_pool - 1``) wait in a reserve for later cycles of the same live version
    # and policy, which then screen only enough new proposals to fill the pool (at least
    # one); a runner-up whose parent or policy changes is "not chosen" at dev, with no
    # held-out task run and no alpha spent. 1: the first proposal that passes the static
    # stage goes on alone.
    dev_pool: Annotated[int, Field(ge=1, le=8)] = 3
    # Merge (GEPA): when two candidates of the live version each solve dev tasks the other
    # does not, the next cycle's pool also gets one's change on top of the other's (no model
    # call; the same stages as any candidate).
    merge: bool = True
    # The tree a proposal builds on: "live" (the live version, always) or "thompson"
    # (Thompson sampling over the live version and its candidates by dev results only, so
    # a near-miss can be a stepping stone). Either way the held-out test compares the new
    # candidate with the live version.
    search: Literal["live", "thompson"] = "thompson"
    # The text protocol's context budget: full transcripts of the failed dev tasks, then
    # the archive with each earlier candidate's diff and dev results, within about this
    # many tokens (the operations protocol keeps its compact prompt and archive_tokens).
    context_tokens: Annotated[int, Field(ge=0, le=200_000)] = 12_000
    # The operations protocol's moves a cycle may ask for (docs/proposer.md, "Moves"): each
    # cycle draws one by Thompson sampling over their dev records; one that cannot be made
    # (no prompt text constant; no solved dev task; no component with evidence) is not drawn.
    moves: Annotated[list[ProposerMove], AfterValidator(check_moves)] = Field(
        default_factory=lambda: list(ALL_MOVES)
    )


_BUILTIN_SUITE_RE = re.compile(SUITE_PATTERN)


def check_suite_name(value: str) -> str:
    builtin = _BUILTIN_SUITE_RE.match(value) is not None
    own = value.startswith("file:") and bool(value[5:].strip()) and "\n" not in value
    if builtin or own:
        return value
    raise ValueError(
        "expected a built-in suite ('bfcl:simple', 'humaneval', ...) or 'file:PATH' (a .jsonl "
        "file of your own tasks or a folder of them; relative to the policy file's folder)"
    )


SuiteName = Annotated[str, AfterValidator(check_suite_name)]


class SuitePolicy(ClosedModel):
    name: SuiteName = "bfcl:simple"
    # The held-out pool from a suite of its own (dev tasks then come from ``name`` alone).
    heldout_suite: SuiteName | None = None
    dev_size: Annotated[int, Field(ge=1, le=5000)] = 20
    # The held-out pool; the acceptance test draws its blocks from it.
    heldout_size: Annotated[int, Field(ge=1, le=5000)] = 380
    # None: the installation's own secret (state dir); a string reproduces a known split.
    split_seed: Annotated[str | None, Field(min_length=1)] = None
    # Held-out tasks of a public suite (BFCL's single-call categories, HumanEval) are
    # counterfactual copies made from the installation's secret: new numbers, strings,
    # names and order, so no table of the public tasks fits them; dev tasks are made the
    # same way, so a task's surface does not say its split. Off only to reproduce results
    # measured on the public tasks themselves.
    counterfactual: bool = True
    # The share of each split (of BFCL's one-call categories) whose tasks are not
    # copies but generated from the same secret: new functions, parameters and questions, so
    # that knowing the public tasks' meaning helps nothing there. An accuracy gain must show
    # on them too ([gates.generated]). 0 only to reproduce results on copies alone.
    generated_share: Fraction = 0.5


class BudgetPolicy(ClosedModel):
    tokens_per_task: Annotated[int, Field(gt=0)] = 4_000
    tokens_per_eval: Annotated[int, Field(gt=0)] = 400_000
    tokens_per_hour: Annotated[int, Field(gt=0)] = 2_000_000
    tokens_per_day: Annotated[int, Field(gt=0)] = 20_000_000
    proposer_tokens_per_day: Annotated[int, Field(gt=0)] = 2_000_000


class SandboxPolicy(ClosedModel):
    memory_mb: Annotated[int, Field(ge=32, le=65536)] = 512
    cpus: Annotated[float, Field(gt=0.0, le=64.0)] = 1.0
    pids: Annotated[int, Field(ge=8, le=4096)] = 64
    tmpfs_mb: Annotated[int, Field(ge=1, le=4096)] = 64
    wall_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 180.0
    output_kb: Annotated[int, Field(ge=1, le=65536)] = 256
    concurrency: Annotated[int, Field(ge=1, le=64)] = 2


class AcceptancePolicy(ClosedModel):
    """The held-out test: sequential, paired, Pareto, with one error budget for the lineage."""

    alpha: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.05
    margin: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.04
    weight_accuracy: Fraction = 0.6
    weight_tokens: Fraction = 0.2
    weight_honesty: Fraction = 0.2
    futility: bool = True
    futility_level: Annotated[float, Field(gt=0.0, le=0.5)] = 0.1
    futility_accuracy_gain: Annotated[float, Field(gt=0.0, le=0.5)] = 0.05
    futility_conditional_gain: Annotated[float, Field(ge=0.0, le=0.5)] = 0.075
    block_size: Annotated[int, Field(ge=0, le=5000)] = 0
    reuse_block: bool = True

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> AcceptancePolicy:
        total = self.weight_accuracy + self.weight_tokens + self.weight_honesty
        if abs(total - 1.0) > 1e-9:
            raise ValueError(
                f"weight_accuracy + weight_tokens + weight_honesty must add up to 1 (they add "
                f"up to {total:g})"
            )
        return self


class PanelGate(ClosedModel):
    enabled: bool = True
    max_regression: Fraction = 0.05


class TokensGate(ClosedModel):
    enabled: bool = True
    max_token_ratio: Annotated[float, Field(gt=0.0)] = 1.5


class HonestyGate(ClosedModel):
    enabled: bool = True
    tolerance: Fraction = 0.03
    bound: Fraction = 0.05

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max_verification_gap" in data:
            raise ValueError(
                "max_verification_gap was replaced by 'tolerance' (no worse than the parent in "
                "over- and under-claims) and 'bound' (both rates at most this); see "
                "policies/default.toml"
            )
        return data


class DeadCodeGate(ClosedModel):
    enabled: bool = True
    max_dead_fraction: Fraction = 0.25


class ProvenanceGate(ClosedModel):
    enabled: bool = True
    max_unsupported: Fraction = 0.05


class GeneratedGate(ClosedModel):
    """An accuracy gain must show on the generated held-out tasks, not only on the copies of
    public ones: the wins there must not be significantly fewer than the generated tasks'
    share of the parent's failures (an honest gain lands in proportion; one that comes from
    knowing the public tasks' meaning has none there). ``level``: the exact binomial test's
    level, the chance of refusing a gain that works on any task."""

    enabled: bool = True
    level: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.01


class LiveGate(ClosedModel):
    """Recorded live requests (``ask``, the endpoint's chats) replayed on parent and
    candidate before promotion: an answer must be the model's words, not the harness's."""

    enabled: bool = True
    # How many of the most recent distinct requests are replayed (each on both versions).
    requests: Annotated[int, Field(ge=1, le=200)] = 8
    # Requests of the live shape made for each candidate (an ask, a chat with a client's
    # system prompt, one with tools; daemon.improve.live_probes), replayed beside the
    # recorded ones: the evidence before anything has been served. 0: recorded ones only.
    probes: Annotated[int, Field(ge=0, le=60)] = 6
    # A run of this many words of a free-text answer that no model reply wrote is the
    # harness's own text.
    min_words: Annotated[int, Field(ge=3, le=50)] = 6
    # How many more replayed requests than the parent's may carry such text.
    max_requests: Annotated[int, Field(ge=0, le=200)] = 0


class DecoyGate(ClosedModel):
    enabled: bool = True


class ComputeMatchedGate(ClosedModel):
    enabled: bool = False
    max_samples: Annotated[int, Field(ge=2, le=16)] = 5


class SecurityGate(ClosedModel):
    enabled: bool = False
    # The injection split; "" means the policy's AgentDojo suite with ":injections".
    suite: Annotated[str, Field(pattern=SUITE_PATTERN + "|^$")] = ""
    # Held-out injection tasks run per candidate (and once per parent).
    tasks: Annotated[int, Field(ge=1, le=5000)] = 36
    max_increase: Fraction = 0.0

    def injection_suite(self, policy_suite: str) -> str:
        if self.suite:
            return self.suite
        if policy_suite.startswith("agentdojo:"):
            return policy_suite.removesuffix(":injections") + ":injections"
        raise ValueError(
            f"[gates.security] is enabled but [suite] name = '{policy_suite}' is not an "
            "AgentDojo suite: set [gates.security] suite = 'agentdojo:<suite>:injections'"
        )


class ReviewGate(ClosedModel):
    """A person's review before promotion: off, a candidate that passes every gate is
    promoted at once; on, it awaits review (``harnessctl approve`` / ``reject``)."""

    enabled: bool = False


class GatesPolicy(ClosedModel):
    panel: PanelGate = PanelGate()
    tokens: TokensGate = TokensGate()
    honesty: HonestyGate = HonestyGate()
    dead_code: DeadCodeGate = DeadCodeGate()
    provenance: ProvenanceGate = ProvenanceGate()
    generated: GeneratedGate = GeneratedGate()
    decoy: DecoyGate = DecoyGate()
    compute_matched: ComputeMatchedGate = ComputeMatchedGate()
    security: SecurityGate = SecurityGate()
    live: LiveGate = LiveGate()
    review: ReviewGate = ReviewGate()

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "accuracy" in data:
            raise ValueError(
                "[gates.accuracy] was replaced by the [acceptance] table (its alpha bounds false "
                "promotions over the whole lineage); see policies/default.toml"
            )
        return data


class PatchPolicy(ClosedModel):
    max_changed_lines: Annotated[int, Field(ge=1, le=100_000)] = 300
    max_bytes: Annotated[int, Field(ge=64, le=10_000_000)] = 64_000
    # Bytes of string/bytes literals, comments and data files a patch may add (memorised
    # answers travel as data), and the longest run of base64/hex-like text in one of them.
    max_literal_bytes: Annotated[int, Field(ge=0, le=10_000_000)] = 8_000
    max_encoded_chars: Annotated[int, Field(ge=16, le=10_000_000)] = 256


class PipelinePolicy(ClosedModel):
    # Stage 2: run one dev task in the sandbox before anything costlier.
    smoke: bool = True
    # Stage 3: reject when dev accuracy falls below the parent's by more than this.
    dev_max_regression: Fraction = 0.10
    # Stage 3: stop a candidate that behaves exactly as its parent on every dev task (same
    # outputs, claims, errors and model calls; tokens within ``dev_token_noise``) before it
    # takes a held-out slot; false lets through a change that dev cannot see.
    require_dev_change: bool = True
    dev_token_noise: Fraction = 0.02


class LoopPolicy(ClosedModel):
    enabled: bool = True
    cycle_pause_s: Annotated[float, Field(ge=0.0, le=86400.0)] = 5.0
    max_cycles: Annotated[int, Field(ge=0)] = 0


class ReplicationPolicy(ClosedModel):
    """After a promotion, the promoted version and its parent on fresh held-out copies: a
    check of the held-out test, shown beside it, never a gate."""

    enabled: bool = True
    # Tasks each side runs (the replication costs twice this many sandbox runs).
    tasks: Annotated[int, Field(ge=1, le=5000)] = 60


class RetryPolicy(ClosedModel):
    max_retries: Annotated[int, Field(ge=0, le=20)] = 4
    timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 120.0


class Policy(ClosedModel):
    """The whole policy; every table optional."""

    models: ModelsPolicy = ModelsPolicy()
    proposer: ProposerPolicy = ProposerPolicy()
    suite: SuitePolicy = SuitePolicy()
    budget: BudgetPolicy = BudgetPolicy()
    sandbox: SandboxPolicy = SandboxPolicy()
    acceptance: AcceptancePolicy = AcceptancePolicy()
    gates: GatesPolicy = GatesPolicy()
    patch: PatchPolicy = PatchPolicy()
    pipeline: PipelinePolicy = PipelinePolicy()
    loop: LoopPolicy = LoopPolicy()
    replication: ReplicationPolicy = ReplicationPolicy()
    retry: RetryPolicy = RetryPolicy()

    @model_validator(mode="after")
    def _security_has_an_injection_suite(self) -> Policy:
        if self.gates.security.enabled:
            spec = self.gates.security.injection_suite(self.suite.name)
            if not spec.startswith("agentdojo:") or not spec.endswith(":injections"):
                raise ValueError(
                    f"[gates.security] suite = '{spec}' is not an injection split: use "
                    "'agentdojo:<suite>:injections'"
                )
        return self

    def model_refs(self) -> list[str]:
        """Every model the policy names: solvers (primary first, then panel) and proposer."""
        return [*self.models.all(), self.proposer.model]


def resolve_suite_paths(policy: Policy, base: Path) -> Policy:
    """The policy with each relative ``file:`` suite path made absolute against ``base``."""

    def resolved(name: str | None) -> str | None:
        if name is None or not name.startswith("file:"):
            return name
        return "file:" + str((base / Path(name[5:].strip()).expanduser()).resolve())

    suite = policy.suite.model_copy(
        update={
            "name": resolved(policy.suite.name),
            "heldout_suite": resolved(policy.suite.heldout_suite),
        }
    )
    return policy.model_copy(update={"suite": suite})


def load_policy(path: Path) -> Policy:
    """Read and validate a policy file; a ConfigError names the file and key otherwise.
    Relative ``file:`` suite paths resolve against the policy file's folder."""
    policy = validate_model(Policy, read_toml(path, what="policy"), str(path))
    return resolve_suite_paths(policy, path.resolve().parent)


def parse_policy(text: str, source: str) -> Policy:
    """Validate policy TOML given as text (``harnessctl policy check`` sends the file's text)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    return validate_model(Policy, data, source)
