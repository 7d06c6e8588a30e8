"""Fleet runner: simulated devices speak the real wire protocol through a real broker, real clock.

A fleet is split into *shards* (users ``i`` with ``i % shards == s``); each shard
(:class:`simulators.fleet.shard.Shard`) is one asyncio task holding **one** broker connection
for all its devices, and shards run in several processes (:mod:`multiprocessing`, spawn) for load.
:func:`run_fleet` starts the worker processes and merges their results, :func:`run_fleet_async`
runs shards in the caller's event loop. What a device does is described in
:mod:`simulators.fleet.shard` (location updates, P1-P3) and :mod:`simulators.fleet.hub` (P4).

Each query yields a :class:`~simulators.evaluate.QueryRecord` with ground truth from the
trajectories (true position, users truly inside a region, exact POI answer). Message and byte
counts are those the device sends and receives (P4 includes its broadcasts and the replies it
collects); the mediator-DS hop of P1/P2 is not visible to the device. ``k_achieved`` of P1 and
P3 is the number of users truly inside the region when the answer arrives; P3's
``k_reported`` is the anonymizer's count (from reported positions; P1 and P3 answers carry it).
Anonymisation latency is the cloak reply's arrival for P3, the collection windows
(``window_s`` x rounds) for P4, and not observable for P1/P2 (end-to-end latency only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing as mp
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from locpriv.core.poi import POIIndex
from locpriv.protocols.user import ProfileBounds
from simulators.evaluate import QueryRecord, RunStats
from simulators.fleet.shard import Shard
from simulators.peers import P4Knobs
from simulators.scenario import BuiltScenario
from simulators.virtual.runner import load_poi_index

__all__ = ["FleetOptions", "FleetResult", "Progress", "run_fleet", "run_fleet_async"]


@dataclass(frozen=True)
class FleetOptions:
    """How the fleet runs; times in seconds, distances in metres."""

    url: str
    processes: int = 1
    """Worker processes (0: run every shard in the caller's event loop)."""
    shards_per_process: int = 1
    prefix: str = "locpriv"
    request_timeout_s: float = 10.0
    start_delay_s: float = 2.0
    """Time between the initial location burst and scenario time 0."""
    drain_s: float = 5.0
    """After the scenario ends, how long to wait for answers still in flight."""
    update_qos: int = 0
    progress_every_s: float = 0.5
    log_level: int = logging.WARNING
    """Logging level of the worker processes."""
    p4_reply_wildcard: bool = True
    """Receive the devices' per-query P4 reply topics through the ``reply/+`` and
    ``peer/cell/+/r/+`` subscriptions instead of two subscribe/unsubscribe round trips per
    query (amqtt 0.12 handles that churn badly under load). Every shard then also sees other
    clients' replies and ignores them."""
    publishers: int = 64
    """Tasks per shard publishing peer-machine effects (replies, unsubscriptions)."""
    bounds: ProfileBounds = field(default_factory=ProfileBounds)
    """Operator bounds the P1-P3 requests' profiles are clamped to (the services' defaults)."""
    p4: P4Knobs = field(default_factory=P4Knobs)
    """The devices' Protocol 4 settings (the same knobs as the virtual runner's)."""


@dataclass
class Progress:
    """Counters of a running fleet (summed over shards)."""

    t_s: float = 0.0
    updates: int = 0
    issued: int = 0
    answered: int = 0
    failed: int = 0
    in_flight: int = 0
    messages: int = 0

    def add(self, other: Progress) -> None:
        """Accumulate ``other`` into ``self`` (``t_s`` is the maximum)."""
        self.t_s = max(self.t_s, other.t_s)
        self.updates += other.updates
        self.issued += other.issued
        self.answered += other.answered
        self.failed += other.failed
        self.in_flight += other.in_flight
        self.messages += other.messages


@dataclass
class FleetResult:
    """Records of every query, run counters and per-shard diagnostics."""

    records: list[QueryRecord]
    stats: RunStats
    shards: list[dict[str, Any]] = field(default_factory=list)


async def run_fleet_async(
    built: BuiltScenario,
    opts: FleetOptions,
    *,
    shards: int = 1,
    shard_ids: list[int] | None = None,
    t0_wall: float | None = None,
    pois: POIIndex | None = None,
    report: Callable[[Progress], None] | None = None,
) -> FleetResult:
    """Run shards of the fleet in this event loop (all ``shards`` unless ``shard_ids`` given)."""
    idx = pois if pois is not None else load_poi_index(built.projection)
    t0 = t0_wall if t0_wall is not None else time.time() + opts.start_delay_s
    ids = shard_ids if shard_ids is not None else list(range(shards))
    runners = [
        Shard(built, opts=opts, shard=s, shards=shards, t0_wall=t0, pois=idx, progress=Progress())
        for s in ids
    ]
    total = Progress()

    def agg(_: Progress) -> None:
        if report is None:
            return
        p = Progress()
        for r in runners:
            p.add(r.progress)
        report(p)

    diags = await asyncio.gather(*(r.run(agg) for r in runners))
    records = [rec for r in runners for rec in r.records]
    for r in runners:
        total.add(r.progress)
    stats = RunStats(
        duration_s=built.scenario.duration_s,
        users=built.trajectories.n_users,
        location_updates=total.updates,
        messages=total.messages,
        bytes=sum(int(d["bytes"]) for d in diags),
        extra={"runner": "fleet", "url_scheme": opts.url.split(":", 1)[0], "shards": len(ids)},
    )
    return FleetResult(records, stats, list(diags))


def _worker(job: tuple[BuiltScenario, FleetOptions, int, list[int], float], out: Any) -> None:
    """Process entry point: run some shards, stream progress, send the result."""
    built, opts, shards, shard_ids, t0_wall = job
    # A spawned worker is a program of its own: log like the parent asked, MQTT stacks quieter.
    logging.basicConfig(
        level=opts.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for name in ("aiomqtt", "paho", "amqtt", "transitions"):
        logging.getLogger(name).setLevel(max(logging.ERROR, opts.log_level))

    def report(p: Progress) -> None:
        with contextlib.suppress(Exception):
            out.put(("progress", shard_ids[0], p))

    try:
        res = asyncio.run(
            run_fleet_async(
                built, opts, shards=shards, shard_ids=shard_ids, t0_wall=t0_wall, report=report
            )
        )
        out.put(("result", shard_ids[0], res))
    except BaseException as exc:  # report, then let the process die
        out.put(("error", shard_ids[0], repr(exc)))
        raise


def run_fleet(
    built: BuiltScenario,
    opts: FleetOptions,
    *,
    report: Callable[[Progress], None] | None = None,
) -> FleetResult:
    """Run the fleet in ``opts.processes`` worker processes (blocking; call from a thread when an
    event loop must keep running, for example one hosting the broker and services)."""
    if opts.processes <= 0:
        return asyncio.run(run_fleet_async(built, opts, report=report))
    ctx = mp.get_context("spawn")
    out: Any = ctx.Queue()
    shards = opts.processes * opts.shards_per_process
    t0 = time.time() + opts.start_delay_s + 3.0  # spawn + import time
    procs = []
    for p in range(opts.processes):
        ids = list(range(p * opts.shards_per_process, (p + 1) * opts.shards_per_process))
        proc = ctx.Process(
            target=_worker, args=((built, opts, shards, ids, t0), out), name=f"fleet-{p}"
        )
        proc.start()
        procs.append(proc)
    latest: dict[int, Progress] = {}
    results: list[FleetResult] = []
    errors: list[str] = []
    deadline = t0 + built.scenario.duration_s + opts.drain_s + 60.0
    while len(results) + len(errors) < len(procs) and time.time() < deadline:
        try:
            kind, key, payload = out.get(timeout=0.5)
        except queue.Empty:
            if not any(p.is_alive() for p in procs) and out.empty():
                break
            continue
        if kind == "progress":
            latest[key] = payload
            if report is not None:
                agg = Progress()
                for pr in latest.values():
                    agg.add(pr)
                report(agg)
        elif kind == "result":
            results.append(payload)
        else:
            errors.append(str(payload))
    for proc in procs:
        proc.join(timeout=10.0)
        if proc.is_alive():
            proc.terminate()
    if errors:
        raise RuntimeError(f"fleet worker failed: {errors[0]}")
    if len(results) < len(procs):
        raise RuntimeError("fleet worker(s) ended without a result")
    records = [r for res in results for r in res.records]
    stats = RunStats(
        duration_s=built.scenario.duration_s,
        users=built.trajectories.n_users,
        location_updates=sum(r.stats.location_updates for r in results),
        messages=sum(r.stats.messages for r in results),
        bytes=sum(r.stats.bytes for r in results),
        extra={"runner": "fleet", "processes": len(procs), "shards": shards},
    )
    return FleetResult(records, stats, [d for r in results for d in r.shards])
