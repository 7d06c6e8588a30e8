"""PeerClient over the in-process memory bus (no broker): the API, DS timeout, caller timeout,
configuration errors, and the responder running while the client is open."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import numpy as np
import pytest

from locpriv.core.noise import GaussianMechanism, PlanarLaplace, offset_lonlat
from locpriv.errors import ConfigError, RequestTimeout
from locpriv.peer import PeerAnswer, PeerClient
from locpriv.protocols.p4.types import PeerConfig
from locpriv.wire.messages import NearestQuery

LAT0, LON0 = 41.3874, 2.1686


@contextlib.asynccontextmanager
async def devices(
    n: int, **kw: object
) -> AsyncIterator[tuple[list[PeerClient], list[tuple[float, float]]]]:
    url = f"memory://{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(3)
    where = [offset_lonlat(LON0, LAT0, *rng.uniform(-300, 300, 2)) for _ in range(n)]
    async with contextlib.AsyncExitStack() as stack:
        out = []
        for i, (lon, lat) in enumerate(where):
            p = PeerClient(
                url,
                user_id=f"u{i}",
                k=4,
                a_min_m2=10_000.0,
                a_max_m2=1_000_000.0,
                window_s=0.1,
                rng=np.random.default_rng(i),
                **kw,  # type: ignore[arg-type]
            )
            out.append(await stack.enter_async_context(p))
            p.set_location(lat=lat, lon=lon)
        await asyncio.gather(*(p.flush() for p in out))
        yield out, where


@pytest.mark.asyncio
@pytest.mark.timeout(30)
async def test_query_without_ds_times_out_after_grouping() -> None:
    """No DS on the bus: the group forms (the responders answered) and DS silence surfaces as
    RequestTimeout after ds_timeout_s."""
    async with devices(8, sigma_m=50.0, ds_timeout_s=0.3) as (clients, _):
        with pytest.raises(RequestTimeout, match="DS did not answer"):
            await clients[0].query(NearestQuery(category="atm", n=1))
        assert sum(c.stats["replied"] for c in clients[1:]) == 7
        assert clients[0].machine.pending == 0


@pytest.mark.asyncio
@pytest.mark.timeout(30)
async def test_caller_timeout_cancels_the_query() -> None:
    async with devices(8, mechanism=PlanarLaplace(0.02), ds_timeout_s=10.0) as (clients, _):
        with pytest.raises(RequestTimeout, match="no answer within"):
            await clients[0].query(NearestQuery(category="atm", n=1), timeout_s=0.3)
        await clients[0].flush()
        assert clients[0].machine.pending == 0


@pytest.mark.asyncio
async def test_configuration_errors() -> None:
    with pytest.raises(ConfigError):
        PeerClient("memory://x", user_id="u", k=5, a_min_m2=1.0, a_max_m2=2.0)  # no sigma
    with pytest.raises(ConfigError):
        PeerClient("memory://x", user_id="u", sigma_m=10.0)  # no k / window
    cfg = PeerConfig(k=5, a_min_m2=1.0, a_max_m2=2.0, mechanism=GaussianMechanism(5.0))
    with pytest.raises(ConfigError):
        PeerClient("memory://x", user_id="u", config=cfg, sigma_m=3.0)
    with pytest.raises(ConfigError):
        PeerConfig(k=5, a_min_m2=3.0, a_max_m2=2.0)
    p = PeerClient("memory://x", user_id="u", config=cfg)
    with pytest.raises(ConfigError):
        await p.query(NearestQuery(category="atm", n=1))  # not opened


def test_answer_type_is_frozen() -> None:
    a = PeerAnswer(
        pois=(),
        group_size=5,
        area_m2=1.0,
        sse_m2=1.0,
        rounds=1,
        centroid=(0.0, 0.0),
        radius_m=1.0,
        replies=4,
        dropped={},
        candidates=0,
        exact=True,
    )
    with pytest.raises(AttributeError):
        a.rounds = 2  # type: ignore[misc]
