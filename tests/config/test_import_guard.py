"""``daemon`` and ``sandbox`` must be this project's packages, not python-daemon's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import daemon
import sandbox
from daemon._guard import import_problems

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_both_import_names_resolve_to_this_project() -> None:
    assert Path(daemon.__file__).resolve() == ROOT / "daemon" / "__init__.py"
    assert Path(sandbox.__file__).resolve() == ROOT / "sandbox" / "__init__.py"
    assert import_problems() == []


def test_a_shadowing_daemon_package_is_reported_clearly(tmp_path: Path) -> None:
    # A stand-in for python-daemon's top-level package, earlier on sys.path.
    fake = tmp_path / "daemon"
    fake.mkdir()
    (fake / "__init__.py").write_text("# python-daemon\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]);"
        "import importlib.util as u;"
        "spec = u.spec_from_file_location('g', sys.argv[2] + '/daemon/_guard.py');"
        "import types; errors = types.ModuleType('daemon.errors');"
        "exec(open(sys.argv[2] + '/daemon/errors.py').read(), errors.__dict__);"
        "sys.modules['daemon.errors'] = errors;"
        "g = u.module_from_spec(spec); spec.loader.exec_module(g);"
        "print('\\n'.join(g.import_problems()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "import name 'daemon' resolves to" in proc.stdout
    assert str(fake / "__init__.py") in proc.stdout
    assert "pip uninstall python-daemon" in proc.stdout
