"""``harnessd doctor`` names each problem and its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit


def _doctor(tmp_path: Path, asset_cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "harnessd.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\ncache_dir = "{asset_cache}"\n')
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSD_")} | env
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(cfg), "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
        check=False,
    )


def test_doctor_with_engine_unreachable_names_problem_and_fix(
    tmp_path: Path, asset_cache: Path
) -> None:
    proc = _doctor(tmp_path, asset_cache, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    engine = next(i for i, line in enumerate(lines) if "docker engine" in line)
    assert lines[engine].startswith("FAIL docker engine: no Docker engine answers at unix://")
    assert "fix: scripts/docker-engine" in lines[engine + 1]
    assert any(line.startswith("ok   config:") for line in lines)


def test_doctor_reports_bad_config_with_file_and_key(tmp_path: Path, asset_cache: Path) -> None:
    cfg = tmp_path / "harnessd.toml"
    cfg.write_text("log_levle = 'info'\n")
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(cfg), "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"},
        check=False,
    )
    assert proc.returncode == 1
    assert f"FAIL config: {cfg}: unknown key 'log_levle'" in proc.stdout
