"""BFCL multi-turn episodes: executing a harness's calls, and BFCL's multi-turn checker.

Worker only. BFCL's own runner turns model output into Python call strings and ``eval()``s
them in a module whose globals hold every live API instance; harness text is never
evaluated here. Calls arrive as ``(name, arguments)`` and are looked up in the table BFCL
builds (every public method of the involved instances), with BFCL's semantics kept where a
verdict depends on them: how ``initial_config`` is loaded, how results become text, and the
checker's rules (state and response checks per turn, in BFCL's order). Deliberate
differences, all stricter: Python builtins and module globals are not callable (BFCL would
run ``len(...)`` or a dotted ``module.function``), string arguments are not rewritten by
BFCL's instance-prefix regex, and keyword names that are not identifiers get a TypeError text.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .bfcl_data import STATELESS_CLASSES, BfclTask, Docs, ground_truth_calls, tools_per_turn
from .bfcl_data import user_messages as turn_messages

# Names BFCL refuses before eval (multi_turn_utils.execute_multi_turn_func_call).
BLOCKED_NAMES = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
# A cap per turn instead of BFCL's 20 model steps (the host sees calls, not steps).
MAX_CALLS_PER_TURN = 100


def stringify(result: object) -> str:
    """BFCL's result text: str as is, an exact dict as JSON (str() if that fails), else str()."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # BFCL uses a bare except here
            return str(result)
    return str(result)


class BfclEnvironment:
    """Live API instances for one task and the name -> bound-method table BFCL builds."""

    def __init__(self, task: BfclTask, classes: Mapping[str, type]) -> None:
        self.instances: dict[str, Any] = {}
        self._methods: dict[str, Any] = {}
        for name in task.involved_classes:
            instance = classes[name]()
            if name not in STATELESS_CLASSES:
                instance._load_scenario(
                    copy.deepcopy(task.initial_config.get(name, {})),
                    long_context=task.long_context,
                )
            self.instances[name] = instance
            for method_name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_"):
                    self._methods[method_name] = method  # later classes win, as in BFCL

    def execute(self, name: str, arguments: Any) -> str:
        """Run one call; always BFCL-style result text, never an exception for bad input."""
        if not isinstance(arguments, dict) or not all(isinstance(k, str) for k in arguments):
            return "Error during execution: arguments must be a JSON object"
        short = name.split(".")[1] if "." in name else name
        if short in BLOCKED_NAMES:
            return f"Error during execution: Function call {short} is not allowed."
        method = self._methods.get(name)
        if method is None:
            return f"Error during execution: name '{name}' is not defined"
        # A deep copy: API code keeps argument objects in its state and changes them later
        # (TwitterAPI.post_tweet keeps ``mentions``, ``mention`` extends it), which would
        # silently rewrite our record of the call. BFCL's eval builds fresh literals.
        kwargs = copy.deepcopy(arguments)
        try:
            # Inside the try, as in BFCL: str() of a huge int raises ValueError.
            return stringify(method(**kwargs))
        except Exception as exc:  # API errors are results, as in BFCL
            return f"Error during execution: {exc}"

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the instances (their own ``__eq__`` is what the checker uses)."""
        return copy.deepcopy(self.instances)


@dataclass
class TurnRecord:
    calls: list[tuple[str, Any]] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None


def replay(
    task: BfclTask, classes: Mapping[str, type], per_turn: Sequence[Sequence[tuple[str, Any]]]
) -> list[TurnRecord]:
    """A trajectory executed in a fresh environment (what BFCL's evaluation does)."""
    env = BfclEnvironment(task, classes)
    records = []
    for calls in per_turn:
        record = TurnRecord()
        for name, arguments in calls:
            record.calls.append((name, arguments))
            record.results.append(env.execute(name, arguments))
        record.snapshot = env.snapshot()
        records.append(record)
    return records


@dataclass(frozen=True)
class MultiTurnCheckResult:
    valid: bool
    error_type: str | None = None
    message: str = ""
    turn: int | None = None


def _missing(needed: Sequence[str], have: Sequence[str]) -> list[str]:
    """BFCL ``_is_subsequence_unordered``: items of ``needed`` not in ``have`` (multiset)."""
    pool = list(have)
    missing = []
    for item in needed:
        if item in pool:
            pool.remove(item)
        else:
            missing.append(item)
    return missing


def _state_mismatch(model: Mapping[str, Any], truth: Mapping[str, Any]) -> str | None:
    """BFCL ``_compare_instances``: the first class whose public attributes differ."""
    for cls, gt in truth.items():
        mine = model[cls]
        if type(mine) is not type(gt):
            return cls
        for attr in vars(gt):
            if not attr.startswith("_") and getattr(mine, attr) != getattr(gt, attr):
                return cls
    return None


def check(
    task: BfclTask, truth: Sequence[TurnRecord], records: Sequence[TurnRecord]
) -> MultiTurnCheckResult:
    """BFCL's multi-turn verdict (``multi_turn_checker`` and the runner's pre-checks).

    In BFCL's order: the number of turns must be the ground truth's (an episode that ended
    early is ``force_terminated``); then per turn, with the ground truth run in its own
    persistent environment: a ground-truth turn with calls needs model calls
    (``empty_turn_model_response``); a ground-truth turn without calls (miss_func /
    miss_param: "ask the user") is not checked, though model calls there change the state;
    every public attribute of every instance must equal the ground truth's
    (``instance_state_mismatch``); the ground truth's results of this turn must all be
    among the model's results of all turns so far (``execution_response_mismatch``).
    The messages name no ground-truth value.
    """
    if len(records) != task.num_turns:
        return MultiTurnCheckResult(
            False,
            "multi_turn:force_terminated",
            f"{len(records)} of {task.num_turns} turns were answered",
        )
    results_so_far: list[str] = []
    for i, (mine, gt) in enumerate(zip(records, truth, strict=True)):
        results_so_far.extend(mine.results)
        if not gt.calls:
            continue
        if not mine.calls:
            return MultiTurnCheckResult(
                False, "multi_turn:empty_turn_model_response", f"no tool call in turn {i}", i
            )
        if mine.snapshot is None or gt.snapshot is None:
            raise ValueError(f"turn {i} has no end state")
        cls = _state_mismatch(mine.snapshot, gt.snapshot)
        if cls is not None:
            return MultiTurnCheckResult(
                False,
                "multi_turn:instance_state_mismatch",
                f"the state of {cls} after turn {i} differs from the expected state",
                i,
            )
        missing = _missing(gt.results, results_so_far)
        if missing:
            return MultiTurnCheckResult(
                False,
                "multi_turn:execution_response_mismatch",
                f"{len(missing)} expected result(s) of turn {i} never came back from a call",
                i,
            )
    return MultiTurnCheckResult(True)


class BfclSimulation:
    """One harness run of one task: turns in order, calls recorded per turn.

    Turn 0 is open from the start (the task's prompt); ``next_turn`` closes the open turn
    (its end state is kept for the checker) and opens the next, or says the task is done.
    """

    def __init__(self, task: BfclTask, classes: Mapping[str, type], docs: Docs) -> None:
        self.task = task
        self._classes = classes
        self._docs = docs
        self.env = BfclEnvironment(task, classes)
        self.tools = tools_per_turn(task, docs)
        self.turns: list[TurnRecord] = [TurnRecord()]
        self.open = True

    def call(self, name: str, arguments: Any) -> str:
        if not self.open:
            return "Error during execution: the task has no open turn (it is done)"
        record = self.turns[-1]
        if len(record.calls) >= MAX_CALLS_PER_TURN:
            return f"Error during execution: more than {MAX_CALLS_PER_TURN} calls in one turn"
        result = self.env.execute(name, arguments)
        record.calls.append((name, arguments))
        record.results.append(result)
        return result

    def record_timeout(self, name: str, arguments: Any, text: str) -> None:
        """A call the parent cut off: recorded with its error text, never run again."""
        self.turns[-1].calls.append((name, arguments))
        self.turns[-1].results.append(text)

    def _close(self) -> None:
        if self.open:
            self.turns[-1].snapshot = self.env.snapshot()
            self.open = False

    def next_turn(self) -> dict[str, Any]:
        if not self.open or len(self.turns) >= self.task.num_turns:
            self._close()
            return {"done": True}
        self._close()
        index = len(self.turns)
        self.turns.append(TurnRecord())
        self.open = True
        return {"messages": turn_messages(self.task, index), "tools": self.tools[index]}

    def finish(self, output: Any) -> dict[str, Any]:
        """The verdict (the final text is not part of BFCL's multi-turn check)."""
        self._close()
        truth = replay(self.task, self._classes, self.truth_calls())
        verdict = check(self.task, truth, self.turns)
        detail = "ok" if verdict.valid else f"{verdict.error_type}: {verdict.message}"
        return {"passed": verdict.valid, "detail": detail, "turns": len(self.turns)}

    def truth_calls(self) -> list[list[tuple[str, Any]]]:
        return [
            [(c["name"], c["arguments"]) for c in turn]
            for turn in ground_truth_calls(self.task, self._docs)
        ]
