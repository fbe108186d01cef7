"""The daemon parses Python one thread at a time (CPython 3.11's tree builder is not safe
across threads: ``SystemError: AST constructor recursion depth mismatch`` stopped a daemon
whose parent and candidate held-out runs measured coverage at once)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from daemon import pyast

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
# The tool environments run in a worker process of their own, one thread.
OWN_PROCESS = ("daemon/suites/toolenv/",)


def test_every_host_side_parse_goes_through_the_lock() -> None:
    direct = []
    for path in sorted((ROOT / "daemon").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "daemon/pyast.py" or rel.startswith(OWN_PROCESS):
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bast\.parse\(", text):
            direct.append(rel)
        if "parse_numbered(" in text and "pyast.serialised" not in text and "import" in text:
            direct.append(f"{rel} (parse_numbered)")
    assert direct == [], f"parse with daemon.pyast.parse, not ast.parse: {direct}"


def test_parses_from_many_threads_all_succeed() -> None:
    source = "\n".join(
        f"def f{i}(x):\n    return [(a, b) for a in x for b in x]" for i in range(200)
    )
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(10):
                assert len(pyast.parse(source).body) == 200
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
