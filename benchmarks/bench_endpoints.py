"""What a fresh reply topic costs: one extra broker connection per Protocol 3 / 4 query.

    .venv/bin/python benchmarks/bench_endpoints.py [--quick] [--n N]

Under the shipped ACL a client reads only ``reply/<its client id>``, so Protocol 3's DS hop and
Protocol 4's two per-query topics are read on short-lived connections of their own
(:class:`locpriv.transport.endpoints.ReplyEndpoints`). On a private mosquitto 2.0 with a
password file and a TLS listener (certificates from trustme) this measures, plain and TLS:

* ``connect`` - open a connection (TCP, TLS handshake, CONNECT with password, CONNACK) and
  close it: the price of one fresh reply topic;
* ``p3_fresh`` - a Protocol 3 query (cloak, then DS with the region) as shipped, the DS hop's
  reply topic on its own connection;
* ``p3_shared`` - the same query with the hop's topic subscribed on the main connection (what
  an anonymous broker without ACL allows; the baseline the extra connection is compared with).

Reports medians and p90 (ms); writes benchmarks/results/bench_endpoints.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import secrets
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import trustme

from locpriv.client import Client
from locpriv.config import CloakSection, MqttSection, ServiceConfig
from locpriv.core.geo import LocalProjection
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.broker import MosquittoProcess, free_port
from locpriv.service.ds import DSService
from locpriv.transport import connect
from locpriv.wire.messages import LocationUpdate, NearestQuery, encode
from locpriv.wire.topics import Topics

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_endpoints.json"
PROJ = LocalProjection(41.3874, 2.1686)
TOPICS = Topics("bench")
QUERY = NearestQuery(category="cafe", n=3)
PROFILE = {"k": 5, "a_min_m2": 1e4, "a_max_m2": 4e6, "max_delay_s": 1.0}


def _stats(samples: list[float]) -> dict[str, float]:
    ms = np.asarray(samples) * 1000.0
    return {"n": len(ms), "p50_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90))}


def _broker(tmp: Path) -> tuple[MosquittoProcess, int, str, Path]:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    password = secrets.token_urlsafe(12)
    passwd = tmp / "passwd"
    subprocess.run(
        ["mosquitto_passwd", "-c", str(passwd), "bench"],
        input=f"{password}\n{password}\n",
        text=True,
        check=True,
        capture_output=True,
    )
    for path in tmp.iterdir():  # mosquitto started as root reads them as its own user
        path.chmod(0o644)
    tmp.chmod(0o755)
    tls = free_port()
    extra = (
        f"allow_anonymous false\npassword_file {passwd}\n"
        f"listener {tls} 127.0.0.1\ncertfile {tmp / 'server.pem'}\nkeyfile {tmp / 'server.pem'}\n"
    )
    broker = MosquittoProcess(str(tmp), extra_config=extra)
    broker.start()
    return broker, tls, password, tmp / "ca.pem"


async def _connect_cost(url: str, n: int, **auth: Any) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        async with connect(url, client_id=f"probe-{i}", **auth):
            out.append(time.perf_counter() - t0)
    return out


async def _p3(url: str, n: int, *, shared: bool, **auth: Any) -> list[float]:
    out = []
    lon, lat = PROJ.point_to_lonlat(40.0, -30.0)
    async with Client(url, user_id="u0", prefix=TOPICS.prefix, **auth) as c:
        if shared:  # the hop's topic on the main connection (no ACL on this broker)
            c.endpoints.fresh = lambda topic: False  # type: ignore[method-assign]
        for _ in range(n):
            t0 = time.perf_counter()
            await c.query(QUERY, protocol=3, lon=lon, lat=lat, **PROFILE)
            out.append(time.perf_counter() - t0)
            await asyncio.sleep(0.25)  # stay under the per-user rate limit (5/s)
    return out


async def run(n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmpdir:
        broker, tls_port, password, ca = _broker(Path(tmpdir))
        try:
            plain = f"mqtt://bench@127.0.0.1:{broker.port}"
            tls = f"mqtts://bench@localhost:{tls_port}"
            auth_plain: dict[str, Any] = {"password": password}
            auth_tls: dict[str, Any] = {"password": password, "ca_file": str(ca)}
            config = ServiceConfig(
                prefix=TOPICS.prefix,
                cloak=CloakSection(epoch_s=0.2),
                mqtt=MqttSection(client_id="bench-anon", ds_client_id="bench-ds"),
            )
            services = [
                AnonymizerService(plain, config, password=password),
                DSService(plain, config, password=password),
            ]
            tasks = [asyncio.create_task(s.run()) for s in services]
            for s in services:
                await asyncio.wait_for(s.ready.wait(), 60)
            rng = np.random.default_rng(1)
            async with connect(plain, **auth_plain) as t:
                for i in range(40):
                    lon, lat = PROJ.point_to_lonlat(*rng.uniform(-800, 800, 2))
                    up = LocationUpdate(user_id=f"u{i}", lat=lat, lon=lon, t=time.time())
                    await t.publish(TOPICS.location(f"u{i}"), encode(up))
            await asyncio.sleep(0.5)
            results = {
                "connect_plain": _stats(await _connect_cost(plain, n, **auth_plain)),
                "connect_tls": _stats(await _connect_cost(tls, n, **auth_tls)),
            }
            for name, url, auth in (("plain", plain, auth_plain), ("tls", tls, auth_tls)):
                results[f"p3_shared_{name}"] = _stats(await _p3(url, n, shared=True, **auth))
                results[f"p3_fresh_{name}"] = _stats(await _p3(url, n, shared=False, **auth))
            for s in services:
                s.stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            return results
        finally:
            broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=40)
    args = ap.parse_args()
    n = 8 if args.quick else args.n
    results = asyncio.run(run(n))
    print(f"{'scenario':<18} {'n':>4} {'p50 ms':>8} {'p90 ms':>8}")
    for name, r in results.items():
        print(f"{name:<18} {r['n']:>4} {r['p50_ms']:>8.1f} {r['p90_ms']:>8.1f}")
    for kind in ("plain", "tls"):
        extra = results[f"p3_fresh_{kind}"]["p50_ms"] - results[f"p3_shared_{kind}"]["p50_ms"]
        print(f"extra connection per P3 query ({kind}): {extra:+.1f} ms at p50")
    payload = {
        "benchmark": "bench_endpoints",
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "quick": args.quick,
        "results": results,
    }
    RESULTS.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
