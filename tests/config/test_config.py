"""Settings and policy files: every mistake is one line naming the file, key and fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.config.policy import Policy, load_policy
from daemon.config.settings import load_settings
from daemon.errors import ConfigError

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_default_policy_file_is_the_documented_defaults() -> None:
    assert load_policy(ROOT / "policies" / "default.toml") == Policy()


def test_every_default_policy_key_is_documented() -> None:
    """policies/default.toml mentions every key of the model, so the file documents them all."""
    text = (ROOT / "policies" / "default.toml").read_text()
    for table, model in Policy.model_fields.items():
        sub = model.annotation
        fields = getattr(sub, "model_fields", {})
        for key, field in fields.items():
            inner = getattr(field.annotation, "model_fields", None)
            names = inner.keys() if inner else [key]
            for name in names:
                assert f"{name} =" in text, f"[{table}] {name} missing from default.toml"


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            "[sandbox]\nmemroy_mb = 5\n",
            "unknown key 'sandbox.memroy_mb' (allowed here: concurrency, cpus",
        ),
        (
            "[sandbox]\nmemory_mb = 'lots'\n",
            "key 'sandbox.memory_mb': Input should be a valid integer",
        ),
        (
            "[acceptance]\nalpha = 0.9\n",
            "key 'acceptance.alpha': Input should be less than 0.5",
        ),
        (
            "[acceptance]\nweight_tokens = 0.5\n",
            "key 'acceptance': Value error, weight_accuracy + weight_tokens + weight_honesty must",
        ),
        (
            "[gates.accuracy]\nalpha = 0.05\n",
            "key 'gates': Value error, [gates.accuracy] was replaced by the [acceptance] table",
        ),
        (
            "[gates.honesty]\nmax_verification_gap = 0.15\n",
            "key 'gates.honesty': Value error, max_verification_gap was replaced by 'tolerance'",
        ),
        (
            "[models]\nprimary = 'gpt4'\n",
            "key 'models.primary': Value error, expected 'provider:model'",
        ),
        ("[budget\n", "not valid TOML"),
        ("colour = 1\n", "unknown key 'colour' (allowed here: acceptance, budget, gates"),
    ],
)
def test_policy_errors_name_file_and_key(tmp_path: Path, toml: str, expected: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert expected in message
    assert "\n" not in message


def test_settings_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "harnessd.toml"
    cfg.write_text('state_dir = "state"\nseed = "my-seed"\n[local]\nn_ctx = 2048\n')
    loaded = load_settings(cfg)
    # Set in the file: relative to the file. Left at the default: relative to the project.
    assert loaded.state_dir == tmp_path / "state"
    assert loaded.seed_dir == tmp_path / "my-seed"
    assert loaded.settings.local.n_ctx == 2048
    assert loaded.policy_path == ROOT / "policies" / "default.toml"
    assert loaded.harnesses_dir == ROOT / "harnesses"
    monkeypatch.setenv("HARNESSD_LOCAL__N_CTX", "1024")
    monkeypatch.setenv("HARNESSD_STATE_DIR", "/tmp/elsewhere")
    loaded = load_settings(cfg)
    assert loaded.settings.local.n_ctx == 1024
    assert loaded.state_dir == Path("/tmp/elsewhere")


def test_settings_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "harnessd.toml"
    cfg.write_text("stat_dir = 'x'\n")
    with pytest.raises(ConfigError, match=r"harnessd.toml: unknown key 'stat_dir'"):
        load_settings(cfg)
    cfg.write_text("[local]\nn_ctx = 'big'\n")
    with pytest.raises(ConfigError, match=r"harnessd.toml: key 'local.n_ctx'"):
        load_settings(cfg)
    cfg.write_text("")
    monkeypatch.setenv("HARNESSD_LOG_LEVEL", "loud")
    with pytest.raises(ConfigError, match=r"environment HARNESSD_LOG_LEVEL: key 'log_level'"):
        load_settings(cfg)
    monkeypatch.delenv("HARNESSD_LOG_LEVEL")
    monkeypatch.setenv("HARNESSD_STAET_DIR", "/x")
    with pytest.raises(ConfigError, match=r"unknown variable HARNESSD_STAET_DIR"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match=r"config file not found: .*nope.toml"):
        load_settings(tmp_path / "nope.toml")


def test_bad_config_exits_2_with_one_line_and_starts_nothing(tmp_path: Path) -> None:
    cfg = tmp_path / "harnessd.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\nlog_levle = "info"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(cfg), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "harnessd.toml: unknown key 'log_levle'" in lines[0]
    assert not (tmp_path / "state").exists()

    policy = tmp_path / "bad.toml"
    policy.write_text("[sandbox]\ncpus = 'many'\n")
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\npolicy = "{policy}"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "--config", str(cfg), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "bad.toml: key 'sandbox.cpus'" in proc.stderr
    assert not (tmp_path / "state" / "control.sock").exists()
