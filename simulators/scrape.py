"""Read a running service's Prometheus metrics (``--metrics-port``), for tests and benchmarks.

Parsed with ``prometheus_client``'s own text parser, so label order and escaping never matter.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

__all__ = ["metric", "scrape", "total"]


def scrape(port: int, addr: str = "127.0.0.1", timeout_s: float = 5.0) -> list[Sample]:
    """Every sample the service on ``addr:port`` exposes at ``/metrics``."""
    with urllib.request.urlopen(f"http://{addr}:{port}/metrics", timeout=timeout_s) as r:
        text = r.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _matching(samples: list[Sample], name: str, labels: dict[str, str]) -> list[float]:
    return [
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def metric(samples: list[Sample], name: str, **labels: str) -> float | None:
    """The value of the first sample ``name`` (e.g. ``locpriv_messages_total``) with
    ``labels``, or None when there is none."""
    found = _matching(samples, name, labels)
    return found[0] if found else None


def total(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum over the samples ``name`` with ``labels`` (0 when there are none)."""
    return float(sum(_matching(samples, name, labels)))
