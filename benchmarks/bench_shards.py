"""Tile-sharded anonymizers on one mosquitto: location updates ingested and cloaks served per
second, 1 and 2 shard processes (and more where the machine has the cores), plus what bounds
one process's ingest.

    .venv/bin/python benchmarks/bench_shards.py            # writes results/bench_shards.json
    .venv/bin/python benchmarks/bench_shards.py --quick    # smaller, for a smoke run

Per shard count N, on a private mosquitto (127.0.0.1) with ``[tiles] side_m = 2000`` over a
40 km x 40 km world (``--world-km``; 400 tiles, a city the size issue 13 describes) and ``users``
users spread uniformly (80,000: 50 per km²). Rendezvous hashing gives each shard a share of the
tiles that is random around 1/N (at 2 shards 48.7/51.3 % here; 44/56 % with the 100 tiles of a
20 km world): the busiest shard bounds the speed-up at 1/share, so ``tiles_per_shard`` is reported
beside every figure.

* N processes ``locpriv serve anonymizer --shard I/N --metrics-port P`` (N = 1: no --shard);
* **ingest**: two generator processes publish ``updates`` pre-encoded location updates (QoS 0,
  each on its user's tile topic) as fast as a raw socket takes them; the services' Prometheus
  counters (``locpriv_messages_total{kind="location"}``, summed over shards) are polled every
  0.1 s, and the rate is the count handled between the first and the last change over that time
  (``[limits] max_queue`` is raised so that nothing is dropped: the drain rate is measured);
* **cloaks**: two requester processes keep ``concurrency`` Protocol 3 cloak requests in flight
  each (users of every tile, no position: the last update is used) for ``duration_s``;
  replies/s and p50/p99 latency.

While the updates drain, the CPU used by the whole machine (``/proc/stat``), mosquitto and each
shard is recorded as cores busy (``cores_busy``): on two cores, two shards, mosquitto and the
load generators compete, which bounds the speed-up whatever the services do.

The ceiling of one process is then taken apart on the same machine (``bounds``): the raw MQTT
client alone (a subscriber that only counts, same burst) and locpriv's handling alone (the
dispatcher on pre-received updates, in-process), one by one and batched (all queued updates of
a burst projected in one call and stored with ``Cloaker.update_many``).

Timings on a shared machine are noisy (the one-shard rate alone varied by 40 % between quiet
runs): the shard counts run in ``--repeat`` interleaved rounds (default 3, so 1, 2, 1, 2, 1, 2)
and ``runs`` holds the medians; ``samples`` holds every round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from locpriv.config import ServiceConfig  # noqa: E402
from locpriv.core.geo import LocalProjection  # noqa: E402
from locpriv.core.tiles import Shard, Tiling  # noqa: E402
from locpriv.service.broker import MosquittoProcess, free_port  # noqa: E402
from locpriv.wire.messages import LocationUpdate, encode  # noqa: E402
from locpriv.wire.topics import Topics  # noqa: E402
from simulators.scrape import scrape, total  # noqa: E402

SIDE_M = 2000.0
#: Side of the square world in km; subprocesses read it from the environment (``--world-km``).
WORLD_ENV = "BENCH_SHARDS_WORLD_KM"


def half_m() -> float:
    """Half the world's side (metres), from ``--world-km`` as passed on to every subprocess."""
    return float(os.environ.get(WORLD_ENV, "40")) * 500.0


LAT0, LON0 = 41.3874, 2.1686
OUT = ROOT / "benchmarks" / "results" / "bench_shards.json"


# ------------------------------------------------------------------ population


def population(users: int, seed: int = 7) -> tuple[list[str], np.ndarray, np.ndarray, list[str]]:
    """User ids, (lon, lat) and tile of ``users`` users uniform over the world."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-half_m() + 1, half_m() - 1, size=(users, 2))
    proj = LocalProjection(LAT0, LON0)
    lon, lat = proj.to_lonlat(xy[:, 0], xy[:, 1])
    tiling = Tiling(SIDE_M)
    tiles = [tiling.tile_of(float(x), float(y)) or "" for x, y in xy]
    return [f"u{i}" for i in range(users)], lon, lat, tiles


# ---------------------------------------------------------- raw QoS 0 publisher


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _str(s: bytes) -> bytes:
    return len(s).to_bytes(2, "big") + s


def _publish_packet(topic: str, payload: bytes) -> bytes:
    body = _str(topic.encode()) + payload
    return b"\x30" + _varint(len(body)) + body


def generator(port: int, prefix: str, users: int, part: int, *, parts: int, count: int) -> None:
    """Publish ``count`` location updates of users ``part::parts`` (QoS 0, raw socket)."""
    ids, lon, lat, tiles = population(users)
    topics = Topics(prefix)
    mine = list(range(part, users, parts))
    packets = []
    for j in range(count):
        i = mine[j % len(mine)]
        upd = LocationUpdate(user_id=ids[i], lat=float(lat[i]), lon=float(lon[i]), t=1.0)
        packets.append(_publish_packet(topics.location(ids[i], tile=tiles[i]), encode(upd)))
    blob = b"".join(packets)
    cid = f"gen{part}-{os.getpid()}".encode()
    var = b"\x00\x04MQTT\x04\x02\x00\x3c" + _str(cid)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"\x10" + _varint(len(var)) + var)
        s.recv(4)  # CONNACK
        print("ready", flush=True)
        sys.stdin.readline()  # go
        t0 = time.perf_counter()
        for k in range(0, len(blob), 1 << 20):
            s.sendall(blob[k : k + (1 << 20)])
        s.sendall(b"\xe0\x00")  # DISCONNECT
        print(json.dumps({"sent": count, "send_s": time.perf_counter() - t0}), flush=True)


# ----------------------------------------------------------------- requester


async def requester(url: str, prefix: str, users: int, part: int, *, conc: int, dur: float) -> None:
    """Keep ``conc`` cloak requests in flight for ``dur`` seconds; print latencies."""
    from load_requester import Requester

    from locpriv.transport import connect
    from locpriv.wire.messages import CloakReply, CloakRequest, PrivacyProfile

    ids, _lon, _lat, tiles = population(users)
    topics = Topics(prefix)
    rng = np.random.default_rng(part)
    profile = PrivacyProfile(k=10, a_min_m2=1e4, a_max_m2=4e6)
    lat_ms: list[float] = []
    errors: dict[str, int] = {}
    async with connect(url, client_id=f"req{part}-{os.getpid()}") as t:
        req = Requester(t, topics.reply(t.client_id))
        await req.start()
        pump = asyncio.create_task(_pump(t, req))
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        end = time.perf_counter() + dur

        async def worker() -> None:
            while time.perf_counter() < end:
                i = int(rng.integers(users))
                msg = CloakRequest(
                    correlation_id="x", reply_to=req.reply_to, user_id=ids[i], profile=profile
                )
                t0 = time.perf_counter()
                try:
                    reply = await req.request(topics.p3_cloak(ids[i], tile=tiles[i]), msg, 10.0)
                except Exception as exc:  # counted, the load goes on
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                    continue
                if isinstance(reply, CloakReply):
                    lat_ms.append((time.perf_counter() - t0) * 1e3)
                else:
                    errors[type(reply).__name__] = errors.get(type(reply).__name__, 0) + 1

        await asyncio.gather(*(worker() for _ in range(conc)))
        pump.cancel()
    print(json.dumps({"latencies_ms": lat_ms, "errors": errors, "duration_s": dur}), flush=True)


async def _pump(t: Any, req: Any) -> None:
    async for item in t.messages():
        req.feed(item)


# ------------------------------------------------------------------- services


def _config_file(work: Path, prefix: str) -> Path:
    path = work / f"{prefix}.toml"
    path.write_text(
        f'prefix = "{prefix}"\n[tiles]\nside_m = {SIDE_M}\n'
        f"[cloak]\nworld_half_m = {half_m()}\nepoch_s = 1.0\n"
        "[limits]\nmax_queue = 10000000\nrequests_per_s = 1e6\nburst = 1e6\n"
        f'max_pending_per_user = 1000\n[mqtt]\nclient_id = "{prefix}-anon"\n'
    )
    return path


def _spawn(args: list[str], **kw: Any) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCPRIV_")}
    return subprocess.Popen(args, env=env, text=True, **kw)


def start_shards(url: str, cfg: Path, n: int, work: Path) -> list[tuple[Any, int]]:
    exe = str(Path(sys.executable).parent / "locpriv")
    procs = []
    for i in range(n):
        port = free_port()
        argv = [exe, "serve", "anonymizer", "--broker", url, "--config", str(cfg)]
        argv += ["--metrics-port", str(port)] + (["--shard", f"{i}/{n}"] if n > 1 else [])
        log = (work / f"{cfg.stem}-{i}.log").open("w")
        procs.append((_spawn(argv, stdout=log, stderr=subprocess.STDOUT), port, log))
    for p, _port, log in procs:
        deadline = time.monotonic() + 90
        while "serving " not in Path(log.name).read_text():
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(Path(log.name).read_text()[-2000:])
            time.sleep(0.1)
    return [(p, port) for p, port, _ in procs]


def stop(procs: list[Any]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def handled(ports: list[int]) -> list[float]:
    """``locpriv_messages_total{kind="location"}`` of each shard."""
    return [total(scrape(port), "locpriv_messages_total", kind="location") for port in ports]


def _go(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"load process did not start: {line!r}")
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _busy_s() -> float:
    """CPU seconds all cores spent not idle so far (``/proc/stat``)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICK


def generators(port: int, prefix: str, users: int, updates: int) -> list[subprocess.Popen[str]]:
    """Two generator processes, each ready to publish half of ``updates`` (see :func:`_go`)."""
    args = ["--port", str(port), "--prefix", prefix, "--users", str(users)]
    args += ["--updates", str(updates // 2)]
    return [
        _spawn(
            [sys.executable, __file__, "--role", "gen", *args, "--part", str(g)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for g in range(2)
    ]


def ingest(
    port: int, prefix: str, users: int, updates: int, ports: list[int], *, pids: dict[str, int]
) -> dict[str, Any]:
    """Updates/s drained by the shards, and where the CPU went meanwhile: cores busy on the
    whole machine and per process (``pids``: role -> pid), over the measured window."""
    gens = generators(port, prefix, users, updates)
    _go(gens)
    samples: list[tuple[float, float]] = []
    cpu: list[dict[str, float]] = []
    last_change = time.monotonic()
    prev = -1.0
    while time.monotonic() - last_change < 3.0:
        now = time.monotonic()
        total = sum(handled(ports))
        samples.append((now, total))
        cpu.append({"machine": _busy_s()} | {role: _cpu_s(pid) for role, pid in pids.items()})
        if total != prev:
            prev, last_change = total, now
        if total >= updates:
            break
        time.sleep(0.1)
    sent = [json.loads(g.communicate(timeout=60)[0].strip().splitlines()[-1]) for g in gens]
    moving = [(t, c) for t, c in samples if c > 0]
    first = moving[0]
    final = next(s for s in moving if s[1] == moving[-1][1])
    span = max(final[0] - first[0], 1e-9)
    rate = (final[1] - first[1]) / span
    i0, i1 = samples.index(first), samples.index(final)
    cores_busy = {role: (cpu[i1][role] - cpu[i0][role]) / span for role in cpu[0]}
    return {
        "updates_per_s": rate,
        "cores_busy": cores_busy,
        "handled": moving[-1][1],
        "sent": sum(s["sent"] for s in sent),
        "send_s": max(s["send_s"] for s in sent),
        "per_shard": handled(ports),
    }


def cloaks(url: str, prefix: str, users: int, conc: int, dur: float) -> dict[str, Any]:
    me = [sys.executable, __file__]
    reqs = [
        _spawn(
            [
                *me,
                "--role",
                "req",
                "--url",
                url,
                "--prefix",
                prefix,
                "--users",
                str(users),
                "--part",
                str(r),
                "--concurrency",
                str(conc),
                "--duration-s",
                str(dur),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for r in range(2)
    ]
    _go(reqs)
    outs = [json.loads(r.communicate(timeout=dur + 60)[0].strip().splitlines()[-1]) for r in reqs]
    lat = np.array([x for o in outs for x in o["latencies_ms"]])
    errors: dict[str, int] = {}
    for o in outs:
        for k, v in o["errors"].items():
            errors[k] = errors.get(k, 0) + v
    return {
        "cloaks_per_s": len(lat) / dur,
        "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
        "errors": errors,
    }


def _median_run(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One shard count's rounds summarised: medians of the rates, latencies and CPU figures."""
    out = dict(rounds[0])
    for key in ("updates_per_s", "cloaks_per_s", "p50_ms", "p99_ms", "send_s"):
        values = [r[key] for r in rounds if r.get(key) is not None]
        out[key] = float(np.median(values)) if values else None
    out["cores_busy"] = {
        role: float(np.median([r["cores_busy"][role] for r in rounds]))
        for role in rounds[0]["cores_busy"]
    }
    out["rounds"] = len(rounds)
    return out


# ---------------------------------------------------------------- what bounds it


def bound_mqtt_client(port: int, users: int, updates: int) -> float:
    """Messages/s a bare locpriv MQTT transport takes in (subscribe, count, nothing else)."""
    from locpriv.transport import connect

    prefix = f"raw{os.getpid()}"

    async def run() -> float:
        async with connect(f"mqtt://127.0.0.1:{port}") as t:
            await t.subscribe(Topics(prefix).location_filter, qos=1)
            gens = generators(port, prefix, users, updates)
            await asyncio.to_thread(_go, gens)
            n, t0, t1 = 0, 0.0, 0.0
            stream = t.messages().__aiter__()
            while n < updates:  # until all arrived or none for 2 s (the broker may drop QoS 0)
                try:
                    await asyncio.wait_for(stream.__anext__(), 30.0 if n == 0 else 2.0)
                except (TimeoutError, StopAsyncIteration):
                    break
                n += 1
                if n == 1:
                    t0 = time.perf_counter()
                t1 = time.perf_counter()
            for g in gens:
                g.communicate(timeout=30)
            return (n - 1) / max(t1 - t0, 1e-9)

    return asyncio.run(run())


def bound_handling(users: int, count: int) -> dict[str, float]:
    """Updates/s of the dispatcher alone (decode, identity and tile checks, projection, table),
    one by one, and batched: positions projected in one call and stored with update_many."""
    from locpriv.core.cloak.tiled import TileCloakers
    from locpriv.protocols.dispatch import Dispatcher
    from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core
    from locpriv.wire.envelope import Received
    from locpriv.wire.messages import decode

    config = ServiceConfig.model_validate(
        {"tiles": {"side_m": SIDE_M}, "cloak": {"world_half_m": half_m()}}
    )
    topics = config.topics
    ids, lon, lat, tiles = population(users)
    rec = []
    for j in range(count):
        i = j % users
        upd = LocationUpdate(user_id=ids[i], lat=float(lat[i]), lon=float(lon[i]), t=1.0)
        rec.append(Received(topics.location(ids[i], tile=tiles[i]), encode(upd)))
    core = build_trusted_core(config, topics.reply("x"))
    d = Dispatcher(
        name="anonymizer",
        machine=core,
        routes=anonymizer_routes(
            topics, topics.reply("x"), anonymizer=core.anonymizer, limits=core.limits
        ),
        topics=topics,
        max_payload=65536,
    )
    t0 = time.perf_counter()
    for r in rec:
        d.handle(r, 1000.0)
    one = count / (time.perf_counter() - t0)
    # batched: decode each, one projection for the burst, update_many per tile
    cloakers = TileCloakers(config.cloak_config(), config.tiling())
    proj = config.make_projection()
    tiling = config.tiling()
    t0 = time.perf_counter()
    for k in range(0, count, 1000):
        msgs = [decode(r.payload) for r in rec[k : k + 1000]]
        xs, ys = proj.to_xy([m.lon for m in msgs], [m.lat for m in msgs])  # type: ignore[attr-defined]
        side = tiling.side_m or 1.0
        ix, iy = np.floor(xs / side).astype(np.int64), np.floor(ys / side).astype(np.int64)
        groups: dict[str, list[int]] = {}
        for j, (a, b) in enumerate(zip(ix.tolist(), iy.tolist(), strict=True)):
            groups.setdefault(f"t{a}_{b}", []).append(j)
        for tile, rows in groups.items():
            c = cloakers.cloaker(tile)
            c.update_many(
                [msgs[j].user_id for j in rows],  # type: ignore[attr-defined]
                np.column_stack([xs[rows], ys[rows]]),
                1000.0,
            )
    batched = count / (time.perf_counter() - t0)
    return {"handle_one_by_one_per_s": one, "handle_batched_per_s": batched}


# ------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=("main", "gen", "req"), default="main")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--url", default="")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--users", type=int, default=80_000)
    ap.add_argument(
        "--world-km", type=float, default=None, help="side of the square world (default 40)"
    )
    ap.add_argument("--updates", type=int, default=90_000)  # below mosquitto's queue
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--duration-s", type=float, default=8.0)
    ap.add_argument("--shards", default="")
    ap.add_argument("--repeat", type=int, default=3, help="rounds over the shard counts")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    if a.world_km is not None:
        os.environ[WORLD_ENV] = str(a.world_km)
    if a.role == "gen":
        generator(a.port, a.prefix, a.users, a.part, parts=2, count=a.updates)
        return
    if a.role == "req":
        asyncio.run(
            requester(a.url, a.prefix, a.users, a.part, conc=a.concurrency, dur=a.duration_s)
        )
        return
    if a.quick:
        a.users, a.updates, a.duration_s = 16_000, 40_000, 3.0
    cores = os.cpu_count() or 1
    counts = [int(x) for x in a.shards.split(",")] if a.shards else [1, 2]
    if not a.shards and cores >= 4:
        counts.append(4)
    samples: list[dict[str, Any]] = []
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        broker = MosquittoProcess(tmp)
        broker.start()
        try:
            bounds = {
                "mqtt_client_only_per_s": bound_mqtt_client(broker.port, a.users, a.updates),
                **bound_handling(a.users, min(a.updates, 100_000)),
            }
            for n in [n for _ in range(a.repeat) for n in counts]:  # interleaved rounds
                prefix = f"b{n}x{os.getpid()}x{len(samples)}"
                cfg = _config_file(work, prefix)
                shards = start_shards(broker.url, cfg, n, work)
                try:
                    ports = [port for _, port in shards]
                    pids = {"mosquitto": broker._proc.pid}
                    pids |= {f"shard{i}": p.pid for i, (p, _) in enumerate(shards)}
                    ing = ingest(broker.port, prefix, a.users, a.updates, ports, pids=pids)
                    clk = cloaks(broker.url, prefix, a.users, a.concurrency, a.duration_s)
                finally:
                    stop([p for p, _ in shards])
                share = [
                    sum(Shard(i, n).owns(t) for t in set(population(a.users)[3])) for i in range(n)
                ]
                samples.append({"shards": n, **ing, **clk, "tiles_per_shard": share})
                print(json.dumps(samples[-1]), flush=True)
        finally:
            broker.stop()
    runs = [_median_run([r for r in samples if r["shards"] == n]) for n in counts]
    base = runs[0]
    for r in runs:
        r["updates_speedup"] = r["updates_per_s"] / base["updates_per_s"]
        r["cloaks_speedup"] = r["cloaks_per_s"] / base["cloaks_per_s"]
    rounds = [samples[i : i + len(counts)] for i in range(0, len(samples), len(counts))]
    pairwise = [r[1]["updates_per_s"] / r[0]["updates_per_s"] for r in rounds if len(r) > 1]
    result = {
        "machine": {
            "cores": cores,
            "python": platform.python_version(),
            "load_avg_start": load_start,  # 1, 5, 15 min: was the machine quiet?
            "load_avg_end": os.getloadavg(),
        },
        "params": {
            "users": a.users,
            "updates": a.updates,
            "tile_side_m": SIDE_M,
            "world_m": 2 * half_m(),
            "requesters": 2,
            "concurrency_each": a.concurrency,
            "duration_s": a.duration_s,
            "update_qos": 0,
            "repeat": a.repeat,
        },
        "runs": runs,
        "updates_speedup_2_per_round": pairwise,
        "samples": samples,
        "bounds": bounds,
    }
    print()
    print("| shards | updates/s | x | cloaks/s | x | p50 ms | p99 ms | tiles per shard |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['shards']} | {r['updates_per_s']:.0f} | {r['updates_speedup']:.2f} "
            f"| {r['cloaks_per_s']:.0f} | {r['cloaks_speedup']:.2f} | {r['p50_ms']:.1f} "
            f"| {r['p99_ms']:.1f} | {r['tiles_per_shard']} |"
        )
    print()
    print(
        "medians of",
        a.repeat,
        "interleaved rounds; 2 vs 1 shards per round:",
        ", ".join(f"{x:.2f}" for x in pairwise),
    )
    print()
    print("cores busy while the updates drained (machine, and per process):")
    for r in runs:
        busy = ", ".join(f"{k} {v:.2f}" for k, v in r["cores_busy"].items())
        print(f"  {r['shards']} shard(s): {busy}")
    print()
    print("one process's ingest, taken apart (updates/s):")
    for k, v in bounds.items():
        print(f"  {k}: {v:.0f}")
    if not a.quick:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
