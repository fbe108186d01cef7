"""Shared by the benchmarks: a throw-away state dir over the project's asset cache, a policy
from text, timing and ratio printing, a provider wrapper that records every call, the
machine's load and stolen CPU time, and the BFCL tasks and policy the model benchmarks use.

Benchmarks print ratios of variants measured side by side in one run, never absolute times
against a threshold: the machine may be shared, and only a ratio inside one run means much.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from daemon.config.policy import Policy, parse_policy  # noqa: E402
from daemon.config.reload import PolicyHolder  # noqa: E402
from daemon.config.settings import DEFAULT_STATE_DIR, LoadedSettings, load_settings  # noqa: E402
from daemon.providers.base import ChatRequest, ChatResponse, Provider  # noqa: E402
from daemon.suites import load_suite  # noqa: E402
from daemon.suites.splits import split  # noqa: E402

EMBEDDED = "local:smollm2-135m"
EMBEDDED_HELDOUT_POLICY = f"""
[models]
primary = "{EMBEDDED}"
[suite]
name = "bfcl:simple"
dev_size = 2
heldout_size = {{tasks}}
split_seed = "bench"
[sandbox]
concurrency = 1
"""
"""The embedded model on ``{tasks}`` held-out BFCL simple tasks, one sandbox at a time: the
policy of the benchmarks that time the held-out path on the real model."""


def machine() -> str:
    load = os.getloadavg()
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load[0]:.1f} at start"
    )


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as "0.82 1.10 1.35"."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_times() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs since boot, from /proc/stat; (0, 0) where there is
    none. Steal is time the hypervisor gave this VM's CPUs to someone else: on a shared host
    it slows the model as much as a local load would, while the load average does not show
    it, so benchmarks print it beside the load."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return 0, 0
    # cpu user nice system idle iowait irq softirq steal guest guest_nice; guest time is
    # already counted in user, so the total stops at steal.
    values = [int(v) for v in fields[1:9]]
    return (values[7] if len(values) > 7 else 0), sum(values)


def steal_percent(before: tuple[int, int], after: tuple[int, int]) -> str:
    """The share of CPU time stolen between two :func:`cpu_times` readings, as "13 %"."""
    total = after[1] - before[1]
    return "n/a" if total <= 0 else f"{100 * (after[0] - before[0]) / total:.0f} %"


def bfcl_simple_tasks(count: int) -> list[str]:
    """``count`` BFCL simple task ids, the same ones in every run of every model benchmark."""
    ids = load_suite("bfcl:simple", asset_cache()).task_ids()
    return split(ids, seed="bench", dev_size=2, heldout_size=count).heldout


def asset_cache() -> Path:
    return Path(os.environ.get("HARNESSD_TEST_CACHE") or ROOT / DEFAULT_STATE_DIR / "cache")


SILENT_MODEL = 'mode = "rules"\n\n[[rules]]\ncontent = "I do not know."\n'


@contextmanager
def bench_settings(
    policy_text: str, files: dict[str, str] | None = None
) -> Iterator[tuple[LoadedSettings, PolicyHolder, Path]]:
    """Settings with a fresh state dir (deleted after) over the project's asset cache.

    ``files`` are written into that dir first; ``{root}`` in the policy text names it.
    """
    cache = asset_cache()
    with tempfile.TemporaryDirectory(prefix="harnessd-bench-") as tmp:
        root = Path(tmp)
        for name, text in (files or {}).items():
            (root / name).write_text(text)
        policy_text = policy_text.replace("{root}", str(root))
        policy_path = root / "policy.toml"
        policy_path.write_text(policy_text)
        config = root / "harnessd.toml"
        config.write_text(
            f'state_dir = "{root / "state"}"\ncache_dir = "{cache}"\npolicy = "{policy_path}"\n'
            f'harnesses_dir = "{root / "harnesses"}"\n'
        )
        policy: Policy = parse_policy(policy_text, str(policy_path))
        yield load_settings(config), PolicyHolder(policy_path, policy), root


@dataclass
class Call:
    request: ChatRequest
    response: ChatResponse
    seconds: float


@dataclass
class Recording:
    """A provider that times and keeps every chat call it passes on."""

    inner: Provider
    calls: list[Call] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return self.inner.ref

    @property
    def capabilities(self):  # type: ignore[no-untyped-def]
        return self.inner.capabilities

    async def chat(self, request: ChatRequest) -> ChatResponse:
        start = time.perf_counter()
        response = await self.inner.chat(request)
        self.calls.append(Call(request, response, time.perf_counter() - start))
        return response

    async def prompt_tokens(self, request: ChatRequest) -> int:
        return await self.inner.prompt_tokens(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def row(label: str, seconds: float, base: float, note: str = "") -> str:
    ratio = seconds / base if base else float("nan")
    return f"  {label:<46} {seconds:9.2f} s  {ratio:6.2f}x  {note}"
