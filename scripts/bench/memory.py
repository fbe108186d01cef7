#!/usr/bin/env python3
"""The daemon's resident memory over 500 scripted improvement cycles.

A real ``harnessd serve`` (scripted solver and proposer, so cycles are cheap and nothing
but the daemon's own bookkeeping grows): each cycle asks the proposer, parses its reply,
records the candidate and its verdict, emits events and ledger rows. The proposer's replies
alternate between text with no patch and a patch the static stage refuses (it edits a file
outside the harness), so every cycle goes through intake, the lineage and the event log.
Printed: the daemon's RSS (from /proc) every 50 cycles, and its growth per 100 cycles after
the first 50 (warm-up: imports, caches, the first evaluation).

Usage: .venv/bin/python scripts/bench/memory.py [--cycles 500]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, SILENT_MODEL, asset_cache, machine

from daemon.control.client import ControlClient
from daemon.errors import HarnessdError

BAD_PATH = "../outside.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    cache = asset_cache()
    with tempfile.TemporaryDirectory(prefix="harnessd-bench-") as tmp:
        root = Path(tmp)
        (root / "solver.toml").write_text(SILENT_MODEL)
        replies = ["Rationale: nothing to change.", f"Rationale: edit elsewhere.\n\n{BAD_PATH}"]
        (root / "proposer.toml").write_text(
            'mode = "sequence"\nafter_last = "cycle"\n'
            + "".join(f"[[replies]]\ncontent = {json.dumps(r)}\n" for r in replies)
        )
        (root / "policy.toml").write_text(
            f'[models]\nprimary = "scripted:{root / "solver.toml"}"\n'
            f'[proposer]\nmodel = "scripted:{root / "proposer.toml"}"\n'
            '[suite]\nname = "bfcl:simple"\ndev_size = 2\nheldout_size = 4\n'
            f"[loop]\ncycle_pause_s = 0.0\nmax_cycles = {args.cycles}\n"
        )
        state = root / "state"
        (root / "harnessd.toml").write_text(
            f'state_dir = "{state}"\ncache_dir = "{cache}"\npolicy = "{root / "policy.toml"}"\n'
            f'harnesses_dir = "{root / "harnesses"}"\nseed = "{ROOT / "seeds" / "minimal"}"\n'
        )
        log = (root / "daemon.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "--config", str(root / "harnessd.toml"), "serve"],
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=root,
        )
        samples: dict[int, float] = {}
        try:
            next_mark = 0
            while next_mark <= args.cycles:
                if proc.poll() is not None:
                    raise SystemExit(
                        f"harnessd exited: {(root / 'daemon.log').read_text()[-2000:]}"
                    )
                try:
                    with ControlClient(state / "control.sock", timeout=30) as c:
                        cycles = int(c.call("status")["cycles"])
                except (OSError, ValueError, HarnessdError):
                    time.sleep(0.5)
                    continue
                while cycles >= next_mark and next_mark <= args.cycles:
                    samples[next_mark] = rss_mib(proc.pid)
                    print(f"  cycle {next_mark:>4}: RSS {samples[next_mark]:7.1f} MiB", flush=True)
                    next_mark += 50
                time.sleep(0.2)
            with ControlClient(state / "control.sock", timeout=30) as c:
                newest = c.call("lineage", candidates=2)["candidates"]
            print(
                f"  candidates recorded: {newest[0]['id'] if newest else 0}, newest: "
                f"{[(x['state'], x['stage']) for x in newest]}"
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            log.close()
    base = samples.get(50, samples[0])
    last = max(samples)
    per_100 = (samples[last] - base) / max((last - 50) / 100, 1e-9)
    print(
        f"growth after warm-up: {samples[last] / base:.3f}x from cycle 50 to {last} "
        f"({per_100:+.2f} MiB per 100 cycles)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=500)
    main(parser.parse_args())
