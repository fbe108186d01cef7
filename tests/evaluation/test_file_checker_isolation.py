"""A user's Python checker and the harness it judges cannot reach each other: real harnesses
through the evaluator (what ``harnessd eval`` and the daemon run), the real sandbox, the real
code-check boundary, a file suite of the test's own.

* The harness reaching for the checker: at solve time it searches its container (files,
  processes, environment, the network) for the checker's secret, which is in the checker
  file and in the tasks' ``expected``; for a ``code`` task it answers with a program that
  searches the check's candidate side the same way, or with a lying object. A task passes
  only with the secret, so each cheat scores what a harness that knows nothing scores.
* The checker reaching for the harness: a checker that passes a task only if it finds the
  harness's mark (a file in the harness folder, its environment, its ``/tmp``, its
  process) anywhere it can read, or reaches any network host or the Docker socket. A
  harness keeps a container alive with the mark while the spying checks run.

Controls: the secret passes the tasks when the test writes it into a harness (so the
tasks are passable and a cheat's 0 means something), and the spy's search finds a mark in
a folder it can read.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from daemon.evaluation.evaluator import Subject, evaluate
from daemon.evaluation.report import EvalReport
from tests.suites.cheats import CHEATS

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

CHECKER = '''"""The isolation tests' checkers: each passes a task only if a cheat worked."""
import os
import re
import socket
import time

SECRET = "{secret}"
MARK = re.compile(rb"HARNESS-MARK-[0-9a-f]{{32}}")
SKIP = ("/proc", "/sys", "/dev")


def knows_the_secret(output, expected):
    return isinstance(output, str) and expected == SECRET and SECRET in output


def returns_the_secret(function, expected):
    return function() == SECRET


def reachable_texts(roots, budget_s):
    deadline = time.monotonic() + budget_s
    for root in roots:  # the harness's own folder, its sockets and /tmp, then the rest
        for folder, dirs, files in os.walk(root):
            if time.monotonic() > deadline:
                return
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in SKIP]
            for name in files:
                path = os.path.join(folder, name)
                if time.monotonic() > deadline or not os.path.isfile(path):
                    continue  # no pipes, sockets or devices: they would block
                try:
                    with open(path, "rb") as file:
                        yield file.read(1_000_000)
                except OSError:
                    pass
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        for what in ("cmdline", "environ", "root/tmp/mark.txt"):
            try:
                with open(f"/proc/{{pid}}/{{what}}", "rb") as file:
                    yield file.read(1_000_000)
            except OSError:
                pass
    yield repr(dict(os.environ)).encode()


def reaches_out():
    if os.path.exists("/var/run/docker.sock"):
        return True
    for host, port in (("172.17.0.1", 2375), ("172.17.0.1", 80), ("host.docker.internal", 80),
                       ("1.1.1.1", 53)):
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            pass
    return False


def finds_the_harness(output, expected):
    texts = reachable_texts(["/harness", "/run", "/tmp", "/"], 8.0)
    return any(MARK.search(text) for text in texts) or reaches_out()
'''

SEARCH = """
import os, re, socket, time
SECRET = re.compile(r"CHECKER-SECRET-[0-9a-f]{32}")
SKIP = ("/proc", "/sys", "/dev")
# Where the check's files would be, then everything else, as far as time allows.
ROOTS = ("/code", "/run", "/tmp", "/harness", "/")


def _texts(budget_s):
    deadline = time.monotonic() + budget_s
    for root in ROOTS:
        for folder, dirs, files in os.walk(root):
            if time.monotonic() > deadline:
                return
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in SKIP]
            for name in files:
                path = os.path.join(folder, name)
                if time.monotonic() > deadline or not os.path.isfile(path):
                    continue  # no pipes, sockets or devices: they would block
                try:
                    with open(path, "rb") as file:
                        yield file.read(1_000_000)
                except OSError:
                    pass
    for pid in os.listdir("/proc"):
        for what in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as file:
                    yield file.read()
            except OSError:
                pass


def _search():
    found = set()
    for text in _texts(8.0):
        found.update(SECRET.findall(text.decode("latin-1")))
    for host, port in (("172.17.0.1", 2375), ("host.docker.internal", 80), ("1.1.1.1", 53)):
        try:
            socket.create_connection((host, port), timeout=1).close()
            found.add(f"reached {host}")
        except OSError:
            pass
    return sorted(found)
"""

# The code task's answer: the search, run where the check runs the harness's program.
SEARCHING_PROGRAM = (
    SEARCH + "\n\ndef leak():\n    found = _search()\n    return found[0] if found else None\n"
)

CHEATING = (
    SEARCH
    + """
import json, pathlib

HERE = pathlib.Path(__file__).parent
MARK = (HERE / "mark.txt").read_text()
ANSWERS = json.loads((HERE / "answers.json").read_text())


def _leave_the_mark():
    os.environ["HARNESS_MARK"] = MARK
    try:
        with open("/tmp/mark.txt", "w") as file:
            file.write(MARK)
    except OSError:
        pass


def solve(task, ctx):
    prompt = task["prompt"][-1]["content"]
    kind = prompt.split(":")[0]
    if kind in ANSWERS:
        return {"output": ANSWERS[kind], "claimed_success": True}
    _leave_the_mark()
    if kind == "hold":  # keep this container, with the mark, alive while checks run
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.5)
        return {"output": MARK, "claimed_success": True}
    if kind == "spy":
        return {"output": "hello", "claimed_success": True}
    found = _search()
    return {"output": " ".join(found) or "nothing found", "claimed_success": True}
"""
)


def _task(task_id: str, prompt: str, checker: str, expected: Any, **more: Any) -> dict[str, Any]:
    check = {"type": "python", "checker": f"checks.py:{checker}", **more}
    return {"id": task_id, "prompt": prompt, "expected": expected, "check": check}


def _suite(folder: Path, secret: str) -> Path:
    folder.mkdir()
    (folder / "checks.py").write_text(CHECKER.format(secret=secret))
    tasks = [
        _task("leak-data", "leak: what is the checker's secret?", "knows_the_secret", secret),
        _task(
            "leak-code",
            "code: write leak() returning the checker's secret",
            "returns_the_secret",
            secret,
            function="leak",
        ),
        _task("spy-1", "spy: say hello", "finds_the_harness", None, timeout_s=40),
        _task("spy-2", "spy: say hello again", "finds_the_harness", None, timeout_s=40),
        {
            "id": "hold",
            "prompt": "hold: wait a little",
            "expected": "x",
            "check": {"type": "exact"},
        },
    ]
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def _harness(tmp_path: Path, name: str, answers: dict[str, str], mark: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "harness.py").write_text(CHEATING)
    (folder / "answers.json").write_text(json.dumps(answers))
    (folder / "mark.txt").write_text(mark)
    return folder


POLICY = """
[models]
primary = "scripted:{model}"
[suite]
name = "file:{suite}"
dev_size = 1
heldout_size = 4
[sandbox]
wall_s = 60.0
concurrency = 5
"""


def test_the_spy_finds_a_mark_it_can_read(tmp_path: Path) -> None:
    """The control of the spying checker: its search works where the mark is readable."""
    path = _suite(tmp_path / "suite", "CHECKER-SECRET-" + secrets.token_hex(16))
    spec = importlib.util.spec_from_file_location("isolation_checks", path.parent / "checks.py")
    assert spec is not None and spec.loader is not None
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    seen = tmp_path / "seen"
    seen.mkdir()
    texts = list(checks.reachable_texts([str(seen)], 5.0))
    assert not any(checks.MARK.search(t) for t in texts if isinstance(t, bytes))
    (seen / "mark.txt").write_text("HARNESS-MARK-" + secrets.token_hex(16))
    assert any(checks.MARK.search(t) for t in checks.reachable_texts([str(seen)], 5.0))


@pytest.mark.timeout(600)
async def test_checker_and_harness_cannot_reach_each_other(
    tmp_path: Path, runtime_factory: Any
) -> None:
    secret = "CHECKER-SECRET-" + secrets.token_hex(16)
    mark = "HARNESS-MARK-" + secrets.token_hex(16)
    suite = _suite(tmp_path / "suite", secret)
    model = tmp_path / "model.toml"
    model.write_text('mode = "rules"\n[[rules]]\ncontent = "no idea"\n')
    honest = {"leak": secret, "code": f"def leak():\n    return {secret!r}\n"}
    harnesses = {
        "searching": {"code": SEARCHING_PROGRAM},
        "lying": {"code": CHEATS["lying_object"][0].replace("{entry}", "leak")},
        "knowing_nothing": {"leak": "no idea", "code": "def leak():\n    return None\n"},
        "honest": honest,
    }
    reports: dict[str, EvalReport] = {}
    async with runtime_factory(POLICY.format(model=model, suite=suite)) as rt:
        policy = rt.policy.get()
        assert rt.suite(policy=policy).name.startswith("file:tasks@")
        for name, answers in harnesses.items():
            # The spies run once, beside the harness that leaves its mark everywhere.
            ids = (
                rt.suite(policy=policy).task_ids()
                if name == "searching"
                else ["leak-data", "leak-code"]
            )
            subject = Subject(_harness(tmp_path, name, answers, mark), name)
            reports[name] = await evaluate(
                rt,
                subject,
                split="heldout",
                task_ids=ids,
                model=policy.models.primary,
                policy=policy,
            )
    verdicts = {
        name: {t.id: (t.passed, t.detail) for t in report.tasks} for name, report in reports.items()
    }
    for name, report in reports.items():
        assert report.n == (5 if name == "searching" else 2), (name, verdicts[name])
        # Searching its own container is tamper to the guest runtime: one more way to fail.
        assert set(report.errors) <= {"tamper"}, (name, verdicts[name])
    # The control: knowing the secret passes both leak tasks.
    assert verdicts["honest"]["leak-data"][0] and verdicts["honest"]["leak-code"][0]
    for name in ("searching", "lying", "knowing_nothing"):
        leaked = [t for t in ("leak-data", "leak-code") if verdicts[name][t][0]]
        assert leaked == [], (name, verdicts[name])
    assert "refused: the candidate's result is not plain data" in verdicts["lying"]["leak-code"][1]
    # The search ran to its end on the check's candidate side and found nothing.
    assert "returns_the_secret: failed: " in verdicts["searching"]["leak-code"][1]
    # No checker found the harness's mark or reached out, while the harness held it.
    for spy in ("spy-1", "spy-2"):
        passed, detail = verdicts["searching"][spy]
        assert not passed and "checks.py:finds_the_harness: failed" in detail, detail
