"""Sessions among real neighbours and devices: people faster than a pedestrian, stays that end
in a vehicle, and phones that lose fixes.

Each test plays the intersection attack (an adversary who knows every true position and links
all of a requester's regions) on the regions a real cloaker answers, over populations that the
margins of a pedestrian do not describe; docs/algorithms.md ("Real neighbours and devices")
has the figures.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from _box_sessions import box

from locpriv.core.cloak.cloaker import Cloaker
from locpriv.core.cloak.types import CloakConfig, CloakParams
from locpriv.core.cloak.users import FIX_SCATTER_M, SPEED_BASELINE_S, SPEED_MEMORY_S, UserTable
from simulators.attacks import repeated_cloaks_attack

"""Sessions of one box per region (``session_tile_factor = 0``); regions of tiles, the default
since 2026-12-06, are tested in tests/test_session_tiles.py."""

SESSION_S = 3600.0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("conditions", "answered"),
    [
        # everyone at a cyclist's pace: sets spread past A_max (4 km²) within the half hour
        ({"speed_m_s": 5.0}, 0.75),
        ({"fast_share": 0.2}, 0.95),  # a fifth of the others on bicycles at 6 m/s
        ({"fast_share": 0.2, "fast_m_s": 12.0, "users": 4000}, 0.95),  # cars in a dense crowd
        ({"fast_share": 0.2, "fast_m_s": 10.0, "dwell_share": 0.5}, 0.95),  # parked cars leave
        # ... and in a sparse town
        ({"fast_share": 0.2, "fast_m_s": 10.0, "dwell_share": 0.5, "users": 1000}, 0.95),
        ({"fix_loss": 0.3}, 0.95),  # phones that lose 30 % of their fixes
        ({"fix_loss": 0.5, "users": 4000}, 0.95),  # half of them, in a dense crowd
        ({"fix_loss": 0.1, "fast_share": 0.1, "dwell_share": 0.5}, 0.95),
    ],
    ids=[
        "cyclists",
        "some_cyclists",
        "cars_dense",
        "stays_end_in_cars",
        "stays_end_in_cars_sparse",
        "lost_fixes",
        "half_lost_dense",
        "mixed",
    ],
)
def test_sessions_hold_k_among_fast_people_and_lost_fixes(
    conditions: dict[str, Any], answered: float
) -> None:
    """Fixes every 30 s, 100 askers, k = 5 for 30 minutes, the shipped settings: at most 1 %
    of the sessions narrowed below k, and (but where everyone moves at 5 m/s) at least 95 %
    of the requests answered."""
    r = repeated_cloaks_attack(session_s=SESSION_S, update_s=30.0, **conditions, cloak=box())
    assert r.sessions == 100
    assert r.success_rate <= 0.01, r
    assert r.answered_rate >= answered, r
    assert r.candidates_mean >= 5


def test_the_attack_finds_margins_sized_for_pedestrians_around_cyclists() -> None:
    """Walkers at 5 m/s with fixes every 30 s: margins of 3 m/s for everyone (the design
    before members' speeds were learned, ``session_speed_factor = 0``) leave most sessions
    narrowed; margins sized by each member's seen speed leave none."""
    kw: dict[str, Any] = {"speed_m_s": 5.0, "update_s": 30.0, "askers": 40}
    blind = repeated_cloaks_attack(
        session_s=SESSION_S, cloak=box({"session_speed_factor": 0.0}), **kw
    )
    assert blind.success_rate >= 0.5, blind
    seen = repeated_cloaks_attack(session_s=SESSION_S, **kw, cloak=box())
    assert seen.success_rate == 0.0, seen


@pytest.mark.slow
def test_a_spare_member_holds_k_when_stays_end_in_cars() -> None:
    """A fifth of the users drive at 10 m/s among people who stay and walk, half of them in a
    stay the cloaker has never seen end: a car that sets off after a fix outruns any margin of
    a member never seen that fast. Over four seeds, worst-case regions without a spare member
    narrow more than 1 % of the sessions; with one (``session_spare``, on while vehicles are
    about) at most 1 %."""
    kw: dict[str, Any] = {"fast_share": 0.2, "fast_m_s": 10.0, "dwell_share": 0.5, "update_s": 30.0}
    bare = [
        repeated_cloaks_attack(session_s=SESSION_S, cloak=box({"session_spare": 0}), seed=s, **kw)
        for s in range(4)
    ]
    spare = [
        repeated_cloaks_attack(session_s=SESSION_S, seed=s, **kw, cloak=box()) for s in range(4)
    ]
    assert np.mean([r.success_rate for r in bare]) > 0.01
    assert np.mean([r.success_rate for r in spare]) <= 0.01
    assert min(r.answered_rate for r in spare) >= 0.95


def test_the_spare_is_off_among_pedestrians() -> None:
    """Among walkers at 1.4 m/s nobody is seen faster than the 3 m/s margins, so the spare
    member stays off: the same regions as with ``session_spare = 0``; on whatever the
    population (``session_spare_fast_users = 0``), it costs area."""
    kw: dict[str, Any] = {"update_s": 30.0, "askers": 30, "minutes": 15.0}
    shipped = repeated_cloaks_attack(session_s=SESSION_S, **kw, cloak=box())
    off = repeated_cloaks_attack(session_s=SESSION_S, cloak=box({"session_spare": 0}), **kw)
    always = repeated_cloaks_attack(
        session_s=SESSION_S, cloak=box({"session_spare_fast_users": 0}), **kw
    )
    assert shipped.area_m2_median == off.area_m2_median
    assert always.area_m2_median > shipped.area_m2_median


def _session_areas(*, fast: int, still: int, **cloak: Any) -> list[float]:
    """Areas (m²) of 14 session regions of one requester among 400 walkers on 4 km × 4 km
    (fixes every 30 s, a request a minute, k = 5), beside ``fast`` users driving at 10 m/s
    and ``still`` users who never move, both 10 km away (in the same cloaker, in no region of
    hers)."""
    rng = np.random.default_rng(3)
    walkers = rng.uniform(-2000.0, 2000.0, (400, 2))
    far = np.column_stack([rng.uniform(9000.0, 11000.0, still + fast), np.zeros(still + fast)])
    far[:, 1] = rng.uniform(-1000.0, 1000.0, still + fast)
    ids = [f"w{i}" for i in range(400)] + [f"f{i}" for i in range(still + fast)]
    world = (-20000.0, -20000.0, 20000.0, 20000.0)
    cloaker = Cloaker(CloakConfig(world=world, **box(cloak)), rng=np.random.default_rng(4))
    params = CloakParams(k=5, a_min_m2=1.0e4, a_max_m2=4.0e7, max_delay_s=5.0, session_s=3600.0)
    walk = np.random.default_rng(5)
    areas = []
    for step in range(2 * 14):
        now = 1000.0 + 30.0 * step
        heading = walk.uniform(0, 2 * np.pi, 400)
        walkers += np.column_stack([np.cos(heading), np.sin(heading)]) * 1.4 * 30.0
        far[still:, 0] += 10.0 * 30.0 * (1 - 2 * (step % 20 >= 10))  # there and back
        cloaker.update_many(ids, np.vstack([walkers, far]), now)
        if step % 2:
            out = cloaker.request(("q", step), "w0", params, now + 0.5)
            assert out is not None and out.region is not None, out
            areas.append(out.region.area_m2)
    return areas


def test_users_who_stand_still_cannot_switch_the_spare_off() -> None:
    """The spare is on while some user is seen faster than a pedestrian, however many others
    stand still: 20,000 still logins beside one car (what an adversary can add; a share of
    the users would fall to 0.005 %) leave the requester's regions those with the spare on,
    wider than with ``session_spare = 0``; with no car about they are the spare-less ones."""
    still = _session_areas(fast=0, still=20000)
    assert _session_areas(fast=0, still=20000, session_spare=0) == still  # off: no car about
    car = _session_areas(fast=1, still=20000)
    bare = _session_areas(fast=1, still=20000, session_spare=0)
    # the set shrinks to k over 10 requests: the spare shows from then on
    assert car[:9] == bare[:9]
    assert sum(car[9:]) > sum(bare[9:]), (car, bare)


def _drive(table: UserTable, uid: str, xy: np.ndarray, t: np.ndarray) -> None:
    for (x, y), now in zip(xy, t, strict=True):
        table.update(uid, float(x), float(y), float(now))


def test_seen_speeds_come_from_long_chords_less_their_scatter() -> None:
    """A car reporting every second at 10 m/s is seen at about 10 m/s once a chord spans
    ``SPEED_BASELINE_S``; a still phone whose fixes scatter by 50 m, every 5 s for an hour, is
    never seen faster than the 3 m/s margins assume; a walker at 1.4 m/s reporting every 30 s
    is seen at her pace less the scatter."""
    table = UserTable()
    t = np.arange(0.0, 121.0, 1.0)
    _drive(table, "car", np.column_stack([10.0 * t, np.zeros_like(t)]), t)
    seen = table.vmax[table.ids["car"]]
    assert 10.0 - 2 * FIX_SCATTER_M / SPEED_BASELINE_S - 1e-9 <= seen <= 10.0
    rng = np.random.default_rng(1)
    t = np.arange(0.0, 3600.0, 5.0)
    _drive(table, "phone", rng.uniform(-25.0, 25.0, (len(t), 2)), t)
    assert table.vmax[table.ids["phone"]] < 3.0
    t = np.arange(0.0, 600.0, 30.0)
    _drive(table, "walker", np.column_stack([1.4 * t, np.zeros_like(t)]), t)
    assert math.isclose(table.vmax[table.ids["walker"]], 1.4 - 2 * FIX_SCATTER_M / 30.0)


def test_a_seen_speed_fades_only_while_she_moves() -> None:
    """A driver who parks keeps her speed for as long as she stays put (a parked car may
    drive off at any moment); once she walks on, it halves every ``SPEED_MEMORY_S`` seconds
    of moving."""
    table = UserTable()
    t = np.arange(0.0, 301.0, 30.0)
    _drive(table, "d", np.column_stack([10.0 * t, np.zeros_like(t)]), t)
    fast = float(table.vmax[table.ids["d"]])
    assert fast > 9.0
    parked = np.arange(330.0, 330.0 + 4 * 3600.0, 30.0)
    _drive(
        table, "d", np.column_stack([np.full_like(parked, 3000.0), np.zeros_like(parked)]), parked
    )
    assert table.vmax[table.ids["d"]] == fast
    last = float(parked[-1])
    walk = last + np.arange(30.0, SPEED_MEMORY_S + 1.0, 30.0)
    _drive(table, "d", np.column_stack([3000.0 + 1.5 * (walk - last), np.zeros_like(walk)]), walk)
    assert math.isclose(table.vmax[table.ids["d"]], fast / 2, rel_tol=1e-9)


def _velocity(table: UserTable, slots: np.ndarray, origin: bool) -> np.ndarray:
    """Velocities (m/s, one row per slot) read from the velocity origin or, as before it,
    from the report before the latest."""
    if origin:
        bx, by, bt = table.ox[slots], table.oy[slots], table.ot[slots]
    else:
        bx, by, bt = table.px[slots], table.py[slots], table.pt[slots]
    dt = table.t[slots] - bt
    return np.column_stack([(table.x[slots] - bx) / dt, (table.y[slots] - by) / dt])


@pytest.mark.parametrize("pattern", ["periodic_and_asked", "stream"])
def test_velocities_survive_scatter_over_short_gaps_between_reports(pattern: str) -> None:
    """The velocity that dead-reckons a member and forecasts where she goes is read from an
    average of her earlier reports (``VELOCITY_MEMORY_S``), not from the report before the
    latest: exact for anyone moving straight at a constant speed however her reports are
    spaced, and a fix asked for a second after a periodic one (or a stream of fixes every
    second) no longer turns 10 m of scatter into 10 m/s. 400 walkers at 1.4 m/s on random
    headings, fixes scattered by 10 m per axis; every 30 s, then one second later; or every
    second (measured error per axis, RMS: 14.2 and 13.8 m/s from the report before the
    latest, 0.43 and 0.97 m/s from the origin)."""
    rng = np.random.default_rng(7)
    n = 400
    ids = [f"w{i}" for i in range(n)]
    heading = rng.uniform(0.0, 2 * np.pi, n)
    v = 1.4 * np.column_stack([np.cos(heading), np.sin(heading)])
    start = rng.uniform(0.0, 3000.0, (n, 2))
    if pattern == "stream":
        times = np.arange(0.0, 301.0, 1.0)
    else:
        periodic = np.arange(0.0, 300.0, 30.0)  # the last report is one asked for, 1 s on
        times = np.sort(np.concatenate([periodic, periodic + 1.0]))
    exact, noisy = UserTable(), UserTable()
    for now in times.tolist():
        xy = start + v * now
        exact.update_many(ids, xy, now)
        noisy.update_many(ids, xy + rng.normal(0.0, 10.0, xy.shape), now)
    slots = np.array([exact.ids[u] for u in ids])
    assert np.allclose(_velocity(exact, slots, origin=True), v, rtol=0, atol=1e-9)
    slots = np.array([noisy.ids[u] for u in ids])
    rms_origin = float(np.sqrt(np.mean((_velocity(noisy, slots, origin=True) - v) ** 2)))
    rms_previous = float(np.sqrt(np.mean((_velocity(noisy, slots, origin=False) - v) ** 2)))
    assert rms_previous > 8.0  # what the report before the latest gives: 10 m over 1 s
    assert rms_origin < 1.2, rms_origin


@pytest.mark.parametrize("scatter_m", [10.0, 20.0, 40.0])
def test_a_still_phone_whose_fixes_scatter_stays_put_and_still(scatter_m: float) -> None:
    """A phone that does not move, fixes every 30 s for an hour scattered by ``scatter_m``
    per axis, each report giving its accuracy (1.5 times the scatter): its stay holds
    through the scatter (``STILL_ACCURACY_FACTOR``) and its velocity, the chord less twice
    the accuracy, is nearly always 0 (a scatter read as motion would forecast it hundreds of
    metres away). Without an accuracy, 25 m is the radius and fixes scattered this much
    break the stay most of the time. Measured at 10, 20 and 40 m: the stay breaks at 2.8 %
    of the reports (21, 68 and 90 % without an accuracy); the velocity is 0 at 89-90 % of
    them, its mean 0.02, 0.04 and 0.08 m/s where the chord alone reads 0.59, 1.18 and
    2.37 m/s."""
    from locpriv.core.cloak.cloaker import _Motion

    rng = np.random.default_rng(int(scatter_m))
    n = 200
    ids = [f"p{i}" for i in range(n)]
    home = rng.uniform(0.0, 3000.0, (n, 2))
    said, unsaid = UserTable(), UserTable()
    breaks_said = breaks_unsaid = 0
    speeds: list[np.ndarray] = []
    raw: list[np.ndarray] = []  # the chord's speed, what the scatter alone reads as motion
    for now in np.arange(0.0, 3600.0, 30.0).tolist():
        fix = home + rng.normal(0.0, scatter_m, home.shape)
        said.update_many(ids, fix, now, np.full(n, 1.5 * scatter_m))
        unsaid.update_many(ids, fix, now)
        slots = np.array([said.ids[u] for u in ids])
        breaks_said += int(np.count_nonzero(said.still_t[slots] == now)) if now else 0
        breaks_unsaid += int(np.count_nonzero(unsaid.still_t[slots] == now)) if now else 0
        if now >= 60.0:
            m = _Motion.of(said, slots, now, unsaid_m=10.0)
            speeds.append(np.hypot(m.vx, m.vy))
            chord = np.hypot(said.x[slots] - said.ox[slots], said.y[slots] - said.oy[slots])
            raw.append(chord / (said.t[slots] - said.ot[slots]))
    reports = n * (3600 // 30 - 1)
    assert breaks_said <= 0.05 * reports, breaks_said / reports
    assert breaks_unsaid >= 0.5 * reports if scatter_m >= 20 else breaks_unsaid > breaks_said
    v, chord = np.concatenate(speeds), np.concatenate(raw)
    assert np.mean(v == 0.0) >= 0.85
    assert v.mean() <= 0.05 * chord.mean()


@pytest.mark.parametrize("scatter_m", [5.0, 10.0, 20.0])
def test_a_walker_whose_fixes_scatter_is_read_at_her_speed(scatter_m: float) -> None:
    """A walker whose fixes scatter by ``scatter_m`` per axis, every 30 s for ten minutes,
    each report giving its accuracy (1.5 times the scatter): her velocity, the chord from an
    origin that remembers longer the wider the accuracy (``VELOCITY_ACCURACY_FACTOR``) less
    twice the accuracy, is near her own. 400 walkers at 1.4 m/s on random headings. Measured
    at 5, 10 and 20 m: RMS error per axis 0.16, 0.17 and 0.20 m/s and mean speed 1.20, 1.18
    and 1.14 m/s, where the origin at the report before (``VELOCITY_MEMORY_S`` alone) read
    0.41, 0.72 and 0.91 m/s off, 0.92, 0.51 and 0.19 m/s, and 14 and 67 % of the walkers at
    10 and 20 m as not moving at all (this test on the kernel before, same seeds)."""
    from locpriv.core.cloak.cloaker import _Motion

    rng = np.random.default_rng(int(scatter_m) + 100)
    n = 400
    ids = [f"w{i}" for i in range(n)]
    heading = rng.uniform(0.0, 2 * np.pi, n)
    v = 1.4 * np.column_stack([np.cos(heading), np.sin(heading)])
    start = rng.uniform(0.0, 3000.0, (n, 2))
    table = UserTable()
    times = np.arange(0.0, 600.0, 30.0)
    for now in times.tolist():
        xy = start + v * now
        fixes = xy + rng.normal(0.0, scatter_m, xy.shape)
        table.update_many(ids, fixes, now, np.full(n, 1.5 * scatter_m))
    slots = np.array([table.ids[u] for u in ids])
    m = _Motion.of(table, slots, float(times[-1]), unsaid_m=10.0)
    est = np.column_stack([m.vx, m.vy])
    rms = float(np.sqrt(np.mean((est - v) ** 2)))
    speed = np.hypot(m.vx, m.vy)
    assert rms < 0.3, rms
    assert speed.mean() >= 1.0, speed.mean()
    assert np.mean(speed == 0.0) <= 0.01
    assert speed.mean() <= 1.4  # less twice the accuracy: never faster than she walks, on average


@pytest.mark.slow
@pytest.mark.parametrize("scatter_m", [5.0, 10.0, 20.0])
@pytest.mark.parametrize(
    "conditions",
    [
        {},  # walkers who turn every minute
        {"dwell_share": 0.5},  # half of them staying put, stays that end at any moment
        {"dwell_share": 0.5, "dwell_scale_s": 60.0},  # short stays: walks begin often
        {"dwell_share": 0.5, "party_size": 5, "party_m": 5.0},  # parties that leave together
    ],
    ids=["walkers", "stays", "short_stays", "parties"],
)
def test_sessions_whose_reports_say_their_accuracy_hold_k(
    conditions: dict[str, Any], scatter_m: float
) -> None:
    """Positions in, regions out: every fix scattered by ``scatter_m`` per axis, each report
    giving its accuracy as phones do (the path whose velocities ``VELOCITY_ACCURACY_FACTOR``
    reads over a longer memory, which lags a walk just begun), fixes every 30 s and a fresh one
    asked for each request, 100 askers, k = 5 for 30 minutes; the adversary knows where
    everyone truly is. At most 1 % of sessions narrowed below k and every request answered.
    Measured over seeds 0-4 by benchmarks/bench_session_accuracy.py (sessions narrowed, of
    500 per cell), with a session's groups
    split on 300 s forecasts and how long users stayed put (2026-12-05): 2 in all twelve
    cells, the walkers' at 10 m on seed 0 (this test's seed: that cell at the goal's 1 %) and
    the short stays' at 10 m on seed 1; with groups on half-hour forecasts, 2 (the short
    stays at 10 m, seeds 0 and 4); asking members only once their report is 10 s old
    (``session_fresh_s``), 1, with the stays at 10 m, and before the longer memory 4 (the
    walkers' 2 at 10 m and 1 at 5 m, the short stays' 1 at 10 m)."""
    r = repeated_cloaks_attack(
        session_s=SESSION_S,
        update_s=30.0,
        fix_reply_s=1.0,
        scatter_m=scatter_m,
        says_accuracy=True,
        **conditions,
        cloak=box(),
    )
    assert r.sessions == 100
    assert r.success_rate <= 0.01, r
    assert r.answered_rate >= 0.95, r


def test_said_accuracies_are_what_holds_k_through_the_scatter() -> None:
    """The control for the test above: the same attack on the same walkers with 10 m of
    scatter, the cloaker told to take a said accuracy as no error at all
    (``session_accuracy_factor = 0``), narrows many sessions, so the attack bites and the
    margins a said accuracy brings are what keeps k (measured: every session narrowed)."""
    r = repeated_cloaks_attack(
        session_s=SESSION_S,
        update_s=30.0,
        fix_reply_s=1.0,
        scatter_m=10.0,
        says_accuracy=True,
        cloak=box({"session_accuracy_factor": 0.0}),
    )
    assert r.success_rate >= 0.3, r
