"""Fresh fixes for sessions: the cloaker asks a session's members with old reports for new
ones, waits for them, and answers smaller regions that still keep k.

A session keeps each member off its region's edges by how far she may have walked since her
last report, so reports 0-30 s old cost tens of metres on every side. With
``session_fresh_s`` the cloaker lists the members whose reports are older
(:meth:`Cloaker.take_fix_requests`) and holds the request until they report or
``session_fix_wait_s`` passes. These tests run walkers who report every 30 s and answer fix
requests a second later from where they are then; the adversary knows every true position at
the moment each region is answered and intersects a session's regions.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from _box_sessions import ONE_BOX
from numpy.typing import NDArray

from locpriv.core.cloak.cloaker import Cloaker
from locpriv.core.cloak.types import CloakConfig, CloakParams

"""Sessions of one box per region (``session_tile_factor = 0``); regions of tiles, the default
since 2026-12-06, are tested in tests/test_session_tiles.py."""

SIDE = 3000.0
F64 = NDArray[np.float64]
K = 5
P = CloakParams(k=K, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=5.0, session_s=600.0)


def _inside(xy: F64, bounds: tuple[float, ...]) -> set[int]:
    x0, y0, x1, y1 = bounds
    m = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
    return set(np.flatnonzero(m).tolist())


def _run(
    n: int,
    speed: float,
    seed: int,
    *,
    fresh_s: float,
    answer: bool = True,
    askers: int = 10,
    minutes: int = 12,
    scatter_m: float = 0.0,
    error_m: float = 0.0,
) -> dict[str, object]:
    """Walkers for ``minutes`` in 1 s steps, each reporting every 30 s (own phase); ``askers``
    ask every 60 s in 600 s sessions. With ``answer``, a member asked for a fix reports from
    where she is one second later. Each reported fix lies off the truth by a normal
    ``scatter_m`` per axis (the adversary knows the truth); ``error_m`` is the cloaker's
    ``session_fix_error_m``. Returns each session's intersection size, the areas, the delays
    from request to answer, the failures and how often each user was asked."""
    rng = np.random.default_rng(seed)
    noise = np.random.default_rng([seed, 99])
    xy = rng.uniform(0.0, SIDE, (n, 2))
    heading = rng.uniform(0.0, 2 * np.pi, n)
    phase = rng.integers(0, 30, n)
    ids = [f"u{i}" for i in range(n)]
    index = {u: i for i, u in enumerate(ids)}
    cfg = CloakConfig(
        world=(0.0, 0.0, SIDE, SIDE),
        epoch_s=1.0,
        session_fresh_s=fresh_s,
        session_fix_error_m=error_m,
        **ONE_BOX,
    )

    def fixes(rows: list[int]) -> F64:
        out: F64 = xy[rows] + noise.normal(0.0, scatter_m, (len(rows), 2))
        return out

    ck = Cloaker(cfg, rng=np.random.default_rng(seed + 1), phase=0.4)
    cand: dict[int, set[int]] = {a: set(range(n)) for a in range(askers)}
    areas: list[float] = []
    delays: list[float] = []
    failed = 0
    asked: Counter[str] = Counter()
    asked_at: dict[str, list[float]] = {}
    due: dict[int, list[int]] = {}  # step -> users answering a fix request then
    sent: dict[object, float] = {}
    ck.update_many(ids, fixes(list(range(n))), now=0.0)

    def settle(outs: list, now: float) -> None:
        nonlocal failed
        for out in outs:
            a = out.request_id[1]
            delays.append(now - sent.pop(out.request_id))
            if out.region is None:
                failed += 1
                continue
            areas.append(out.region.area_m2)
            cand[a] &= _inside(xy, out.region.polygon.bounds)

    for step in range(1, 60 * minutes + 1):
        now = float(step)
        heading += rng.normal(0.0, 0.05, n)
        xy = np.clip(xy + speed * np.column_stack([np.cos(heading), np.sin(heading)]), 0, SIDE)
        report = np.flatnonzero(phase == step % 30).tolist() + due.pop(step, [])
        if report:
            settle(ck.update_many([ids[i] for i in report], fixes(report), now=now), now)
        settle(ck.on_deadline(now + 0.5), now + 0.5)
        if step % 60 == 30:
            for a in range(askers):
                rid = (step, a)
                sent[rid] = now + 0.5
                out = ck.request(rid, ids[a], P, now + 0.5)
                if out is not None:
                    settle([out], now + 0.5)
            for u in ck.take_fix_requests():
                asked[u] += 1
                asked_at.setdefault(u, []).append(now)
                if answer:
                    due.setdefault(step + 1, []).append(index[u])
    assert not sent, "every request was answered or failed"
    return {
        "sizes": [len(c) for c in cand.values()],
        "areas": areas,
        "delays": delays,
        "failed": failed,
        "asked": asked,
        "asked_at": asked_at,
        "counts": dict(ck.session_counts),
    }


@pytest.mark.parametrize(("n", "speed"), [(600, 1.4), (1500, 1.4), (1500, 0.7)])
@pytest.mark.parametrize("seed", [0, 1])
def test_fresh_fixes_keep_k_and_cost_less(n: int, speed: float, seed: int) -> None:
    stale = _run(n, speed, seed, fresh_s=0.0)
    fresh = _run(n, speed, seed, fresh_s=5.0)
    assert min(fresh["sizes"]) >= K, fresh["sizes"]  # type: ignore[type-var]
    assert min(stale["sizes"]) >= K, stale["sizes"]  # type: ignore[type-var]
    assert fresh["failed"] == stale["failed"] == 0
    assert fresh["counts"]["fix_waits"] > 0 and "fix_waits" not in stale["counts"]
    med_fresh = float(np.median(fresh["areas"]))  # type: ignore[arg-type]
    med_stale = float(np.median(stale["areas"]))  # type: ignore[arg-type]
    # 0.67-0.95x measured (0.67-0.92x while velocities were read over the last chord, which
    # for these exact fixes is the freshest: the velocity origin trades that for scatter)
    assert med_fresh < 0.97 * med_stale, (med_fresh, med_stale)
    # a request waits for its members' reports, not for its deadline: about two epochs
    assert max(fresh["delays"]) <= 2.5, max(fresh["delays"])  # type: ignore[type-var]


@pytest.mark.parametrize("seed", [0, 1])
def test_members_who_never_answer_cost_a_short_wait_only(seed: int) -> None:
    """Devices that ignore fix requests (old apps, attackers): every request is still answered,
    after at most ``session_fix_wait_s`` (2 s) and an epoch, and the sets keep k."""
    silent = _run(1000, 1.4, seed, fresh_s=5.0, answer=False)
    assert silent["failed"] == 0
    assert min(silent["sizes"]) >= K, silent["sizes"]  # type: ignore[type-var]
    assert max(silent["delays"]) <= 3.5, max(silent["delays"])  # type: ignore[type-var]


def test_a_device_is_asked_at_most_once_per_fix_every_s() -> None:
    """However many sessions hold a member, she is asked at most once per
    ``session_fix_every_s`` (10 s): what a flood of session requests can send any device."""
    n = 400
    rng = np.random.default_rng(3)
    xy = rng.uniform(0.0, 800.0, (n, 2))  # dense: sessions share members
    ids = [f"u{i}" for i in range(n)]
    cfg = CloakConfig(world=(0.0, 0.0, 800.0, 800.0), epoch_s=1.0, session_fresh_s=5.0, **ONE_BOX)
    ck = Cloaker(cfg, rng=np.random.default_rng(4), phase=0.4)
    ck.update_many(ids, xy, now=0.0)
    p = CloakParams(k=K, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=5.0, session_s=600.0)
    for a in range(100):  # start 100 sessions
        ck.request(("start", a), ids[a], p, 0.5)
    when: dict[str, list[float]] = {}
    for t in range(1, 60):
        ck.on_deadline(float(t))
        for a in range(100):  # every asker asks every second
            ck.request((t, a), ids[a], p, t + 0.5)
        for u in ck.take_fix_requests():
            when.setdefault(u, []).append(t + 0.5)
    assert when, "members with old reports were asked"
    for u, ts in when.items():
        gaps = np.diff(ts)
        assert (gaps >= cfg.session_fix_every_s).all(), (u, ts)
    assert max(len(ts) for ts in when.values()) <= 6  # 59 s / 10 s


def test_off_at_zero_and_first_requests_do_not_wait() -> None:
    n = 300
    rng = np.random.default_rng(5)
    xy = rng.uniform(0.0, 2000.0, (n, 2))
    ids = [f"u{i}" for i in range(n)]
    world = (0.0, 0.0, 2000.0, 2000.0)
    off = Cloaker(
        CloakConfig(world=world, session_fresh_s=0.0, **ONE_BOX), rng=np.random.default_rng(6)
    )
    on = Cloaker(CloakConfig(world=world, **ONE_BOX), rng=np.random.default_rng(6))  # default: 2 s
    for ck in (off, on):
        ck.update_many(ids, xy, now=0.0)
        first = ck.request("a", ids[0], P, 30.0)  # a session's first request: answered now
        assert first is not None and first.region is not None
    assert off.request("b", ids[0], P, 90.0) is not None and off.take_fix_requests() == []
    assert on.request("b", ids[0], P, 90.0) is None  # waits for the members it asked
    asked = on.take_fix_requests()
    assert asked and ids[0] not in asked and on.take_fix_requests() == []


def test_members_whose_reports_are_seconds_old_are_asked_at_defaults() -> None:
    """At defaults a session request asks every member whose report is over 2 s old (a
    report 5 s old keeps its member 15 m off the edges, a fresh one a few metres) and none
    whose report is newer: half the members reported 5 s before the request, half 1 s."""
    n = 300
    rng = np.random.default_rng(8)
    xy = rng.uniform(0.0, 2000.0, (n, 2))
    ids = [f"u{i}" for i in range(n)]
    ck = Cloaker(
        CloakConfig(world=(0.0, 0.0, 2000.0, 2000.0), **ONE_BOX), rng=np.random.default_rng(9)
    )
    assert ck.config.session_fresh_s == 2.0
    ck.update_many(ids, xy, now=0.0)
    first = ck.request("a", ids[0], P, 0.5)
    assert first is not None and first.region is not None
    (record,) = ck.export_sessions(0.5)
    session = set(record.members)
    old, new = ids[1::2], ids[2::2]
    ck.update_many(old, xy[1::2], now=55.0)
    ck.update_many(new, xy[2::2], now=59.0)
    ck.update(ids[0], float(xy[0, 0]), float(xy[0, 1]), now=60.0)
    assert ck.request("b", ids[0], P, 60.0) is None  # waits for the members it asked
    asked = set(ck.take_fix_requests())
    assert asked == session & set(old)  # the 5 s old ones, all of them
    assert not asked & set(new)


@pytest.mark.parametrize("scatter_m", [5.0, 10.0])
def test_fixes_that_scatter_need_their_error_in_every_margin(scatter_m: float) -> None:
    """Real fixes lie metres off the device. A fresh fix's margin is a few metres of walking,
    less than that: without ``session_fix_error_m`` the adversary who knows where everyone
    really is narrows most sessions; with it at three times the scatter, none."""
    bare = [
        _run(1500, 1.4, seed, fresh_s=10.0, askers=30, minutes=20, scatter_m=scatter_m)
        for seed in (0, 1)
    ]
    narrowed = [np.mean(np.asarray(r["sizes"]) < K) for r in bare]
    assert min(narrowed) > 0.15, narrowed  # measured 0.27-0.40 at 5 m
    kept = [
        _run(
            1500,
            1.4,
            seed,
            fresh_s=10.0,
            askers=30,
            minutes=20,
            scatter_m=scatter_m,
            error_m=3 * scatter_m,
        )
        for seed in (0, 1)
    ]
    sizes = [s for r in kept for s in r["sizes"]]  # type: ignore[attr-defined]
    assert sum(s < K for s in sizes) <= 1, sizes  # at most 1 of 60 sessions (measured 0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("jump_m", [60.0, 250.0])
def test_session_region_holds_the_fix_her_request_brought(seed: int, jump_m: float) -> None:
    """The epoch's snapshot is taken at its first event, usually before a requester's own fix
    arrives: a session region must hold where that fix puts her, not where the snapshot had
    her (a jump after a poor fix, or a minute's walk). Positions in, regions out: every region
    holds her newest fix and at least k users of her set where they really are."""
    rng = np.random.default_rng(seed)
    n = 600
    xy = rng.uniform(500.0, 2500.0, (n, 2))
    ids = [f"u{i}" for i in range(n)]
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, session_fresh_s=0.0, **ONE_BOX)
    ck = Cloaker(cfg, rng=np.random.default_rng(seed + 1))
    params = CloakParams(k=K, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=600.0)
    zero = np.zeros(n)
    ck.update_many(ids, xy, 0.0, zero)
    first = ck.request("r0", ids[0], params, 0.5)
    assert first is not None and first.region is not None
    cand = _inside(xy, first.region.polygon.bounds)
    for step in range(1, 6):
        t = 60.0 * step
        ck.update_many(ids[1:], xy[1:], t + 0.1, zero[1:])  # everyone else, before the epoch
        ck.prepare(t + 0.2)  # the epoch's snapshot: she is still at her previous fix
        angle = rng.uniform(0.0, 2 * np.pi)
        xy[0] += jump_m * np.array([np.cos(angle), np.sin(angle)])
        ck.update(ids[0], float(xy[0, 0]), float(xy[0, 1]), t + 0.5, 0.0)  # her request's fix
        out = ck.request(f"r{step}", ids[0], params, t + 0.5)
        assert out is not None and out.region is not None, out
        got = _inside(xy, out.region.polygon.bounds)
        assert 0 in got, f"the region misses her newest fix (step {step})"
        cand &= got
        assert len(cand) >= K, f"the set fell to {len(cand)} users (step {step})"
