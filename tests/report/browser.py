"""Headless Chromium for the report tests: install it when missing, load a page, read back
the DOM it built and a screenshot of what it drew."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# The flags this machine needs: no sandbox as root, and nothing that reaches for a network.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def find_chromium() -> Path:
    found = shutil.which("chromium")
    if found:
        return Path(found)
    if os.geteuid() != 0:
        raise RuntimeError(
            "the report tests need Debian's chromium: run 'apt-get install -y chromium' as root"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-qq", "chromium"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(install, env=env, check=True, capture_output=True)
    found = shutil.which("chromium")
    if not found:
        raise RuntimeError("apt-get installed chromium, yet no 'chromium' is on PATH")
    return Path(found)


@dataclass(frozen=True)
class Loaded:
    dom: str  # the serialised DOM after parsing (what the page became, not its source)
    screenshot: Path


def load(chromium: Path, page: Path, work: Path, height: int = 4000) -> Loaded:
    """Open ``page`` twice in a fresh profile each: once for the DOM, once for a screenshot."""
    url = page.resolve().as_uri()

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(dir=work) as profile:
            return subprocess.run(
                [str(chromium), *FLAGS, f"--user-data-dir={profile}", *extra, url],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
                cwd=work,
            )

    dom = run("--dump-dom").stdout
    shot = work / "report.png"
    run(f"--screenshot={shot}", f"--window-size=1200,{height}")
    return Loaded(dom, shot)
