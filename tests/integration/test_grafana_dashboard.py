"""deploy/grafana-dashboard.json asks only for metrics the services export: every panel's
query names metrics, and groups by labels, found in a running anonymizer's and DS's /metrics
(after the conformance kit has driven every kind of request and error through them)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from _svc_helpers import running

from locpriv.config import ServiceConfig
from locpriv.conformance.live import run_conformance
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from simulators.scrape import scrape

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
_METRIC = re.compile(r"\blocpriv_[a-z_]+\b")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_MATCHER = re.compile(r"\{([^}]*)\}")


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, PromQL)`` of every panel target and templating query."""
    out = []
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        out += [(panel["title"], t["expr"]) for t in panel["targets"]]
    for var in dashboard["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            out.append((f"variable {var['name']}", query["query"]))
    return out


def _problems(dashboard: dict[str, Any], exported: dict[str, set[str]]) -> list[str]:
    """Every metric a query names that no sample has, and every label it groups or filters
    by that none of its metrics' samples carries."""
    problems = []
    for where, expr in _queries(dashboard):
        names = set(_METRIC.findall(expr))
        if not names:
            problems.append(f"{where}: names no locpriv metric: {expr}")
        labels = {"le"}
        for name in names:
            if name not in exported:
                problems.append(f"{where}: {name} is not exported")
            else:
                labels |= exported[name]
        used = {lab.strip() for group in _BY.findall(expr) for lab in group.split(",")}
        used |= {m.split("=")[0].strip() for g in _MATCHER.findall(expr) for m in g.split(",")}
        used |= set(re.findall(r"label_values\([^,]+,\s*([a-z_]+)\)", expr))
        for lab in sorted(used - labels - {""}):
            problems.append(f"{where}: label {lab!r} is on none of {sorted(names)}")
    return problems


@pytest.mark.asyncio
async def test_every_panel_queries_metrics_the_services_export(amqtt_url: str) -> None:
    config = ServiceConfig.model_validate({"limits": {"requests_per_s": 1000.0}})
    anonymizer = AnonymizerService(amqtt_url, config, metrics_port=0)
    ds = DSService(amqtt_url, config, metrics_port=0)
    async with running(anonymizer, ds):
        steps = await run_conformance(
            amqtt_url, [(u, None) for u in ("al", "bo", "cy", "di")], check_error_topic=True
        )
        assert not [s for s in steps if s.outcome == "FAIL"], steps
        assert anonymizer.metrics_port and ds.metrics_port
        # from another thread: the services' loop (this one) answers the scrape
        samples = await asyncio.to_thread(scrape, anonymizer.metrics_port)
        samples += await asyncio.to_thread(scrape, ds.metrics_port)
    exported: dict[str, set[str]] = {}
    for s in samples:
        exported.setdefault(s.name, set()).update(s.labels)
    dashboard = json.loads(DASHBOARD.read_text())
    assert _problems(dashboard, exported) == []
    assert len(dashboard["panels"]) >= 8
    # every metric family the services export is on the dashboard
    shown = {m for _, e in _queries(dashboard) for m in _METRIC.findall(e)}
    suffix = re.compile(r"_(bucket|count|sum|created|total)$")
    families = {suffix.sub("", n) for n in exported if n.startswith("locpriv_")}
    assert families <= {suffix.sub("", m) for m in shown}
    # and the check bites: a misspelt metric or label is reported
    broken = json.loads(DASHBOARD.read_text().replace("locpriv_queue_depth", "locpriv_queue_len"))
    assert any("locpriv_queue_len is not exported" in p for p in _problems(broken, exported))
    broken = json.loads(DASHBOARD.read_text().replace("(service, code)", "(service, reason)"))
    assert any("label 'reason'" in p for p in _problems(broken, exported))
