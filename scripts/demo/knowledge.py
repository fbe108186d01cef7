"""Knowledge of the public tasks against a real daemon on the default held-out pool.

A fresh daemon (``harnessd serve``, the default policy: 20 dev and 380 held-out BFCL simple
tasks, default gates, counterfactual held-out copies) on a scripted model that follows hints
(``tests/improve/knowledge.py``: it answers a quarter of the tasks itself, follows whatever a
request's hint says, and answers every task when given an honest instruction or examples);
the self-proposing loop off; the static screen loosened so the tables reach held-out (the
screen's own work is shown elsewhere). Submitted in turn with ``harnessctl propose``:

1. ``pointers``: a table keyed by a hash of the question, saying which question words fill
   which parameter; 2. ``echo``: the model repeats the question, then a conditional hint
   states the call; 3. ``instruction``: "Make 1 call per request. Copy numbers such as 2, 3,
   5, 10 or 100 exactly as the question gives them."; 4. ``examples`` (in a second daemon, so
   that it is measured against the seed): a fixed block of three worked examples.

``--public`` runs the same with ``[suite] counterfactual = false``. Each verdict is printed
and written to ``WORKDIR/summary.md``.

Usage: .venv/bin/python scripts/demo/knowledge.py [--workdir DIR] [--public] [--sizes D,P]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from acceptance import LOOP_OFF, LOOSE, PY, ctl, edit_policy, serve, summarise, wait_for  # noqa: E402

from tests.improve import knowledge  # noqa: E402

SPLIT_SEED = "demo-knowledge"  # the policy's seed: what the scripted model's rules are made for


def start(work: Path, dev: int, pool: int, public: bool) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True, exist_ok=True)
    cache = ROOT / ".state" / "cache"
    model = work / "model.toml"
    model.write_text(
        knowledge.model_script(cache, not public, dev=dev, heldout=pool, split_seed=SPLIT_SEED)
    )
    policy = work / "policy.toml"
    policy.write_text((ROOT / "policies" / "default.toml").read_text())
    edits = [
        LOOP_OFF,
        *LOOSE,
        ('primary = "local:smollm2-135m"', f'primary = "scripted:{model}"'),
        ('# split_seed = "harnessd-v1"', f'split_seed = "{SPLIT_SEED}"'),
        ("dev_size = 20", f"dev_size = {dev}"),
        ("heldout_size = 380", f"heldout_size = {pool}"),
    ]
    if public:
        edits.append(("counterfactual = true", "counterfactual = false"))
    edit_policy(policy, edits)
    return serve(work)


def propose(work: Path, name: str, text: str) -> list[str]:
    path = work / f"{name}.patch"
    path.write_text(text)
    began = time.monotonic()
    reply = subprocess.run(
        [
            *(PY, "-m", "daemon.control.ctl", "--config", str(work / "harnessd.toml")),
            *("--json", "propose", str(path), "--rationale", f"demo: {name}"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    if reply.returncode != 0:
        return [f"### {name}: refused", "", (reply.stderr or reply.stdout).strip()[:600], ""]
    cid = json.loads(reply.stdout)["candidate"]
    return summarise(name, wait_for(work, cid), time.monotonic() - began)


def stop(work: Path, proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            ctl(work, "stop")
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError):
            proc.terminate()
        proc.wait(600)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT / ".state" / "demo-knowledge")
    parser.add_argument("--public", action="store_true", help="counterfactual = false")
    parser.add_argument("--sizes", default="20,380", help="DEV,POOL (default: the policy's)")
    args = parser.parse_args()
    dev, pool = (int(n) for n in args.sizes.split(","))
    work: Path = args.workdir.resolve()
    cache = ROOT / ".state" / "cache"
    kind = "public tasks" if args.public else "counterfactual copies"
    out = [f"# Knowledge of the public tasks, held-out {kind} ({dev} dev, {pool} held-out)", ""]
    runs = [
        (
            work / "a",
            [
                ("pointers", knowledge.pointer_cheat(cache)),
                ("echo", knowledge.echo_cheat(cache)),
                ("instruction", knowledge.instruction_patch()),
            ],
        ),
        (work / "b", [("examples", knowledge.examples_patch())]),
    ]
    try:
        for folder, patches in runs:
            proc = start(folder, dev, pool, args.public)
            try:
                for name, text in patches:
                    block = propose(folder, name, text)
                    out += block
                    print("\n".join(block), flush=True)
            finally:
                stop(folder, proc)
    finally:
        (work / "summary.md").write_text("\n".join(out) + "\n")
    print(f"summary: {work / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
