"""A model provider that is down for a while (an OpenAI-compatible server refusing
connections) is an outage the daemon waits out with backoff, not a stream of failed
candidates: nothing is proposed or rejected while it is down, ``status`` says what is down
and what to do, live requests that do not need it are still served, and once the server
answers again the loop carries on by itself."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from tests.daemon_process import ctl, start_daemon
from tests.improve.patches import IMPROVE
from tests.improve.scripted_world import proposer_policy
from tests.providers.fake_llm_apis import Reply, openai_completion, serve

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROPOSER = "openai:gpt-test"


def _free_port() -> int:
    """A port nothing listens on (yet): connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(900)  # a full candidate evaluation after the outage, on a busy machine
def test_a_proposer_server_down_for_a_while_is_waited_out(
    tmp_path: Path, asset_cache: Path
) -> None:
    policy = proposer_policy(tmp_path, asset_cache, PROPOSER)
    policy += "\n[retry]\nmax_retries = 0\ntimeout_s = 10.0\n"
    port = _free_port()
    env = {
        "HARNESSD_OPENAI__BASE_URL": f"http://127.0.0.1:{port}/v1",
        "OPENAI_API_KEY": "sk-test-outage-0000000000000000",
    }
    daemon = start_daemon(tmp_path, asset_cache, policy, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            with daemon.client() as c:
                status = c.call("status")
            if any(o["dependency"] == PROPOSER for o in status["outages"]):
                break
            assert time.monotonic() < deadline, daemon.log.read_text()[-3000:]
            time.sleep(0.3)
        [outage] = status["outages"]
        assert f"127.0.0.1:{port}" in outage["fix"], outage
        r = ctl(daemon, "status")
        assert "OUTAGE" in r.stdout and PROPOSER in r.stdout, r.stdout
        # The primary model is up: live requests are still served.
        r = ctl(daemon, "ask", "hello?")
        assert r.returncode == 0, r.stderr
        # Down for a while: it probes with backoff and proposes nothing meanwhile.
        while status["outages"] and status["outages"][0]["probes"] < 2:
            time.sleep(0.3)
            with daemon.client() as c:
                status = c.call("status")
        assert status["cycles"] == 0

        reply = openai_completion(content=IMPROVE, prompt_tokens=900, completion_tokens=120)
        with serve([Reply(200, reply)], port=port) as api:
            deadline = time.monotonic() + 300
            while "v0002" not in ctl(daemon, "lineage").stdout:
                assert time.monotonic() < deadline, daemon.log.read_text()[-3000:]
                time.sleep(1)
            posts = [r for r in api.received if r.method == "POST"]
            assert len(posts) == 1  # asked once it was back, and once is all a cycle needs
    finally:
        code = daemon.stop()
    assert code == 0
    db = sqlite3.connect(daemon.state_dir / "state.db")
    kinds = [k for (k,) in db.execute("SELECT kind FROM events ORDER BY id")]
    assert kinds.count("outage.started") == 1 and kinds.count("outage.ended") == 1
    assert "loop.error" not in kinds
    states = [s for (s,) in db.execute("SELECT state FROM candidates")]
    assert states == ["accepted"]  # no candidate failed while the server was down
    started = next(
        json.loads(d)
        for k, d in db.execute("SELECT kind, data FROM events")
        if k == "outage.started"
    )
    assert started["dependency"] == PROPOSER and "unreachable" in started["error"]
