"""The report's summary and argument helpers, light enough for every ``harnessctl`` start
(the plotting modules import matplotlib, which only ``report`` itself needs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.errors import ConfigError


@dataclass(frozen=True)
class ReportSummary:
    path: str
    bytes: int
    versions: list[str]
    candidates: int
    plots: list[str]
    sequential_candidate: int | None
    # Each promotion's replication beside its test, one line per candidate (``cN: ...``).
    replications: list[str] = field(default_factory=list)


def candidate_arg(ref: str | None) -> int | None:
    """``--candidate c12`` (or ``12``) as a candidate id; ConfigError naming the flag."""
    if ref is None:
        return None
    digits = ref.removeprefix("c")
    if not digits.isdigit():
        raise ConfigError(f"--candidate {ref!r}: give a candidate like c12")
    return int(digits)


def summary_line(summary: dict[str, object]) -> str:
    """What both ``harnessd report`` and ``harnessctl report`` print for people."""
    versions = summary.get("versions") or []
    assert isinstance(versions, list)
    size = int(str(summary.get("bytes", 0))) // 1024
    seq = summary.get("sequential_candidate")
    tail = f", sequential test of c{seq}" if seq is not None else ""
    return (
        f"wrote {summary.get('path')} ({size} KiB): {len(versions)} versions, "
        f"{summary.get('candidates')} candidates{tail}; open it in any browser (no network needed)"
    )
