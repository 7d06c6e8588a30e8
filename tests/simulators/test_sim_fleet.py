"""A tiny fleet through real brokers (amqtt and mosquitto) and the in-memory bus."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest

from locpriv.config import ServiceConfig
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from simulators.evaluate import summarize
from simulators.fleet import FleetOptions, FleetResult, Progress, run_fleet_async
from simulators.peers import P4Knobs
from simulators.scenario import build, load_scenario
from simulators.workload import Distribution


def _scenario() -> object:
    sc = load_scenario("demo")
    prof = dict(sc.workload.profile)
    prof["k"] = Distribution.parse(3)
    prof["max_delay_s"] = Distribution.parse(2.0)
    wl = dataclasses.replace(sc.workload, queries_per_user_per_hour=900.0, profile=prof)
    mob = {**sc.mobility, "blocks": 4}  # 800 m x 800 m: dense enough for Protocol 4
    return sc.replace(users=60, duration_s=4.0, workload=wl, mobility=mob)


async def _run(url: str) -> tuple[FleetResult, list[Progress]]:
    built = build(_scenario())  # type: ignore[arg-type]
    client = f"sim-{uuid.uuid4().hex[:8]}"
    # the whole fleet, both services and the broker share one event loop (and, in CI, a busy
    # machine): DS's bound on a query's wait (1 s by default) is loosened so that the test checks
    # what the fleet measures, not how fast the machine is; overload has its own tests
    config = ServiceConfig.model_validate(
        {
            "mqtt": {"client_id": client, "ds_client_id": f"{client}-ds", "clean_session": True},
            "limits": {"ds_max_wait_s": 10.0},
        }
    )
    anon, ds = AnonymizerService(url, config), DSService(url, config)
    tasks = [asyncio.create_task(anon.run()), asyncio.create_task(ds.run())]
    seen: list[Progress] = []
    try:
        await asyncio.wait_for(asyncio.gather(anon.ready.wait(), ds.ready.wait()), 20)
        opts = FleetOptions(
            url=url,
            processes=0,
            start_delay_s=1.0,
            drain_s=5.0,
            p4=P4Knobs(window_s=1.0, max_rounds=3),
        )
        result = await run_fleet_async(built, opts, shards=2, report=seen.append)
    finally:
        anon.stop()
        ds.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
    return result, seen


def _check(result: FleetResult, seen: list[Progress]) -> None:
    s = summarize(result.records, result.stats)
    assert set(s["protocols"]) == {"p1", "p2", "p3", "p4"}
    for name in ("p1", "p2", "p3"):
        d = s["protocols"][name]
        assert d["answered"] >= 1 and d["success_rate"] >= 0.8, (name, d["errors"])
        assert d["precision"] == 1.0 and d["recall"] == 1.0
    assert s["protocols"]["p4"]["answered"] >= 1, s["protocols"]["p4"]["errors"]
    for r in result.records:
        if r.ok and r.protocol in (1, 3):
            assert r.k_reported is not None and r.k_reported >= r.k_requested
            assert r.k_achieved is not None
            assert r.area_m2 is not None and r.a_min_m2 < r.area_m2 < r.a_max_m2
        if r.ok and r.protocol == 4:
            assert r.k_achieved == r.k_requested and r.adversary_error_m is not None
    # 60 users report once before the start and then every 8 s over 4 s
    assert 60 <= result.stats.location_updates <= 120
    assert len(result.shards) == 2 and seen and seen[-1].issued == len(result.records)


@pytest.mark.asyncio
@pytest.mark.integration
@pytest.mark.timeout(60)
async def test_tiny_fleet_on_a_real_broker(broker_url: str) -> None:
    result, seen = await _run(broker_url)
    _check(result, seen)


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_tiny_fleet_on_the_memory_bus() -> None:
    result, seen = await _run(f"memory://fleet-{uuid.uuid4().hex[:8]}")
    _check(result, seen)
