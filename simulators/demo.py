"""``locpriv demo``: an embedded broker, the services and a simulated fleet, then a report.

Starts an in-process amqtt broker (MQTT 3.1.1), the trusted anonymizer/mediator (Protocols 1-3)
and the database server with the bundled Barcelona POIs, then runs the ``demo`` scenario
(``simulators/scenarios/demo.toml``: 800 pedestrians on a street grid for 30 s, sized for a
2-core machine) as a
fleet in a worker process speaking the real wire protocol, Protocol 4 included (device to
device). A progress line updates while it runs (periodic lines when stdout is not a terminal).
At the end it prints a summary table per protocol and writes ``summary.json`` and PNG plots to
``--out`` (default ``./demo-out``). Everything runs offline.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger(__name__)

__all__ = ["register", "run_demo"]


def register(subparsers: Any) -> None:
    """Add the ``demo`` command."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="embedded broker, services and a simulated fleet; prints and plots the results",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--users", type=int, default=None, help="simulated users (default 800)")
    p.add_argument("--seconds", type=float, default=None, help="run time in s (default 30)")
    p.add_argument("--out", type=Path, default=Path("demo-out"), help="output folder")
    p.add_argument("--scenario", default="demo", help="scenario name or TOML path")
    p.add_argument("--processes", type=int, default=1, help="fleet worker processes (0: inline)")
    p.add_argument("--seed", type=int, default=None, help="override the scenario seed")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    summary = run_demo(
        users=args.users,
        seconds=args.seconds,
        out=args.out,
        scenario=args.scenario,
        processes=args.processes,
        seed=args.seed,
    )
    return 0 if summary["all"]["answered"] > 0 else 1


class _Display:
    """One updating line on a TTY, a line every few seconds otherwise."""

    def __init__(self, stream: TextIO, total_s: float, every_s: float = 5.0) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.total_s = total_s
        self.every_s = every_s
        self.last = -1e9
        self.lock = threading.Lock()
        self.width = 0

    def __call__(self, p: Any) -> None:
        with self.lock:
            now = time.monotonic()
            if not self.tty and now - self.last < self.every_s:
                return
            self.last = now
            line = (
                f"  t={p.t_s:5.1f}/{self.total_s:.0f} s  updates {p.updates:7d}  "
                f"queries {p.issued:5d}  answered {p.answered:5d}  failed {p.failed:4d}  "
                f"in flight {p.in_flight:4d}"
            )
            if self.tty:
                self.width = max(self.width, len(line))
                self.stream.write("\r" + line.ljust(self.width))
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def done(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()


def _fmt(v: Any, scale: float = 1.0, digits: int = 0) -> str:
    if v is None:
        return "-"
    return f"{v * scale:.{digits}f}"


def format_table(summary: dict[str, Any]) -> str:
    """The per-protocol summary as a plain-text table."""
    head = (
        f"{'':4} {'queries':>7} {'ok %':>6} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} "
        f"{'k/k_req':>7} {'area m²':>9} {'prec':>5} {'recall':>6} {'adv. err m':>10} "
        f"{'msgs/q':>6} {'bytes/q':>7}"
    )
    rows = [head, "-" * len(head)]
    items = [*summary["protocols"].items(), ("all", summary["all"])]
    for name, d in items:
        lat = d["e2e_latency_s"]
        rows.append(
            f"{name:4} {d['queries']:7d} {_fmt(d['success_rate'], 100, 1):>6} "
            f"{_fmt(lat['p50'], 1000):>7} {_fmt(lat['p95'], 1000):>7} {_fmt(lat['p99'], 1000):>7} "
            f"{_fmt(d['k_ratio']['mean'], 1, 2):>7} {_fmt(d['area_m2']['p50']):>9} "
            f"{_fmt(d['precision'], 1, 2):>5} {_fmt(d['recall'], 1, 2):>6} "
            f"{_fmt(d['adversary_error_m']['mean']):>10} "
            f"{_fmt(d['messages_per_query'], 1, 1):>6} {_fmt(d['bytes_per_query']):>7}"
        )
    return "\n".join(rows)


def format_attacks(attacks: dict[str, Any]) -> str:
    """The attacks on privacy over time, before and with the defences, as text lines."""
    s, c, b = attacks["static_device"], attacks["repeated_cloaks"], attacks["broker_tracking"]
    w = attacks.get(
        "wandering_device", {"before_error_sigma": math.nan, "after_error_sigma": math.nan}
    )
    g = attacks.get(
        "requester_guess", {"before_edge_over_chance": math.nan, "after_edge_over_chance": math.nan}
    )
    f = attacks.get(
        "fast_neighbours", {"before_success_rate": math.nan, "after_success_rate": math.nan}
    )
    z = attacks.get(
        "stale_fixes", {"before_area_m2_median": math.nan, "after_area_m2_median": math.nan}
    )
    x = attacks.get(
        "scattered_fixes", {"before_success_rate": math.nan, "after_success_rate": math.nan}
    )
    e = attacks.get(
        "region_edges", {"before_pinned_share": math.nan, "after_pinned_share": math.nan}
    )
    e = {"blind_pinned_share": math.nan} | e
    q = attacks.get("session_cost", {"after_area_ratio": math.nan, "after_answered_rate": math.nan})
    y = {"users": math.nan} | attacks.get(
        "city_session_cost",
        {
            f"{p}_{f}": math.nan
            for p in ("after", "scattered")
            for f in ("area_ratio", "answered_rate")
        },
    )
    return "\n".join(
        [
            "  attacks over time (before -> defended):",
            f"    region edges on, midway between or at an offset from users: "
            f"{e['before_pinned_share']:.1%} (box of k users) -> {e['after_pinned_share']:.2%}"
            f" (blind placement {e['blind_pinned_share']:.2%})",
            f"    30-min sessions: median region {q['after_area_ratio']:.2f}x the one-shot "
            f"median (goal <= 5x), {q['after_answered_rate']:.0%} answered",
            f"    city sessions ({y['users']:.0f} people): median region "
            f"{y['after_area_ratio']:.2f}x the one-shot median, {y['after_answered_rate']:.0%}"
            f" answered; fixes scattered 10 m: {y['scattered_area_ratio']:.2f}x, "
            f"{y['scattered_answered_rate']:.0%} answered (goal <= 5x, >= 95%)",
            f"    static device, 30 days: averaging error {s['before_error_sigma']:.2f} -> "
            f"{s['after_error_sigma']:.2f} sigma",
            f"    static device, fixes scattered 25 m: averaging error "
            f"{w['before_error_sigma']:.2f} -> {w['after_error_sigma']:.2f} sigma",
            f"    repeated cloaks: intersection attack success {c['before_success_rate']:.0%} -> "
            f"{c['after_success_rate']:.0%}, median area {c['before_area_m2_median']:.0f} -> "
            f"{c['after_area_m2_median']:.0f} m2",
            f"    repeated cloaks among cyclists (fixes every 30 s): intersection attack success "
            f"{f['before_success_rate']:.0%} -> {f['after_success_rate']:.0%}",
            f"    repeated cloaks, fixes every 30 s: median area {z['before_area_m2_median']:.0f}"
            f" -> {z['after_area_m2_median']:.0f} m2 when devices answer fix requests",
            f"    repeated cloaks, fixes scattered 5 m: intersection attack success "
            f"{x['before_success_rate']:.0%} -> {x['after_success_rate']:.0%}",
            f"    repeated cloaks: requester found as the candidate nearest an edge "
            f"{g['before_edge_over_chance']:.2f} -> {g['after_edge_over_chance']:.2f}x chance",
            f"    P4 broker: device followed {b['before_linked_hours']:.1f} -> "
            f"{b['after_linked_hours']:.1f} h, median error {b['before_error_m_median']:.0f} -> "
            f"{b['after_error_m_median']:.0f} m",
        ]
    )


def _service_latency(records: Any) -> dict[str, dict[str, float | None]]:
    """p50/p99 (s) per protocol of answer time minus the temporal-cloaking wait the request
    asked for (``held_s``: the region's ``t2`` after the request), of the answered queries."""
    import numpy as np

    by: dict[str, list[float]] = {}
    for r in records:
        if not r.ok or r.t_answer_s is None:
            continue
        v = r.t_answer_s - r.t_request_s - (r.held_s or 0.0)
        by.setdefault(f"p{r.protocol}", []).append(v)
        by.setdefault("all", []).append(v)
    out: dict[str, dict[str, float | None]] = {}
    for name in ("p1", "p2", "p3", "p4", "all"):
        values = by.get(name, [])
        if values:
            p50, p99 = np.percentile(values, [50, 99])
            out[name] = {"p50": float(p50), "p99": float(p99)}
        else:
            out[name] = {"p50": None, "p99": None}
    return out


def format_service_latency(
    waits: dict[str, dict[str, float | None]], run: dict[str, Any], duration_s: float
) -> str:
    """One line of what the run measured: p50/p99 per protocol of the service latency and the
    message rate through the broker."""
    parts = [
        f"{name} {_fmt(w['p50'], 1000)}/{_fmt(w['p99'], 1000)}"
        for name, w in waits.items()
        if name != "all"
    ]
    rate = run["messages"] / duration_s if duration_s > 0 else 0.0
    return (
        f"  measured service latency p50/p99 ms (temporal-cloaking waits excluded): "
        f"{', '.join(parts)}; ~{rate:.0f} fleet msgs/s"
    )


async def _with_services(
    built: Any, processes: int, display: _Display
) -> tuple[Any, dict[str, Any]]:
    from locpriv.config import ProjectionSection, ServiceConfig
    from locpriv.service.anonymizer import AnonymizerService
    from locpriv.service.broker import EmbeddedBroker
    from locpriv.service.ds import DSService
    from simulators.fleet import FleetOptions, run_fleet, run_fleet_async

    sc = built.scenario
    config = ServiceConfig(
        projection=ProjectionSection(lat0_deg=sc.origin_lat, lon0_deg=sc.origin_lon)
    )
    async with EmbeddedBroker() as broker:
        anon = AnonymizerService(broker.url, config)
        ds = DSService(broker.url, config)
        tasks = [asyncio.create_task(anon.run()), asyncio.create_task(ds.run())]
        await asyncio.wait_for(asyncio.gather(anon.ready.wait(), ds.ready.wait()), 30.0)
        opts = FleetOptions(url=broker.url, processes=processes)
        cpu0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0 = time.monotonic()
        try:
            if processes <= 0:
                result = await run_fleet_async(built, opts, report=display)
            else:
                result = await asyncio.to_thread(run_fleet, built, opts, report=display)
        finally:
            display.done()
            wall = time.monotonic() - wall0
            main_cpu = time.process_time() - cpu0[0]
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            fleet_cpu = kids.ru_utime + kids.ru_stime - cpu0[1].ru_utime - cpu0[1].ru_stime
            anon.stop()
            ds.stop()
            await asyncio.gather(*tasks, return_exceptions=True)
        services = {
            "anonymizer": dict(anon.stats),
            "ds": dict(ds.stats),
            # CPU seconds per wall second of the run: the broker and services share one event
            # loop (at most one core); the fleet runs in worker processes (inline: included)
            "cpu": {
                "wall_s": wall,
                "broker_services_cores": main_cpu / wall if wall > 0 else None,
                "fleet_cores": fleet_cpu / wall if wall > 0 else None,
            },
        }
    return result, services


def run_demo(
    *,
    users: int | None = None,
    seconds: float | None = None,
    out: Path = Path("demo-out"),
    scenario: str = "demo",
    processes: int = 1,
    seed: int | None = None,
    stream: TextIO | None = None,
) -> dict[str, Any]:
    """Run the demo and write ``summary.json`` and plots into ``out``; returns the summary."""
    from simulators.attacks import attacks_summary
    from simulators.evaluate import summarize, write_json
    from simulators.map import map_data, write_map
    from simulators.plots import plot_attacks, plot_run
    from simulators.scenario import build, load_scenario

    # The MQTT stacks warn about queued publishes under load; the summary reports saturation.
    for name in ("aiomqtt", "amqtt", "transitions"):
        logging.getLogger(name).setLevel(logging.ERROR)
    stream = stream or sys.stdout
    sc = load_scenario(scenario)
    changes: dict[str, Any] = {}
    if users is not None:
        changes["users"] = users
    if seconds is not None:
        changes["duration_s"] = seconds
    if seed is not None:
        changes["seed"] = seed
    sc = sc.replace(**changes)
    t_start = time.monotonic()
    stream.write(
        f"locpriv demo: {sc.users} users ({sc.mobility['model']} mobility, "
        f"{sc.static_fraction:.0%} static) for {sc.duration_s:g} s, updates every "
        f"{sc.update_interval_s:g} s, {sc.workload.queries_per_user_per_hour:g} queries/user/h\n"
    )
    built = build(sc)
    stream.write(
        f"  scenario built: {len(built.workload.events)} queries "
        f"{dict(built.workload.by_protocol())}; starting broker, anonymizer, DS and fleet\n"
    )
    stream.flush()
    display = _Display(stream, sc.duration_s)
    result, services = asyncio.run(_with_services(built, processes, display))
    summary = summarize(result.records, result.stats)
    summary["scenario"] = {
        "name": sc.name,
        "seed": sc.seed,
        "users": sc.users,
        "duration_s": sc.duration_s,
        "mobility": dict(sc.mobility),
        "update_interval_s": sc.update_interval_s,
    }
    summary["services"] = services
    summary["fleet_shards"] = result.shards
    # what saturation shows in: requests lost, or answers late beyond the temporal-cloaking
    # wait a request asked for (max_delay_s: up to 5 s by design, not a queue)
    waits = _service_latency(result.records)
    summary["service_latency_s"] = waits
    lat99 = waits["all"]["p99"]
    timeouts = sum(
        d["errors"].get("timeout", 0) + d["errors"].get("unfinished", 0)
        for d in summary["protocols"].values()
    )
    overloaded = sum(d["errors"].get("overloaded", 0) for d in summary["protocols"].values())
    issued = max(1, summary["all"]["queries"])
    loop = services["cpu"]["broker_services_cores"]
    saturated = bool(
        timeouts > 0.01 * issued
        or overloaded
        or (lat99 is not None and lat99 > 2.0)
        or (loop is not None and loop > 0.8)
    )
    summary["saturated"] = saturated
    stream.write("  playing the attacks on privacy over time (small runs)\n")
    stream.flush()
    summary["attacks"].update(attacks_summary(small=True, seed=sc.seed))
    out.mkdir(parents=True, exist_ok=True)
    write_json(summary, out / "summary.json")
    plots = plot_run(
        result.records, out, trajectories=built.trajectories, snapshot_t_s=sc.duration_s / 2
    )
    plots.append(plot_attacks(summary["attacks"], out))
    mob = sc.mobility
    grid = (int(mob["blocks"]), float(mob["block_m"])) if mob.get("model") == "manhattan" else None
    page = write_map(
        out / "map.html",
        map_data(built.trajectories, result.records, duration_s=sc.duration_s, grid=grid),
    )
    run = summary["run"]
    stream.write("\n" + format_table(summary) + "\n")
    stream.write(
        "  k/k_req: users truly inside the cloak at answer time over the requested k; "
        "adv. err: adversary's expected error\n\n"
    )
    stream.write(
        f"  {run['location_updates']} location updates, {run['messages']} fleet messages "
        f"({run['bytes'] / 1e6:.1f} MB) in {time.monotonic() - t_start:.0f} s wall time\n"
    )
    stream.write(format_service_latency(waits, run, sc.duration_s) + "\n")
    cpu = services["cpu"]
    load1 = os.getloadavg()[0]
    stream.write(
        f"  CPU: broker + services {_fmt(cpu['broker_services_cores'], 1, 2)} cores (one event "
        f"loop: 1.00 is its ceiling), fleet {_fmt(cpu['fleet_cores'], 1, 2)} cores; host load "
        f"average {load1:.1f} on {os.cpu_count()} cores\n"
    )
    ours = (cpu["broker_services_cores"] or 0.0) + (cpu["fleet_cores"] or 0.0)
    if saturated and load1 > (os.cpu_count() or 1) and ours < 0.5 * load1:
        stream.write(
            f"  NOTE: the host is busy with other work (load {load1:.1f}; the demo used "
            f"{ours:.2f} cores): late or lost replies here come from CPU contention\n"
        )
    if saturated:
        stream.write(
            f"  WARNING: the broker or services saturated ({timeouts} of {issued} requests timed "
            f"out, {overloaded} overloaded, service p99 > 2 s or the broker's loop > 0.8 "
            "cores): try fewer --users\n"
        )
    stream.write(format_attacks(summary["attacks"]) + "\n")
    stream.write(
        f"  wrote {out / 'summary.json'}, {len(plots)} plots and the map {page} (open it in a "
        f"browser: regions and groups over time) to {out}/\n"
    )
    stream.flush()
    return summary
