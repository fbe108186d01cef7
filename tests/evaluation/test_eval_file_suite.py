"""``harnessd eval seeds/minimal --suite file:tasks.jsonl`` as a person runs it: the real CLI,
the embedded model, the real sandbox; and a malformed file refused before anything runs."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "suites" / "example"
# One task of each check type, from the example suite (the model solves some of them).
PICKS = {
    "exact.jsonl": ["capital-france"],
    "number.jsonl": ["add-0"],
    "regex.jsonl": ["greet-hello"],
    "calls.jsonl": ["weather-paris"],
    "python.jsonl": ["palindrome"],
}


def _harnessd(tmp_path: Path, asset_cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "harnessd.toml"
    if not config.exists():
        policy = tmp_path / "policy.toml"
        # One task at a time, with time to spare: the embedded model shares the machine.
        policy.write_text(
            '[models]\nprimary = "local:smollm2-135m"\n[sandbox]\nconcurrency = 1\nwall_s = 300.0\n'
        )
        config.write_text(
            f'state_dir = "{tmp_path / "state"}"\ncache_dir = "{asset_cache}"\n'
            f'policy = "{policy}"\n'
        )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
        cwd=tmp_path,
    )


def _tasks_file(folder: Path) -> list[dict[str, Any]]:
    tasks = []
    for name, ids in PICKS.items():
        for line in (EXAMPLE / name).read_text().splitlines():
            task = json.loads(line)
            if task["id"] in ids:
                tasks.append(task)
    (folder / "checks.py").write_text((EXAMPLE / "checks.py").read_text())
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (folder / "seeds").symlink_to(ROOT / "seeds")
    return tasks


def _first_number(text: str) -> float | None:
    match = re.search(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?", text)
    return float(match.group()) if match else None


def _calls_ok(output: Any, expected: list[dict[str, Any]]) -> bool:
    if not isinstance(output, list) or len(output) != len(expected):
        return False
    for call, want in zip(output, expected, strict=True):
        if call.get("name") != want["name"]:
            return False
        for param, allowed in want["arguments"].items():
            if param not in call["arguments"]:
                if "" not in allowed:
                    return False
            elif call["arguments"][param] not in allowed:
                return False
        if set(call["arguments"]) - set(want["arguments"]):
            return False
    return True


def _rule(task: dict[str, Any], output: Any, checks: Any) -> bool:
    """The issue's check rules, written out again independently of the suite's code."""
    kind, expected = task["check"]["type"], task["expected"]
    text = output if isinstance(output, str) else json.dumps(output)
    if kind == "exact":
        got, want = text.strip(), str(expected).strip()
        if task["check"].get("casefold"):
            got, want = got.casefold(), want.casefold()
        return got == want
    if kind == "number":
        value = _first_number(text)
        tol = task["check"].get("tol", 1e-6)
        return value is not None and math.isfinite(value) and abs(value - expected) <= tol
    if kind == "regex":
        return re.search(expected, text) is not None
    if kind == "calls":
        return _calls_ok(output, expected)
    function = task["check"]["checker"].split(":")[1]
    return getattr(checks, function)(output, expected) is True


@pytest.mark.unit
def test_a_malformed_file_is_refused_with_one_line(tmp_path: Path, asset_cache: Path) -> None:
    _tasks_file(tmp_path)
    lines = (tmp_path / "tasks.jsonl").read_text().splitlines()
    lines[2] = lines[2].replace('"check": {"type": "regex"}', '"check": {"type": "regexp"}')
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    r = _harnessd(tmp_path, asset_cache, "eval", "seeds/minimal", "--suite", "file:tasks.jsonl")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"harnessd: error: {tmp_path / 'tasks.jsonl'}:3: key 'check.type': expected one of "
        'exact, number, regex, calls, python, got "regexp"'
    ], r.stderr
    assert not (tmp_path / "state" / "state.db").exists()  # nothing ran
    r = _harnessd(tmp_path, asset_cache, "suite", "check", "tasks.jsonl")
    assert r.returncode == 2 and ":3: key 'check.type'" in r.stderr


@pytest.mark.docker
@pytest.mark.model
@pytest.mark.timeout(600)
def test_eval_runs_a_file_suite_on_the_embedded_model(tmp_path: Path, asset_cache: Path) -> None:
    tasks = {t["id"]: t for t in _tasks_file(tmp_path)}
    r = _harnessd(
        tmp_path, asset_cache, "eval", "seeds/minimal", "--suite", "file:tasks.jsonl", "--json"
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert report["suite"].startswith("file:tasks@") and report["split"] == "all"
    assert [t["id"] for t in report["tasks"]] == list(tasks)
    spec = importlib.util.spec_from_file_location("example_checks", EXAMPLE / "checks.py")
    assert spec is not None and spec.loader is not None
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    judged = 0
    for result in report["tasks"]:
        # A task that ended early (e.g. out of time on a loaded machine) has no output, and
        # the rules fail it like any output they do not accept.
        output = result["output"]
        if isinstance(output, str) and output.endswith("more characters]"):
            continue  # a preview only: the rule cannot be re-applied to it here
        assert result["passed"] is _rule(tasks[result["id"]], output, checks), result
        judged += 1
    assert judged >= 3, report["tasks"]
