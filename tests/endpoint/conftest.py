"""The endpoint's daemon, started once per test session (per worker) for every file here
that talks to it: a daemon on the embedded model takes a while to come up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.endpoint.endpoint_daemon import KEEPALIVE_S, MAX_BODY, Endpoint, start_endpoint


@pytest.fixture(scope="session")
def endpoint(tmp_path_factory: pytest.TempPathFactory, asset_cache: Path) -> Iterator[Endpoint]:
    tmp = tmp_path_factory.mktemp("endpoint")
    ep = start_endpoint(tmp, asset_cache, max_body_bytes=MAX_BODY, keepalive_s=KEEPALIVE_S)
    try:
        yield ep
    finally:
        assert ep.close() == 0, ep.daemon.log.read_text()[-3000:]
        # The token was never written to the log.
        assert ep.token not in ep.daemon.log.read_text()
