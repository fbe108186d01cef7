"""The ``python`` rule of file suites: the user's own checker, behind the code-check boundary.

``"check": {"type": "python", "checker": "checks.py:is_palindrome"}`` names a function in a
Python file (relative to the suite file's folder; one self-contained file, standard library
only). It is called as ``fn(output, expected)`` and the task passes only when it returns
``True`` (anything else, or an exception, fails). With ``"function": "name"`` the task is a
``code`` task: the output is Python source defining ``name``, and the checker gets that
function instead of the output (``fn(candidate, expected)``), each call crossing the
boundary.

Neither the checker nor the output ever runs in the daemon or in the harness's container.
Both go to a code check (:mod:`sandbox.codecheck`): the checker runs on its trusted side,
and the output reaches it only through the strict plain-data codec: in data mode a
generated program on the candidate side returns it, in code mode the harness's program
answers the calls. On the host, the checker file is only read and compiled (syntax), never
imported.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon import pyast
from daemon.suites.base import CodeCheck, CodeChecker
from daemon.suites.filerules import BadKey, is_number, shown
from daemon.tasks import CheckResult

DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 120.0
_OUTPUT_FUNCTION = "harnessd_output"

# The candidate side in data mode: the output, decoded from JSON text, returned on request.
_DATA_PROGRAM = """\
import json
_OUTPUT = json.loads({text!r})


def {function}():
    return _OUTPUT
"""

# The trusted side: the user's checker in a namespace of its own, called by the facility's
# ``check`` with the candidate (a proxy function) or the value it returns.
_WRAPPER = """\
import json as _json

_namespace = {{"__name__": "harnessd_user_checker"}}
exec(compile({source!r}, {filename!r}, "exec"), _namespace)
_user_check = _namespace[{function!r}]
_expected = _json.loads({expected!r})


def check(candidate):
    if _user_check({argument}, _expected) is not True:
        raise AssertionError("the checker did not return True")
"""


@dataclass(frozen=True)
class Python:
    path: Path
    source: str
    function: str
    entry_point: str | None  # code mode: the function the output must define
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def label(self) -> str:
        return f"{self.path.name}:{self.function}"

    def code_check(self, output: Any, expected: Any) -> CodeCheck:
        if self.entry_point is None:
            program = _DATA_PROGRAM.format(text=json.dumps(output), function=_OUTPUT_FUNCTION)
            function, argument = _OUTPUT_FUNCTION, "candidate()"
        else:
            program, function, argument = output, self.entry_point, "candidate"
        wrapper = _WRAPPER.format(
            source=self.source,
            filename=self.path.name,
            function=self.function,
            expected=json.dumps(expected),
            argument=argument,
        )
        return CodeCheck(
            program=program, function=function, checker_source=wrapper, timeout_s=self.timeout_s
        )

    async def check(self, output: Any, expected: Any, checker: CodeChecker) -> CheckResult:
        if self.entry_point is not None and (not isinstance(output, str) or not output.strip()):
            return CheckResult(passed=False, detail="output is not Python source text")
        verdict = await checker.check_code(self.code_check(output, expected))
        if verdict.passed:
            return CheckResult(passed=True, detail="ok")
        return CheckResult(passed=False, detail=f"{self.label}: {verdict.kind}: {verdict.detail}")


def _defines(source: str, function: str) -> bool:
    tree = pyast.parse(source)
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
        for node in tree.body
    )


def read_checker(path: Path, sources: dict[Path, str]) -> str:
    """The checker file's text, read once per suite; its syntax checked, nothing run."""
    if path in sources:
        return sources[path]
    if path.suffix != ".py" or not path.is_file():
        raise BadKey(
            "check.checker",
            f"{path} is not a Python file (paths resolve against the suite file's folder)",
        )
    source = path.read_text(encoding="utf-8")
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise BadKey("check.checker", f"{path} line {exc.lineno}: {exc.msg}") from None
    sources[path] = source
    return source


def parse_python_rule(check: dict[str, Any], base: Path, sources: dict[Path, str]) -> Python:
    allowed = {"type", "checker", "function", "timeout_s"}
    for key in check:
        if key not in allowed:
            raise BadKey(
                f"check.{key}",
                f"unknown key for a 'python' check (allowed: {', '.join(sorted(allowed))})",
            )
    spec = check.get("checker")
    file, sep, function = spec.rpartition(":") if isinstance(spec, str) else ("", "", "")
    if not sep or not file or not function.isidentifier():
        raise BadKey("check.checker", f"expected 'path/to/check.py:function', got {shown(spec)}")
    path = (base / file).resolve()
    source = read_checker(path, sources)
    if not _defines(source, function):
        raise BadKey("check.checker", f"{path} defines no top-level function {function!r}")
    entry = check.get("function")
    if entry is not None and (not isinstance(entry, str) or not entry.isidentifier()):
        raise BadKey("check.function", f"expected a Python function name, got {shown(entry)}")
    timeout = check.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not is_number(timeout) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise BadKey(
            "check.timeout_s",
            f"expected seconds above 0, at most {MAX_TIMEOUT_S:g}, got {shown(timeout)}",
        )
    return Python(path, source, function, entry, float(timeout))
