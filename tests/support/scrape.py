"""A Prometheus scrape, parsed with prometheus-client's own parser into plain samples."""

from __future__ import annotations

import httpx2
from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape's text: (name, its labels sorted) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(base_url: str) -> Samples:
    """``GET base_url/metrics``, parsed."""
    with httpx2.Client(base_url=base_url, timeout=60) as http:
        response = http.get("/metrics")
    response.raise_for_status()
    return samples(response.text)


def labelled(got: Samples, name: str) -> dict[Labels, float]:
    """The samples of one metric, by labels."""
    return {labels: value for (n, labels), value in got.items() if n == name}
