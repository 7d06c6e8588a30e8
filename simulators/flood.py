"""One ordinary login flooding DS's public lane with valid queries at a bounded rate.

``costly``: "everything within 100 km" of the projection origin (the largest radius the wire
allows); ``cheap``: the nearest cafe at a random nearby point. The queries are valid
:class:`~locpriv.wire.messages.DSQuery` messages on ``ds/query`` with the flooder's own reply
topic (it subscribes to it and counts the answers, so the broker delivers them). Used by the
standing test (``tests/integration/test_insiders.py``) and ``benchmarks/bench_flood.py``; run
alone with ``python -m simulators.flood URL PREFIX --rate 300 --seconds 10 --kind costly``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections import Counter
from typing import Literal

from locpriv.transport import connect, new_client_id
from locpriv.wire.messages import (
    DSQuery,
    NearestQuery,
    PointLocation,
    Query,
    WithinQuery,
    decode,
    encode,
)
from locpriv.wire.topics import Topics

__all__ = ["flood"]

LAT0, LON0 = 41.3874, 2.1686
"""The default projection origin (Barcelona), degrees."""

Kind = Literal["costly", "cheap", "both"]


def _query(kind: str) -> Query:
    if kind == "costly":
        return WithinQuery(radius_m=100_000.0)
    return NearestQuery(category="cafe", n=1)


async def flood(
    url: str,
    topics: Topics,
    *,
    rate_per_s: float,
    seconds: float,
    kind: Kind = "costly",
    seed: int = 0,
) -> Counter[str]:
    """Publish ``rate_per_s`` queries per second for ``seconds`` (QoS 0, paced by the clock);
    returns counts: ``sent`` and, by answer type or error code, what came back."""
    rng = random.Random(seed)
    client_id = new_client_id()
    reply_to = topics.reply(client_id)
    counts: Counter[str] = Counter()
    async with connect(url, client_id=client_id) as t:
        await t.subscribe(reply_to)

        async def read() -> None:
            async for msg in t.messages():
                try:
                    reply = decode(msg.payload, max_bytes=16 * 1024 * 1024)
                except Exception:
                    counts["undecodable"] += 1
                    continue
                code = getattr(reply, "code", None)
                counts[str(code.value) if code is not None else type(reply).__name__] += 1

        reader = asyncio.create_task(read())
        start = time.monotonic()
        i = 0
        while (elapsed := time.monotonic() - start) < seconds:
            due = int(elapsed * rate_per_s)
            while i < due:
                k = kind if kind != "both" else ("costly" if i % 2 else "cheap")
                lat = LAT0 + rng.uniform(-0.05, 0.05)
                lon = LON0 + rng.uniform(-0.05, 0.05)
                q = DSQuery(
                    correlation_id=f"f{i}",
                    reply_to=reply_to,
                    query=_query(k),
                    location=PointLocation(lat=lat, lon=lon),
                )
                await t.publish(topics.ds_query, encode(q), qos=0)
                counts["sent"] += 1
                i += 1
            await asyncio.sleep(0.005)
        await asyncio.sleep(1.0)  # late answers
        reader.cancel()
    return counts


def main(argv: list[str] | None = None) -> None:
    """``python -m simulators.flood URL PREFIX --rate R --seconds S --kind K``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("prefix")
    p.add_argument("--rate", type=float, default=300.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--kind", choices=["costly", "cheap", "both"], default="costly")
    a = p.parse_args(argv)
    counts = asyncio.run(
        flood(a.url, Topics(a.prefix), rate_per_s=a.rate, seconds=a.seconds, kind=a.kind)
    )
    print(json.dumps(dict(counts)))


if __name__ == "__main__":
    main()
