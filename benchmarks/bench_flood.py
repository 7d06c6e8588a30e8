"""One login floods DS; what alice (Protocol 2 through the mediator) keeps, over mosquitto.

    .venv/bin/python benchmarks/bench_flood.py [--quick] [--rate R] [--seconds S]

Starts a private mosquitto 2.0, then for each scenario fresh ``locpriv serve anonymizer`` and
``locpriv serve ds`` processes (sharing an answer key), seeds 40 users, and has alice send
Protocol 2 nearest-3 queries one after another (100 ms apart): first ``--quiet`` of them with
nothing else going on, then for ``--seconds`` while one client (:mod:`simulators.flood`, its own
process) publishes ``--rate`` valid DS queries per second on the public ``ds/query``:

* ``costly`` - "everything within 100 km" (the demo set: all 5,000 POIs);
* ``cheap`` - the nearest cafe;
* ``both`` - alternating.

``defaults`` runs the shipped ``[limits]`` (cost limit ``ds_max_answer_pois = 2000``, service
lane weight 8, waiting-time bound 1 s, public lane 500/s); ``off`` the same code with the
defences turned as far off as the configuration allows (``ds_max_answer_pois = 10000``,
weight 1, ``ds_max_wait_s`` and ``ds_public_per_s`` huge): what a flood did before them.
Reports alice's answered share and her flood p99 as a multiple of her quiet p99 (goal: >= 95 %
and < 10x), and what the flooder got back. The machine is shared with other work: the
ratios are what counts. Writes benchmarks/results/bench_flood.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_e2e import _spawn, _stop

from locpriv.client import Client
from locpriv.core.geo import LocalProjection
from locpriv.errors import LocprivError
from locpriv.service.broker import MosquittoProcess
from locpriv.transport import connect
from locpriv.wire.messages import LocationUpdate, NearestQuery, encode
from locpriv.wire.topics import Topics

ROOT = Path(__file__).resolve().parents[1]
PROJ = LocalProjection(41.3874, 2.1686)
TOPICS = Topics("flood")
ALICE = PROJ.point_to_lonlat(210.0, -140.0)
CAFE3 = NearestQuery(category="cafe", n=3)
OFF = (
    "ds_max_answer_pois = 10000\nds_service_weight = 1\nds_max_wait_s = 1e9\n"
    "ds_public_per_s = 1e9\nds_public_burst = 1e9\n"
)


async def _seed(url: str) -> None:
    rng = np.random.default_rng(1)
    xy = rng.uniform(-1500, 1500, size=(40, 2))
    lon, lat = PROJ.to_lonlat(xy[:, 0], xy[:, 1])
    async with connect(url) as t:
        for i in range(40):
            u = LocationUpdate(user_id=f"u{i}", lat=float(lat[i]), lon=float(lon[i]), t=time.time())
            await t.publish(TOPICS.location(f"u{i}"), encode(u))


async def _alice(alice: Client, n: int | None, until: float | None) -> tuple[list[float], int]:
    """P2 queries 100 ms apart (``n`` of them, or until ``until``): latencies (s), failures."""
    lat: list[float] = []
    failed = 0
    while (n is not None and len(lat) + failed < n) or (until and time.monotonic() < until):
        t0 = time.perf_counter()
        try:
            await alice.query(CAFE3, protocol=2, lon=ALICE[0], lat=ALICE[1])
        except LocprivError:
            failed += 1
        else:
            lat.append(time.perf_counter() - t0)
        await asyncio.sleep(0.1)
    return lat, failed


def _ms(values: list[float], q: float) -> float | None:
    return float(np.quantile(values, q) * 1e3) if values else None


async def scenario(
    url: str, tmp: Path, *, name: str, kind: str, rate: float, seconds: float, quiet_n: int
) -> dict[str, Any]:
    """One scenario on fresh services; alice's quiet and flood figures."""
    key = tmp / "answer.key"
    toml = tmp / f"{name}-{kind}.toml"
    limits = "requests_per_s = 100.0\nburst = 100.0\n" + (OFF if name == "off" else "")
    toml.write_text(
        f'prefix = "{TOPICS.prefix}"\n[limits]\n{limits}[state]\nanswer_key_file = "{key}"\n'
    )
    env = {**os.environ, "LOCPRIV_LOG": "WARNING"}
    opts = ["--broker", url, "--config", str(toml)]
    procs = [
        _spawn(["-m", "locpriv", "-q", "serve", "anonymizer", *opts], env),
        _spawn(["-m", "locpriv", "-q", "serve", "ds", *opts], env),
    ]
    try:
        await _seed(url)
        async with Client(url, user_id="alice", prefix=TOPICS.prefix, timeout_s=10) as alice:
            await alice.update_location(lon=ALICE[0], lat=ALICE[1])
            await _alice(alice, 5, None)
            quiet, quiet_failed = await _alice(alice, quiet_n, None)
            flooder = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "simulators.flood",
                    url,
                    TOPICS.prefix,
                    "--rate",
                    str(rate),
                    "--seconds",
                    str(seconds),
                    "--kind",
                    kind,
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                env=env,
            )
            await asyncio.sleep(1.0)
            loud, loud_failed = await _alice(alice, None, time.monotonic() + seconds - 1.0)
            out, _ = await asyncio.to_thread(flooder.communicate)
    finally:
        for p in procs:
            _stop(p)
    counts = json.loads(out.decode().strip().splitlines()[-1])
    counts.pop("DeploymentConfig", None)
    q99, l99 = _ms(quiet, 0.99), _ms(loud, 0.99)
    total = len(loud) + loud_failed
    return {
        "defences": name,
        "flood": kind,
        "rate_per_s": rate,
        "quiet": {
            "n": len(quiet),
            "failed": quiet_failed,
            "p50_ms": _ms(quiet, 0.5),
            "p99_ms": q99,
        },
        "flood_window": {
            "n": total,
            "answered": len(loud),
            "p50_ms": _ms(loud, 0.5),
            "p99_ms": l99,
        },
        "answered_share": len(loud) / total if total else 0.0,
        "p99_ratio": (l99 / q99) if (l99 and q99) else None,
        "flooder_got": counts,
    }


async def run(rate: float, seconds: float, quiet_n: int, kinds: list[str]) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory() as tmpdir, MosquittoProcess(tmpdir) as mosquitto:
        tmp = Path(tmpdir)
        (tmp / "answer.key").write_text(secrets.token_hex(32))
        for name in ("defaults", "off"):
            for kind in kinds:
                r = await scenario(
                    mosquitto.url,
                    tmp,
                    name=name,
                    kind=kind,
                    rate=rate,
                    seconds=seconds,
                    quiet_n=quiet_n,
                )
                print(
                    f"{name:<9} {kind:<7} answered {r['answered_share']:>6.1%}  quiet p99 "
                    f"{r['quiet']['p99_ms'] or 0:>7.1f} ms  flood p99 "
                    f"{r['flood_window']['p99_ms'] or 0:>8.1f} ms  ratio "
                    f"{r['p99_ratio'] or float('nan'):>6.1f}x  flooder {r['flooder_got']}",
                    flush=True,
                )
                out.append(r)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one kind (both), 6 s")
    parser.add_argument("--rate", type=float, default=400.0, help="flood queries per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="flood duration")
    parser.add_argument("--quiet", type=int, default=40, help="alice's quiet queries")
    args = parser.parse_args()
    kinds = ["both"] if args.quick else ["costly", "cheap", "both"]
    seconds = 6.0 if args.quick else args.seconds
    results = asyncio.run(run(args.rate, seconds, args.quiet, kinds))
    payload = {
        "benchmark": "bench_flood",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "settings": {"rate_per_s": args.rate, "seconds": seconds, "quiet": args.quiet},
        "note": "mosquitto 2.0; anonymizer, DS and the flooder in their own processes, alice "
        "in this one; shared machine: compare ratios",
        "goal": "answered_share >= 0.95 and p99_ratio < 10 with defences on",
        "results": results,
    }
    out = ROOT / "benchmarks" / "results" / "bench_flood.json"
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
