"""A daemon whose proposer is an OpenAI-compatible server: llama.cpp's own, serving the
embedded model, configured the way a user points harnessd at Ollama or vLLM (``[openai]
base_url`` and a key variable in harnessd.toml).

Only the proposer goes through the server; tasks are solved by a scripted model (one catch-all
reply), so the cycle costs a few proposals and a handful of sandbox runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import RunningDaemon, start_daemon
from tests.llama_server import KEY_ENV, LlamaServer
from tests.support.wait import wait_for_daemon

pytestmark = [pytest.mark.model, pytest.mark.docker, pytest.mark.slow]

SOLVER = """
mode = "rules"

[[rules]]
content = "I cannot help with that."
"""


def _policy(server: LlamaServer, solver: Path) -> str:
    return f"""
[models]
primary = "scripted:{solver}"

[proposer]
model = "{server.ref}"
protocol = "operations"
max_tokens = 400
failures_shown = 1
# A 135M model writes a line that does not compile in most samples; each such sample stops
# at static (recorded, with its reason) and the next is drawn. Enough samples that the
# cycle reaches one that compiles (0.7 ** 16 < 0.4 %), since that is what this test runs.
samples = 16
# The first that passes goes on alone: this test is about the proposer's calls.
dev_pool = 1

[suite]
name = "bfcl:simple"
dev_size = 1
heldout_size = 2

[sandbox]
concurrency = 1

[loop]
cycle_pause_s = 0.0
max_cycles = 1

[retry]
max_retries = 0
timeout_s = 2000.0
"""


def _decided(daemon: RunningDaemon, timeout: float) -> list[dict[str, Any]]:
    """The candidates once the one cycle is over (its candidate has a verdict)."""

    def probe() -> list[dict[str, Any]] | None:
        with daemon.client() as c:
            cands: list[dict[str, Any]] = c.call("lineage", candidates=50)["candidates"]
            status = c.call("status")
        return cands if "max_cycles" in str(status) else None

    return wait_for_daemon(daemon, probe, timeout=timeout, what="the end of the cycle")


# Each proposal is a ~2,000-token prompt through one server thread: seconds on an idle 2-core
# machine, over ten minutes on a crowded one; samples after the first reuse the server's
# prompt cache. The bound only stops a hang.
@pytest.mark.timeout(3600)
def test_a_full_cycle_with_the_server_as_proposer(
    tmp_path: Path,
    asset_cache: Path,
    real_openai_server: LlamaServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, "no-key-needed")
    solver = tmp_path / "solver.toml"
    solver.write_text(SOLVER)
    settings = (
        f'\n[openai]\nbase_url = "{real_openai_server.url}"\napi_key_env = "{KEY_ENV}"\n'
        'structured_output = "json_object"\n'
    )
    daemon = start_daemon(
        tmp_path, asset_cache, _policy(real_openai_server, solver), settings_text=settings
    )
    try:
        cands = _decided(daemon, timeout=3400)
        with daemon.client() as c:
            shown = [c.call("show", ref=f"c{x['id']}") for x in cands]
    finally:
        assert daemon.stop() == 0
    assert shown, "the server proposed nothing"
    assert all(s["proposer_model"] == real_openai_server.ref for s in shown)
    assert all(s["verdict"] for s in shown), [(s["name"], s["state"]) for s in shown]
    ran = [s for s in shown if s["verdict"]["stage"] not in ("static", "parse")]
    assert len(ran) == 1, [(s["name"], s["verdict"]) for s in shown]  # the cycle's candidate
    cand = ran[0]
    # The reply was the operation protocol's JSON, made into a normalised diff of the seed,
    # and it ran in the sandbox.
    assert cand["patch"].startswith("diff --git a/harness.py b/harness.py")
    splits = [r["split"] for r in cand["reports"]]
    assert splits[0] == "smoke", cand["reports"]
    assert cand["verdict"]["decision"] in ("accept", "reject")
