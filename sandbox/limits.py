"""Resource limits of one sandbox container, mirroring the policy's ``[sandbox]`` table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Same names and defaults as ``[sandbox]`` in the policy (``daemon/policy.py``)."""

    memory_mb: int = 512
    cpus: float = 1.0
    pids: int = 64
    tmpfs_mb: int = 64
    wall_s: float = 180.0
    output_kb: int = 256

    def __post_init__(self) -> None:
        for name in ("memory_mb", "cpus", "pids", "tmpfs_mb", "wall_s", "output_kb"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"sandbox limit {name} must be positive, got {value!r}")
        if self.memory_mb < 32:
            raise ValueError(f"sandbox limit memory_mb must be at least 32, got {self.memory_mb}")
        if self.pids < 8:
            raise ValueError(f"sandbox limit pids must be at least 8, got {self.pids}")

    @property
    def output_bytes(self) -> int:
        return self.output_kb * 1024
