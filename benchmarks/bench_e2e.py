"""End-to-end request/reply throughput over mosquitto: locpriv services vs a raw aiomqtt echo.

    .venv/bin/python benchmarks/bench_e2e.py [--quick] [--duration S] [--concurrency N]

Starts a private mosquitto 2.0 on 127.0.0.1, then measures, each for ``--duration`` seconds with
``--concurrency`` requests in flight from one load-generator connection (locpriv's
:class:`load_requester.Requester` over :class:`~locpriv.transport.MqttTransport`, the same
for every
scenario):

* ``raw_echo`` - a bare aiomqtt 2.5 client in its own process that parses each JSON request and
  publishes a reply to its ``reply_to`` (QoS 1, publishes not serialised): the MQTT client
  library's own request/reply rate on this machine;
* ``raw_relay`` - a second bare aiomqtt process relaying each request to the echo and the reply
  back: two round trips through the broker and two server processes, the shape of Protocol 2,
  without any locpriv code;
* ``p3_cloak`` - Protocol 3 cloak requests to ``locpriv serve anonymizer`` (own process) over a
  population of 2,000 users (k=5, 1e4 < A < 4e6 m²);
* ``p2_query`` - Protocol 2 nearest-3 queries: user -> mediator -> DS -> mediator -> user (two
  round trips through the broker; anonymizer and DS in separate processes).

The scenarios run interleaved for ``--rounds`` rounds; each reports its median round: requests/s,
p50/p99 latency and the rate as a fraction of ``raw_echo`` (goal >= 50 %); ``p2_query`` also
as a fraction of ``raw_relay``.
The machine is shared with other work, so the numbers are pessimistic. Writes
benchmarks/results/bench_e2e.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from load_requester import Requester

from locpriv.core.geo import LocalProjection
from locpriv.errors import RemoteError, RequestTimeout
from locpriv.service.broker import MosquittoProcess
from locpriv.transport import connect
from locpriv.wire.messages import (
    CloakRequest,
    DSQuery,
    LocationUpdate,
    Message,
    NearestQuery,
    PointLocation,
    PrivacyProfile,
    QueryRequest,
    encode,
)
from locpriv.wire.topics import Topics

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_e2e.json"
TOPICS = Topics("bench")
ECHO_TOPIC = "bench/echo/req"
RELAY_TOPIC = "bench/relay/req"
PROJ = LocalProjection(41.3874, 2.1686)
USERS = 2000


# ------------------------------------------------------------------ echo server


async def echo_server(url: str, role: str) -> None:
    """Bare aiomqtt baselines, until killed: ``role="echo"`` answers on ``ECHO_TOPIC``;
    ``role="relay"`` (its own process, like the mediator) forwards each request on
    ``RELAY_TOPIC`` to the echo and the echo's reply back: two round trips through the broker,
    the shape of Protocol 2."""
    import aiomqtt

    host, port = url.removeprefix("mqtt://").split(":")
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]  # as locpriv's transport does
    own_reply = "bench/relay/reply"
    waiting: dict[str, tuple[str, str]] = {}
    async with aiomqtt.Client(
        host, int(port), identifier=f"bench-{role}", socket_options=nodelay
    ) as client:
        client.pending_calls_threshold = 10_000
        if role == "echo":
            await client.subscribe(ECHO_TOPIC, qos=1)
        else:
            await client.subscribe(RELAY_TOPIC, qos=1)
            await client.subscribe(own_reply, qos=1)
        print("ready", flush=True)
        tasks: set[asyncio.Task[None]] = set()
        async for message in client.messages:
            assert isinstance(message.payload, bytes)
            req = json.loads(message.payload)
            topic = message.topic.value
            if topic == ECHO_TOPIC:
                out_topic = req["reply_to"]
                out = {"type": "query_answer", "correlation_id": req["correlation_id"], "pois": []}
            elif topic == RELAY_TOPIC:
                fresh = f"r{len(waiting)}-{req['correlation_id']}"
                waiting[fresh] = (req["reply_to"], req["correlation_id"])
                out_topic = ECHO_TOPIC
                out = {**req, "correlation_id": fresh, "reply_to": own_reply}
            else:
                back_to, cid = waiting.pop(req["correlation_id"])
                out_topic, out = back_to, {**req, "correlation_id": cid}
            task = asyncio.create_task(client.publish(out_topic, json.dumps(out).encode(), qos=1))
            tasks.add(task)
            task.add_done_callback(tasks.discard)


# ---------------------------------------------------------------- load generator


async def load(
    url: str,
    topic: str | Callable[[Message], str],
    make: Callable[[int], Message],
    *,
    duration_s: float,
    concurrency: int,
    warmup_s: float,
) -> dict[str, Any]:
    """Closed-loop load: ``concurrency`` workers each send the next request on a reply."""
    async with connect(url) as transport:
        requester = Requester(transport, TOPICS.reply(transport.client_id))
        await requester.start()
        runner = asyncio.create_task(requester.run())
        loop = asyncio.get_running_loop()
        start = loop.time()
        measure_from = start + warmup_s
        end = measure_from + duration_s
        latencies: list[float] = []
        errors: dict[str, int] = {}
        counter = iter(range(10**9))

        async def worker() -> None:
            while loop.time() < end:
                t0 = loop.time()
                message = make(next(counter))
                where = topic if isinstance(topic, str) else topic(message)
                try:
                    await requester.request(where, message, 10.0)
                except RemoteError as exc:
                    if t0 >= measure_from:
                        errors[exc.code] = errors.get(exc.code, 0) + 1
                except RequestTimeout:
                    errors["timeout"] = errors.get("timeout", 0) + 1
                    continue
                t1 = loop.time()
                if t0 >= measure_from and t1 <= end:
                    latencies.append(t1 - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        runner.cancel()
    lat = np.asarray(latencies) * 1000.0
    return {
        "requests_per_s": len(lat) / duration_s,
        "completed": len(lat),
        "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
        "errors": errors,
    }


def _random_points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-3000, 3000, size=(n, 2))
    return PROJ.to_lonlat(xy[:, 0], xy[:, 1])


async def seed_users(url: str) -> None:
    """USERS users publish one location update each."""
    lon, lat = _random_points(USERS, 11)
    now = time.time()
    async with connect(url) as t:
        for i in range(USERS):
            update = LocationUpdate(user_id=f"u{i}", lat=float(lat[i]), lon=float(lon[i]), t=now)
            await t.publish(TOPICS.location(f"u{i}"), encode(update), qos=1)


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if b"ready" in line or b"serving" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"{args} did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def run(duration_s: float, concurrency: int, warmup_s: float, rounds: int) -> dict[str, Any]:
    """``rounds`` rounds of the three scenarios, interleaved; each scenario's median round."""
    env = {**os.environ, "LOCPRIV_LOG": "WARNING"}
    per_round: dict[str, list[dict[str, Any]]] = {
        "raw_echo": [],
        "raw_relay": [],
        "p3_cloak": [],
        "p2_query": [],
    }
    with tempfile.TemporaryDirectory() as tmp, MosquittoProcess(tmp) as mosquitto:
        url = mosquitto.url
        toml = Path(tmp) / "locpriv.toml"
        toml.write_text('prefix = "bench"\n[limits]\nmax_queue = 100000\npublishers = 128\n')
        common: dict[str, Any] = {
            "duration_s": duration_s,
            "concurrency": concurrency,
            "warmup_s": warmup_s,
        }
        serve = ["-m", "locpriv", "-q", "serve"]
        opts = ["--broker", url, "--config", str(toml)]
        procs = [
            _spawn([__file__, "--echo-server", url, "--role", "echo"], env),
            _spawn([__file__, "--echo-server", url, "--role", "relay"], env),
            _spawn([*serve, "anonymizer", *opts], env),
            _spawn([*serve, "ds", *opts], env),
        ]
        try:
            await seed_users(url)
            await asyncio.sleep(1.5)  # the next epoch's snapshot holds everyone
            profile = PrivacyProfile(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=1.0)
            lon, lat = _random_points(4096, 12)

            def echo_msg(i: int) -> Message:
                return DSQuery(
                    correlation_id="x",
                    reply_to="x",
                    query=NearestQuery(category="cafe", n=3),
                    location=PointLocation(lat=41.39, lon=2.17),
                )

            def cloak_msg(i: int) -> Message:
                return CloakRequest(
                    correlation_id="x", reply_to="x", user_id=f"u{i % USERS}", profile=profile
                )

            def query_msg(i: int) -> Message:
                return QueryRequest(
                    correlation_id="x",
                    reply_to="x",
                    user_id=f"u{i % USERS}",
                    protocol=2,
                    lat=float(lat[i % 4096]),
                    lon=float(lon[i % 4096]),
                    query=NearestQuery(category="cafe", n=3),
                )

            scenarios = [
                ("raw_echo", ECHO_TOPIC, echo_msg),
                ("raw_relay", RELAY_TOPIC, echo_msg),
                # each request on its user's own topic (what a broker ACL binds to a login)
                ("p3_cloak", lambda m: TOPICS.p3_cloak(m.user_id), cloak_msg),  # type: ignore[attr-defined]
                ("p2_query", lambda m: TOPICS.p2_query(m.user_id), query_msg),  # type: ignore[attr-defined]
            ]
            for _ in range(rounds):
                for name, topic, make in scenarios:
                    per_round[name].append(await load(url, topic, make, **common))
        finally:
            for proc in procs:
                _stop(proc)
    results: dict[str, Any] = {}
    for name, runs in per_round.items():
        ordered = sorted(runs, key=lambda r: r["requests_per_s"])
        results[name] = {
            **ordered[len(ordered) // 2],
            "rounds_requests_per_s": [round(r["requests_per_s"], 1) for r in runs],
        }
    raw = results["raw_echo"]["requests_per_s"] or 1.0
    for name in ("raw_relay", "p3_cloak", "p2_query"):
        results[name]["fraction_of_raw"] = results[name]["requests_per_s"] / raw
    relay = results["raw_relay"]["requests_per_s"] or 1.0
    results["p2_query"]["fraction_of_raw_relay"] = results["p2_query"]["requests_per_s"] / relay
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s per scenario")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds measured each")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--echo-server", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--role", default="echo", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server:
        asyncio.run(echo_server(args.echo_server, args.role))
        return
    duration = 2.0 if args.quick else args.duration
    warmup = 0.5 if args.quick else 1.5
    rounds = 1 if args.quick else args.rounds
    results = asyncio.run(run(duration, args.concurrency, warmup, rounds))
    print(f"{'scenario':<10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'of raw':>7}  errors")
    for name, r in results.items():
        frac = r.get("fraction_of_raw")
        print(
            f"{name:<10} {r['requests_per_s']:>9.0f} {r['p50_ms'] or 0:>8.2f} "
            f"{r['p99_ms'] or 0:>8.2f} {'' if frac is None else f'{frac:.0%}':>7}  "
            f"{r['errors'] or ''}"
        )
    print(
        f"p2_query / raw_relay (same two round trips, no locpriv code): "
        f"{results['p2_query']['fraction_of_raw_relay']:.0%}"
    )
    payload = {
        "benchmark": "bench_e2e",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "settings": {
            "duration_s": duration,
            "warmup_s": warmup,
            "concurrency": args.concurrency,
            "rounds": rounds,
        },
        "note": "one load-generator connection; services in their own processes; "
        "shared machine, so pessimistic",
        "goal": "p3_cloak and p2_query >= 50% of raw_echo requests/s "
        "(p2_query makes two broker round trips: compare raw_relay too)",
        "results": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
