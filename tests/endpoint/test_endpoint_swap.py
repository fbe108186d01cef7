"""200 requests from 4 ``openai`` SDK clients across a promotion: none fails, and each is
answered by exactly one version, the one live when it arrived.

The promotion is the loop's own, through the real pipeline and sandbox, on the scripted
world of the loop tests (a real promotion on the embedded model takes hours on two cores;
the swap is the live harness's, whatever the model). The scripted solver answers endpoint
requests by the harness's system text, so each answer also shows which tree ran it: the
seed says "seed", the promoted version (which puts ``MODE:L3`` first) says "promoted".
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.endpoint.endpoint_daemon import Endpoint, start_endpoint
from tests.improve.patches import mode_steps, proposer_script
from tests.improve.scripted_world import DEV, HELDOUT, policy_text, positions, solver_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REQUESTS, CLIENTS = 200, 4
# Before the promotion, requests past this many are paced (one a second per client), and
# the last ones wait for it: the load goes on through the swap and some come after it.
PACE_AFTER, HOLD_AFTER = 100, 180
CATCH_ALL = '[[rules]]\ncontent = "I do not know."\n'
BY_VERSION = (
    '[[rules]]\nmatch = "^endpoint request"\nsystem = "MODE:L3$"\ncontent = "promoted"\n\n'
    '[[rules]]\nmatch = "^endpoint request"\ncontent = "seed"\n\n'
)


def _policy(tmp_path: Path, asset_cache: Path) -> str:
    n = max(DEV, HELDOUT)
    solver = tmp_path / "solver.toml"
    script = solver_script(asset_cache, {"L3": positions(n, lambda i: True)}, HELDOUT)
    assert CATCH_ALL in script
    solver.write_text(script.replace(CATCH_ALL, BY_VERSION + CATCH_ALL))
    proposer = tmp_path / "proposer.toml"
    proposer.write_text(proposer_script(mode_steps("L3")))
    return policy_text(solver, solver, proposer, cycles=1, alpha=0.45).replace(
        f'panel = ["scripted:{solver}"]', "panel = []"
    )


def _live(endpoint: Endpoint) -> str:
    with endpoint.daemon.client() as c:
        return str(c.call("status")["live"]["version"])


@pytest.mark.timeout(2400)
def test_two_hundred_requests_across_a_promotion(tmp_path: Path, asset_cache: Path) -> None:
    endpoint = start_endpoint(tmp_path, asset_cache, _policy(tmp_path, asset_cache))
    counter = itertools.count()
    promoted = threading.Event()
    answers: list[dict[str, Any]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def client_loop(c: int) -> None:
        # No retries: a request that fails must show here, not be sent again.
        client = endpoint.client(max_retries=0, timeout=600)
        while (i := next(counter)) < REQUESTS:
            if not promoted.is_set() and i >= HOLD_AFTER:
                promoted.wait(1800)
            elif not promoted.is_set() and i >= PACE_AFTER:
                time.sleep(1.0)
            sent = time.time()
            try:
                raw = client.chat.completions.with_raw_response.create(
                    model="harnessd",
                    messages=[{"role": "user", "content": f"endpoint request {i} from {c}"}],
                )
                completion = raw.parse()
            except BaseException as exc:
                with lock:
                    failures.append(exc)
                continue
            with lock:
                answers.append(
                    {
                        "i": i,
                        "sent": sent,
                        "version": raw.headers["x-harnessd-version"],
                        "request": int(raw.headers["x-harnessd-request"]),
                        "content": completion.choices[0].message.content,
                    }
                )

    threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(CLIENTS)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 1800
        while _live(endpoint) != "v0002":
            assert time.monotonic() < deadline, endpoint.daemon.log.read_text()[-3000:]
            assert endpoint.daemon.proc.poll() is None, endpoint.daemon.log.read_text()[-3000:]
            time.sleep(0.25)
        promoted.set()
        for t in threads:
            t.join(900)
        [(swap_ts,)] = endpoint.rows(
            "SELECT ts FROM pointer WHERE kind = 'promote' ORDER BY ts LIMIT 1"
        )
        rows = {
            r[0]: r[1:]
            for r in endpoint.rows(
                "SELECT r.id, v.name, r.state, r.ts, r.finished FROM requests r "
                "JOIN versions v ON v.id = r.version_id WHERE r.kind = 'chat'"
            )
        }
    finally:
        assert endpoint.close() == 0

    assert not failures, failures[:3]
    assert len(answers) == REQUESTS
    by_version = {a["version"] for a in answers}
    assert by_version == {"v0001", "v0002"}, by_version
    assert len(rows) == REQUESTS
    for a in answers:
        version, state, started, _ = rows[a["request"]]
        # The header names the version recorded for the request, and the answer is that
        # version's own (its tree ran the request, and only its tree).
        assert (version, state) == (a["version"], "done"), a
        assert a["content"] == ("seed" if version == "v0001" else "promoted"), a
        # The version live when it arrived: after the swap only v0002 (and before it, v0001;
        # a request may read the pointer in the instant before the commit lands).
        if version == "v0002":
            assert started >= swap_ts, a
        else:
            assert started <= swap_ts + 2.0, a
    across = sum(1 for v, _, s, f in rows.values() if v == "v0001" and s < swap_ts < f)
    after = sum(1 for a in answers if a["version"] == "v0002")
    print(f"{across} requests in flight across the swap, {after} answered after it")
    assert after >= REQUESTS - HOLD_AFTER
