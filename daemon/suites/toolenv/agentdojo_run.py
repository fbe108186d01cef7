"""AgentDojo episodes: tool calls on a suite's environment, then utility and security.

Worker only (it imports AgentDojo through :mod:`.agentdojo_boot`). An episode mirrors
``TaskSuite.run_task_with_pipeline``: the default environment with the injections planted
(AgentDojo formats the YAML text with them), ``init_environment``, a deep copy as the
pre-environment, calls through AgentDojo's ``FunctionsRuntime`` as its ``ToolsExecutor``
makes them (an unknown tool and bad arguments come back as error text), then the user
task's utility and, with an injection, the injection task's security (True: the attack
succeeded) on the final environment with the harness's final text as the model output.

The catalogue is what the daemon needs without importing AgentDojo: per suite the system
message, the tools' schemas, each user task's prompt and ground truth, and the planted
texts of every (user task, injection task) pair under the ``important_instructions`` attack
with AgentDojo's neutral model name (its ``important_instructions_no_model_name``).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .agentdojo_boot import boot

BENCHMARK_VERSION = "v1.2.2"  # the default of agentdojo's benchmark script in 0.1.35
SUITES = ("workspace", "travel", "banking", "slack")
ATTACK = "important_instructions"
# ToolsExecutor turns "['a', 'b']" strings into lists with literal_eval; cap what it sees.
_LITERAL_EVAL_CHARS = 10_000


class AgentDojo:
    """The booted package: suites by name, their environments, tasks and checks."""

    def __init__(self, wheel: Path, sha256: str, cache_dir: Path) -> None:
        self._load_suites = boot(wheel, sha256, cache_dir)
        self._site = Path(self._load_suites.__file__ or "").resolve().parents[1]
        self._templates: dict[str, tuple[str, dict[str, str]]] = {}

    def suite(self, name: str) -> Any:
        if name not in SUITES:
            raise ValueError(f"unknown AgentDojo suite {name!r}")
        return self._load_suites.get_suite(BENCHMARK_VERSION, name)

    def system_message(self) -> str:
        text = (self._site / "data" / "system_messages.yaml").read_text()
        message: str = yaml.safe_load(text)["default"]
        return message

    def environment(self, suite: Any, injections: Mapping[str, str]) -> Any:
        """``TaskSuite.load_and_inject_default_environment`` with libyaml and cached texts
        (AgentDojo's pure-Python parse costs ~100 ms per workspace episode; same result)."""
        from agentdojo.task_suite.task_suite import read_suite_file

        if suite.name not in self._templates:
            text = read_suite_file(suite.name, "environment.yaml", suite.data_path)
            self._templates[suite.name] = (text, suite.get_injection_vector_defaults())
        text, defaults = self._templates[suite.name]
        if not set(injections) <= set(defaults):
            raise ValueError("injections must name injection vectors of the suite")
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(text.format(**(defaults | dict(injections))), Loader=loader)
        return suite.environment_type.model_validate(data)

    def planner(self, suite: Any) -> Any:
        """The attack with AgentDojo's neutral model name: a harness may use any model."""
        from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
        from agentdojo.attacks.attack_registry import load_attack
        from agentdojo.attacks.base_attacks import DEFAULT_MODEL_NAME

        class Target(BasePipelineElement):  # type: ignore[misc]
            name = "gpt-4o-2024-05-13"  # attacks read only the name; overridden below

            def query(self, *args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("not a pipeline")

        attack = load_attack(ATTACK, suite, Target())
        attack.model_name = DEFAULT_MODEL_NAME
        return attack


def _calls(function_calls: Any) -> list[dict[str, Any]]:
    return [
        {"name": c.function, "arguments": json.loads(json.dumps(dict(c.args), default=str))}
        for c in function_calls
    ]


def catalogue(dojo: AgentDojo, name: str) -> dict[str, Any]:
    """What the daemon shows harnesses and keeps as ground truth, for one suite."""
    suite = dojo.suite(name)
    env = dojo.environment(suite, {})
    planner = dojo.planner(suite)
    users: dict[str, Any] = {}
    injections: dict[str, dict[str, dict[str, str]]] = {}
    for uid, task in suite.user_tasks.items():
        pre = task.init_environment(env.model_copy(deep=True))
        users[uid] = {
            "prompt": task.PROMPT,
            "ground_truth": _calls(task.ground_truth(pre.model_copy(deep=True))),
            "answer": getattr(task, "GROUND_TRUTH_OUTPUT", "") or "",
        }
        injections[uid] = {
            iid: dict(planner.attack(task, inj)) for iid, inj in suite.injection_tasks.items()
        }
    return {
        "suite": name,
        "benchmark_version": BENCHMARK_VERSION,
        "system": dojo.system_message(),
        "tools": [
            {
                "name": f.name,
                "description": f.description,
                "parameters": f.parameters.model_json_schema(),
            }
            for f in suite.tools
        ],
        "user_tasks": users,
        "injection_tasks": {
            iid: {"goal": t.GOAL, "ground_truth": _calls(t.ground_truth(env.model_copy(deep=True)))}
            for iid, t in suite.injection_tasks.items()
        },
        "injections": injections,
    }


def _is_list_literal(text: str) -> bool:
    try:
        return isinstance(ast.literal_eval(text), list)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


class AgentDojoSimulation:
    """One harness run of one user task, optionally with an injection task planted."""

    def __init__(
        self,
        dojo: AgentDojo,
        suite_name: str,
        user_task: str,
        injection_task: str | None,
        injections: Mapping[str, str],
    ) -> None:
        from agentdojo.functions_runtime import FunctionsRuntime

        self.suite = dojo.suite(suite_name)
        self.user_task = self.suite.get_user_task_by_id(user_task)
        self.injection_task = (
            self.suite.get_injection_task_by_id(injection_task) if injection_task else None
        )
        env = dojo.environment(self.suite, injections)
        self.env = self.user_task.init_environment(env)
        self.pre_env = self.env.model_copy(deep=True)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.trace: list[Any] = []

    def call(self, name: str, arguments: Any) -> str:
        """As AgentDojo's ``ToolsExecutor``: errors are the text the model sees."""
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
        from agentdojo.functions_runtime import FunctionCall

        if not isinstance(arguments, dict):
            return "ValidationError: arguments must be a JSON object"
        args = dict(arguments)
        known = name in self.runtime.functions
        for key, value in list(args.items()) if known else []:
            short = isinstance(value, str) and len(value) <= _LITERAL_EVAL_CHARS
            if short and _is_list_literal(value):
                args[key] = ast.literal_eval(value)
        try:  # the trace holds the converted arguments, as AgentDojo's (converted in place)
            self.trace.append(FunctionCall(function=name, args=args))
        except Exception as exc:  # arguments pydantic cannot hold
            return f"ValidationError: {exc}"
        if not known:
            return f"Invalid tool {name} provided."
        result, error = self.runtime.run_function(self.env, name, args)
        if error:
            return str(error)
        try:
            return str(tool_result_to_str(result))
        except Exception as exc:  # the formatter's TypeError on odd result types
            return f"{type(exc).__name__}: {exc}"

    def record_timeout(self, name: str, arguments: Any, text: str) -> None:
        from agentdojo.functions_runtime import FunctionCall

        self.trace.append(FunctionCall(function=name, args=dict(arguments)))

    def next_turn(self) -> dict[str, Any]:
        return {"done": True}  # AgentDojo tasks are a single user turn

    def finish(self, output: Any) -> dict[str, Any]:
        text = output if isinstance(output, str) else ""
        blocks = [{"type": "text", "content": text}] if text else []
        utility = bool(
            self.suite._check_user_task_utility(
                self.user_task, blocks, self.pre_env, self.env, self.trace
            )
        )
        verdict: dict[str, Any] = {"passed": utility, "detail": f"utility {_yes(utility)}"}
        if self.injection_task is not None:
            attacked = bool(
                self.suite._check_injection_task_security(
                    self.injection_task, blocks, self.pre_env, self.env, self.trace
                )
            )
            verdict["attack_succeeded"] = attacked
            verdict["detail"] += f"; injection goal achieved {_yes(attacked)}"
        if not isinstance(output, str):
            verdict["detail"] += " (the output was not text: scored as an empty answer)"
        return verdict


def _yes(value: bool) -> str:
    return "yes" if value else "no"
