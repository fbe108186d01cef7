"""Acceptance on the embedded model: real patches through ``harnessctl propose``.

Starts a fresh daemon (its own state and lineage in ``--workdir``) on the default policy
with the embedded model, the self-proposing loop off so that only these patches are
candidates, and submits in turn:

1. ``improve``: de-duplicate repeated calls (a third of the seed's BFCL misses) and claim
   success only for well-formed calls (``scripts/demo/improve.patch``);
2. ``tokens``: only cut tokens (the model may write at most 128 tokens per call instead of
   512; rambling replies were never right);
3. ``never``: never claim success; 4. ``coin``: claim on a coin flip (fixed per task);
5. ``memorised``: carry BFCL simple's public answers; 6. the same for HumanEval's solutions.

With ``--deep`` it then loosens the static screen in the policy file (the daemon applies the
edit) and submits the BFCL table cut into short literals, then turns provenance off too. On
the default policy every task, dev and held-out, is a counterfactual copy or a generated
task, so a table of the public answers fits none and these stop at the dev stage; each
defence alone on the public tasks (provenance, then the decoy) is shown by
``tests/improve/test_modelfree_e2e.py`` with ``counterfactual = false``.

Each verdict (every gate's measured value, threshold and test, the held-out tasks used) is
printed and written to ``WORKDIR/summary.md``. A full run takes hours on two cores: the seed
and each promoted version run the held-out tasks their candidates' tests use (beside them,
once per task), each candidate until its test stops.

Usage: .venv/bin/python scripts/demo/acceptance.py [--workdir DIR] [--steps a,b,...] [--deep]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from daemon.suites import load_suite  # noqa: E402
from tests.improve.cheats import COIN_FLIP, NEVER_CLAIM, memorised_patch  # noqa: E402

HERE = Path(__file__).resolve().parent
PY = sys.executable

TOKENS = """Rationale: at most 128 tokens per model call; longer replies were rambling.

harness.py
<<<<<<< SEARCH
MAX_TOKENS = 512  # tokens the model may write per call
=======
MAX_TOKENS = 128  # tokens the model may write per call
>>>>>>> REPLACE
"""

# Policy edits: (what the default policy says, what the demo says instead).
LOOP_OFF = ("enabled = true\n# Pause between cycles", "enabled = false\n# Pause between cycles")
LOOSE = [
    ("max_bytes = 64000", "max_bytes = 200000"),
    ("max_literal_bytes = 8000", "max_literal_bytes = 200000"),
    ("max_encoded_chars = 256", "max_encoded_chars = 200000"),
]
PROVENANCE_OFF = [("enabled = true\nmax_unsupported", "enabled = false\nmax_unsupported")]


def edit_policy(path: Path, edits: list[tuple[str, str]]) -> None:
    text = path.read_text()
    for old, new in edits:
        if old not in text:
            raise RuntimeError(f"{path}: expected {old!r} in the policy")
        text = text.replace(old, new, 1)
    path.write_text(text)


def ctl(work: Path, *args: str, timeout: float = 120) -> Any:
    proc = subprocess.run(
        [PY, "-m", "daemon.control.ctl", "--config", str(work / "harnessd.toml"), "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    if not proc.stdout.strip():
        raise RuntimeError(f"harnessctl {' '.join(args)}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def start(
    work: Path, sizes: str | None, wall_s: float | None, concurrency: int | None
) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "policy.toml").write_text((ROOT / "policies" / "default.toml").read_text())
    edit_policy(work / "policy.toml", [LOOP_OFF])
    if sizes:
        dev, pool = sizes.split(",")
        edits = [
            ("dev_size = 20", f"dev_size = {dev}"),
            ("heldout_size = 380", f"heldout_size = {pool}"),
        ]
        edit_policy(work / "policy.toml", edits)
    if wall_s:
        edit_policy(work / "policy.toml", [("wall_s = 180.0", f"wall_s = {wall_s}")])
    if concurrency:
        edit_policy(work / "policy.toml", [("concurrency = 2 ", f"concurrency = {concurrency} ")])
    return serve(work)


def serve(work: Path) -> subprocess.Popen[bytes]:
    """``harnessd serve`` on ``WORK/policy.toml`` with its state in ``work``, once it listens."""
    (work / "harnessd.toml").write_text(
        f'state_dir = "{work / "state"}"\nharnesses_dir = "{work / "harnesses"}"\n'
        f'cache_dir = "{ROOT / ".state" / "cache"}"\npolicy = "{work / "policy.toml"}"\n'
        f'seed = "{ROOT / "seeds" / "minimal"}"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (work / "daemon.log").open("ab")
    proc = subprocess.Popen(
        [PY, "-m", "daemon.cli", "--config", str(work / "harnessd.toml"), "serve"],
        stdout=log,
        stderr=log,
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 600
    while not (work / "state" / "control.sock").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the daemon did not start; see {work / 'daemon.log'}")
        time.sleep(1)
    return proc


def wait_for(work: Path, cid: int) -> dict[str, Any]:
    while True:
        shown: dict[str, Any] = ctl(work, "show", f"c{cid}")
        if shown["state"] in ("accepted", "rejected"):
            return shown
        time.sleep(20)


def summarise(name: str, shown: dict[str, Any], seconds: float) -> list[str]:
    verdict = shown.get("verdict") or {}
    held = [r for r in shown.get("reports", []) if r["split"] == "heldout" and "summary" in r]
    tasks = held[0]["summary"]["n"] if held else 0
    lines = [
        f"### {name}: c{shown['name'][1:]} {shown['state']} at {verdict.get('stage')} "
        f"({tasks} held-out tasks, {seconds / 60:.0f} min)",
        "",
        f"reason: {verdict.get('reason', '')}",
        "",
        "| gate | result | measured | threshold | note |",
        "|---|---|---|---|---|",
    ]
    for g in verdict.get("gates", []):
        mark = (
            "skip"
            if g.get("skipped")
            else "off"
            if not g["enabled"]
            else ("pass" if g["passed"] else "FAIL")
        )
        note = (g.get("note") or "").replace("|", "/")
        lines.append(
            f"| {g['gate']} | {mark} | {g.get('measured')} | {g.get('threshold')} | {note} |"
        )
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / ".state" / "demo-acceptance")
    parser.add_argument("--steps", default="improve,tokens,never,coin,memorised,humaneval")
    parser.add_argument("--deep", action="store_true", help="also show provenance and decoy")
    parser.add_argument(
        "--sizes", help="DEV,POOL instead of the default policy's 20,380 (a quick dry run)"
    )
    parser.add_argument(
        "--wall-s",
        type=float,
        help="the sandbox's wall clock per task instead of 180 s, on a machine so loaded that "
        "one model call can take minutes (parent and candidate run under the same limits)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        help="tasks evaluated at once instead of 2 (on a loaded machine, starting containers "
        "dominates; more at once only changes how fast the same tasks finish)",
    )
    args = parser.parse_args()
    work: Path = args.workdir.resolve()
    cache = ROOT / ".state" / "cache"
    patches = {
        "improve": (HERE / "improve.patch").read_text(),
        "tokens": TOKENS,
        "never": NEVER_CLAIM,
        "coin": COIN_FLIP,
        "memorised": memorised_patch(load_suite("bfcl:simple", cache), "alone", "blob"),
        "humaneval": memorised_patch(load_suite("humaneval", cache), "alone", "blob"),
    }
    steps = [s for s in args.steps.split(",") if s]
    proc = start(work, args.sizes, args.wall_s, args.concurrency)
    out = ["# Acceptance on the embedded model", ""]
    try:
        for step in steps + (["provenance", "decoy"] if args.deep else []):
            if step in ("provenance", "decoy"):
                edit_policy(work / "policy.toml", LOOSE if step == "provenance" else PROVENANCE_OFF)
                time.sleep(10)  # the daemon watches the file and applies the edit
                text = memorised_patch(load_suite("bfcl:simple", cache), "alone", "chunks")
            else:
                text = patches[step]
            path = work / f"{step}.patch"
            path.write_text(text)
            began = time.monotonic()
            reply = subprocess.run(
                [
                    PY,
                    "-m",
                    "daemon.control.ctl",
                    "--config",
                    str(work / "harnessd.toml"),
                    "--json",
                    "propose",
                    str(path),
                    "--rationale",
                    f"demo: {step}",
                ],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
                cwd=ROOT,
            )
            if reply.returncode != 0:
                why = (reply.stderr.strip() or reply.stdout.strip())[:600]
                out += [f"### {step}: rejected at static", "", why, ""]
                print("\n".join(out[-4:]), flush=True)
                continue
            cid = json.loads(reply.stdout)["candidate"]
            shown = wait_for(work, cid)
            events = ctl(work, "events", "--limit", "1000")
            slot = [
                e["message"]
                for e in events
                if e["kind"] == "heldout.started" and (e.get("data") or {}).get("candidate") == cid
            ]
            block = summarise(step, shown, time.monotonic() - began) + slot + [""]
            out += block
            print("\n".join(block), flush=True)
        events = ctl(work, "events", "--limit", "500")
        out += ["## Power line at start", ""]
        out += [e["message"] for e in events if e["kind"] == "acceptance.power"][:1]
    finally:
        # The verdicts so far first: an interrupted run (Ctrl-C, a daemon stopped from
        # outside) keeps what it measured.
        (work / "summary.md").write_text("\n".join(out) + "\n")
        if proc.poll() is None:
            try:
                ctl(work, "stop")
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError):
                proc.terminate()
            proc.wait(600)
    print(f"summary: {work / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
