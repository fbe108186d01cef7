"""Cluster tests reuse the sandbox tests' real image, engine and clean-up checks."""

from collections.abc import Iterator

import pytest

from tests.cluster.ray_cluster import LocalCluster, local_cluster
from tests.sandbox.conftest import image, runs_dir, sandbox

__all__ = ["image", "runs_dir", "sandbox"]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalCluster]:
    """A real local cluster: a head without sandbox capacity and two worker nodes of two
    slots each, every one its own process group; all of it gone afterwards."""
    with local_cluster(workers=2, capacity=2) as cluster:
        yield cluster
