"""Container labels: how the daemon finds (and reaps) the containers it started."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

INSTANCE = "harnessd.instance"
ROLE = "harnessd.role"


def instance_id(state_dir: Path) -> str:
    """A stable id for one daemon (or test run), derived from its state directory.

    Two daemons with different state dirs never reap each other's containers.
    """
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]


def instance_labels(instance: str, **extra: str) -> dict[str, str]:
    return {INSTANCE: instance, **{f"harnessd.{k}": v for k, v in extra.items()}}


def require_instance(labels: Mapping[str, str]) -> None:
    """Every container must be reapable, so an unlabelled run is a programming error."""
    if not labels.get(INSTANCE):
        raise ValueError(f"container labels must include {INSTANCE!r} (see sandbox.labels)")


def owner_gone(pid: int) -> bool:
    """Whether the process an instance label names (a standalone eval, a Ray node's worker)
    has ended, so that its containers and run dirs are orphans to reap."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False
