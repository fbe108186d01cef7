"""A child process that runs lineage operations and SIGKILLs itself at a chosen step.

Usage: ``python crash_worker.py SPEC_JSON``. ``kill_at`` is ``[step, occurrence]`` or null;
``op`` is ``seed``, ``promote``, ``rollback`` or ``churn`` (promote and roll back until
killed from outside). The parent process then reconciles and checks the invariants.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from lineage_helpers import make_candidate

from daemon.lineage import Lineage
from daemon.store import Store
from daemon.verdict import Verdict


def _accepted(reason: str) -> Verdict:
    return Verdict(decision="accept", stage="heldout", reason=reason)


def main() -> None:
    spec = json.loads(sys.argv[1])
    counts: dict[str, int] = {}
    kill_at = spec.get("kill_at")

    def fault(step: str) -> None:
        counts[step] = counts.get(step, 0) + 1
        if kill_at is not None and [step, counts[step]] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    store = Store(Path(spec["db"]))
    lineage = Lineage(store, Path(spec["root"]), fault=fault)
    op = spec["op"]
    if op == "seed":
        lineage.init_seed(Path(spec["seed"]))
    elif op == "promote":
        lineage.promote(spec["candidate"], Path(spec["tree"]), _accepted("crash test"))
    elif op == "rollback":
        lineage.rollback(spec["ref"], "crash test")
    elif op == "churn":
        work = Path(spec["work"])
        print("ready", flush=True)
        for round_number in range(10_000):
            cid, tree = make_candidate(lineage, work)
            lineage.promote(cid, tree, _accepted(f"round {round_number}"))
            if round_number % 3 == 2:
                lineage.rollback("v0001", f"round {round_number}")
    else:
        raise SystemExit(f"unknown op {op}")
    store.close()


if __name__ == "__main__":
    main()
