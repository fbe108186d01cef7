"""Optional extras: what needs one that is missing stops with a message naming the extra and
the command that installs it, before anything else runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.config import extras
from daemon.errors import SetupError
from daemon.store import Store
from daemon.suites.agentdojo import AgentDojoSuite
from daemon.suites.bfcl_multi_turn import BfclMultiTurnSuite

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` unimportable, as if their distribution were not installed."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_the_installed_extras_are_complete() -> None:
    # scripts/setup installs every extra: the set the tests run with has them all.
    assert extras.missing("toolenv") == [] and extras.missing("report") == []


def test_a_missing_extra_is_named_with_its_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "deepdiff")
    assert extras.missing("toolenv") == ["deepdiff"]
    with pytest.raises(SetupError) as info:
        extras.require("toolenv", "the tool environments")
    assert str(info.value) == (
        "the tool environments needs the optional dependencies 'toolenv' (missing: deepdiff): "
        "install them with \"pip install -c scripts/constraints.txt -e '.[toolenv]'\" in the "
        "harnessd checkout (scripts/setup installs every extra)"
    )
    extras.require("toolenv", "BFCL", ("mpmath",))  # only what is asked for is checked


def test_tool_suites_stop_at_load_before_reading_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    nowhere = tmp_path / "no-cache"  # reading it would fail differently
    _hide(monkeypatch, "mpmath")
    with pytest.raises(SetupError, match=r"BFCL multi-turn.*'toolenv' \(missing: mpmath\)"):
        BfclMultiTurnSuite.load(["multi_turn_base"], nowhere)
    _hide(monkeypatch, "yaml", "email_validator")
    with pytest.raises(SetupError, match=r"AgentDojo.*\(missing: yaml, email_validator\)"):
        AgentDojoSuite.load("banking", nowhere, injections=False)
    assert not nowhere.exists()


def test_harnessd_report_without_matplotlib_names_the_report_extra(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    Store(state / "state.db").close()
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from daemon.cli import main\n"
        f"sys.exit(main(['report', '--out', {str(tmp_path / 'r.html')!r}]))\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "HARNESSD_STATE_DIR": str(state),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "needs the optional dependencies 'report' (missing: matplotlib)" in proc.stderr
    assert "-e '.[report]'" in proc.stderr
    assert not (tmp_path / "r.html").exists()
