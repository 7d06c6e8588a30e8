"""Historical k-anonymity sessions among people who stay put and leave (issue 22): whom a
session keeps, how thin the margins of members who stayed put may be, and what the
intersection attack gets. Every test attacks the regions the cloaker returns (users truly
inside each of a requester's successive regions, intersected; the requester's own position)
rather than inspecting the code; the pure pieces get property tests.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from _box_sessions import ONE_BOX, box
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from locpriv.core.cloak.cloaker import Cloaker, CloakParams
from locpriv.core.cloak.history import moving_time, still_margins
from locpriv.core.cloak.types import CloakConfig
from simulators.attacks import exact, parked_insiders_attack, repeated_cloaks_attack

"""Sessions of one box per region (``session_tile_factor = 0``); regions of tiles, the default
since 2026-12-06, are tested in tests/test_session_tiles.py."""

F64 = NDArray[np.float64]
SIDE_M = 2000.0
PARAMS = CloakParams(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=600.0)


@pytest.mark.parametrize(
    "conditions",
    [
        {"dwell_share": 0.5},
        {"dwell_share": 0.5, "dwell_scale_s": 60.0},
        {"dwell_share": 0.8},
        {"dwell_share": 0.5, "users": 4000},
        {"dwell_share": 0.5, "k": 10, "minutes": 60.0},
        {"dwell_share": 0.5, "party_size": 3},
        {"dwell_share": 0.5, "party_size": 3, "speed_m_s": 3.0},
        {"dwell_share": 0.5, "party_size": 5, "party_m": 300.0, "speed_m_s": 3.0},
    ],
    ids=[
        "half-staying",
        "short-stays",
        "mostly-staying",
        "dense",
        "k10-60min",
        "parties",
        "parties-3m/s",
        "scattered-parties-3m/s",
    ],
)
def test_sessions_hold_k_among_people_who_stay_and_leave(conditions: dict[str, float]) -> None:
    """Users alternate stays of heavy-tailed length (a stay may end at any moment, right
    after a fix too) and walks, and report every 30 s at their own phase: sessions narrow no
    asker below k, answer (nearly) every request, and cost at most 5x the undefended median
    area (measured 2.6-4.1x with 40 askers). Also when stays end together: parties of 3 that
    stand, leave, walk and stop together, and parties of 5 scattered over 300 m (a shift that
    ends) at 3 m/s (benchmarks/bench_session_parties.py measures them over ten seeds).
    Three walk seeds per condition, 120 sessions: the goal's 1 % is then one session, where
    one seed's 40 sessions could show only none or 2.5 %."""
    ints = ("users", "k", "party_size")
    kw = {key: (int(val) if key in ints else val) for key, val in conditions.items()}
    narrowed = sessions = 0
    for seed in (0, 1, 2):
        before = repeated_cloaks_attack(
            session_s=0.0, askers=40, update_s=30.0, seed=seed, **kw, cloak=box()
        )  # type: ignore[arg-type]
        after = repeated_cloaks_attack(
            session_s=3600.0, askers=40, update_s=30.0, seed=seed, **kw, cloak=box()
        )  # type: ignore[arg-type]
        assert before.success_rate >= 0.5
        assert after.answered_rate >= 0.95
        assert after.area_m2_median <= 5.0 * before.area_m2_median
        narrowed += round(after.success_rate * after.sessions)
        sessions += after.sessions
    assert sessions == 120
    assert narrowed <= 0.01 * sessions


def _stay_town(
    seed: int,
    *,
    stale: bool,
    leavers: float = 0.0,
    cloak: dict[str, Any] | None = None,
) -> tuple[list[list[float]], list[frozenset[int]], list[bool], float]:
    """200 users who never move and 400 who alternate pauses (0-10 min) and walks (1.3 m/s)
    on 2 km x 2 km, known to the anonymizer for an hour before 60 of those who never move ask
    k = 5 every minute for 40 minutes. ``stale``: everyone reports every 30 s at her own phase
    (else at each request). ``leavers``: per minute, the share of users who never moved that
    start walking right after a fix (the worst moment for a thin margin) and keep walking.
    Returns per asker her region areas, the intersection of the users truly inside her
    regions, whether she was inside each of them, and the share of requests answered (a
    session whose members have spread over the whole town fails ``cloak_timeout``)."""
    rng = np.random.default_rng(seed)
    n_static, n_walk = 200, 400
    n = n_static + n_walk
    xy = rng.uniform(0.0, SIDE_M, (n, 2))
    ids = [f"u{i}" for i in range(n)]
    moving = np.zeros(n, dtype=bool)
    paused = rng.random(n) < 0.5
    left = rng.uniform(0.0, 600.0, n)
    heading = rng.uniform(0.0, 2 * np.pi, n)
    phase = rng.uniform(0.0, 30.0, n)
    cfg = CloakConfig(world=(0.0, 0.0, SIDE_M, SIDE_M), **box(cloak))
    cloaker = Cloaker(cfg, rng=np.random.default_rng(seed + 1))
    askers = range(60)
    areas: list[list[float]] = [[] for _ in askers]
    kept: list[frozenset[int]] = [frozenset(range(n)) for _ in askers]
    inside_own: list[bool] = []
    asked = 0
    t = 1000.0
    cloaker.update_many(ids, xy, t - 60.0, exact(n))
    for step in range(-60, 40):
        for _ in range(12):  # 5 s of motion
            t += 5.0
            left -= 5.0
            flip = (left <= 0) & (np.arange(n) >= n_static)
            paused = np.where(flip, ~paused, paused)
            left = np.where(
                flip,
                np.where(paused, rng.uniform(0, 600, n), rng.uniform(60, 600, n)),
                left,
            )
            heading = np.where(flip, rng.uniform(0, 2 * np.pi, n), heading)
            walks = (~paused & (np.arange(n) >= n_static)) | moving
            xy[walks] += np.column_stack([np.cos(heading[walks]), np.sin(heading[walks])]) * 6.5
            np.clip(xy, 0.0, SIDE_M, out=xy)
            if stale:
                due = np.flatnonzero(np.floor((t - phase) / 30) > np.floor((t - 5 - phase) / 30))
                if step >= 0 and leavers > 0:
                    # some who never moved leave right after this fix (askers stay put)
                    go = due[(due < n_static) & (due >= len(askers))]
                    moving[go[rng.random(len(go)) < leavers / 2]] = True
                cloaker.update_many([ids[i] for i in due], xy[due], t, exact(len(due)))
        if not stale:
            cloaker.update_many(ids, xy, t, exact(n))
        if step < 0:
            continue
        for a in askers:
            out = cloaker.request(("q", a, step), ids[a], PARAMS, t)
            asked += 1
            assert out is not None
            if out.region is None:
                continue
            x0, y0, x1, y1 = out.region.polygon.bounds
            inside = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
            kept[a] = kept[a] & frozenset(np.flatnonzero(inside).tolist())
            areas[a].append(out.region.area_m2)
            inside_own.append(bool(inside[a]))
    return areas, kept, inside_own, len(inside_own) / asked


@pytest.mark.parametrize("seed", [0, 1])
def test_a_requester_who_stays_put_keeps_neighbours_who_stay_put(seed: int) -> None:
    """Requesters who never move, among neighbours who never move and walkers who pause for
    up to ten minutes nearby: their sessions keep those who stay put (how long each has stayed
    is what ranks members), so their regions do not grow over the session: at most 5 % of them
    pay more than twice as much after half an hour as in minutes 5-15 (measured 3.3 % and
    0 %; 1.7 % and 3.3 % while groups were split on half-hour forecasts; the design that
    ranked by a 10-minute forecast: 17 % and 18 %); none narrowed."""
    areas, kept, inside_own, answered = _stay_town(seed, stale=False)
    assert answered >= 0.99
    grew = [np.median(a[30:]) > 2.0 * np.median(a[5:15]) for a in areas]
    assert np.mean(grew) <= 0.05
    assert all(len(s) >= PARAMS.k for s in kept)
    assert all(inside_own)


def test_thin_margins_of_members_who_stayed_put_cost_less() -> None:
    """Fixes every 30 s; members who had stayed put for an hour get margins near the 5 m floor
    (the standard thin margin grows 1 m/s with a fix's age) while some of them leave right
    after a fix (2 % of those who never moved, each minute): no session is narrowed below k,
    every region holds its requester, and the regions are smaller than with the standard thin
    margins for everyone (``session_risk`` near 0). Geometric mean of the areas after the
    tenth request over two towns: 0.129 against 0.133 km² (seed 2: 0.123 against 0.123,
    seed 3: 0.135 against 0.143; before the groups weighed how long users stayed put, 0.122
    against 0.133 and 0.149 against 0.163: groups of those who stay put leave the margins
    less to save). Every request is answered either way. At stays of an hour the floor is
    within the budget, so this town cannot tell a budget from none: the next test can."""
    late: list[float] = []
    late_std: list[float] = []
    for seed in (2, 3):
        areas, kept, inside_own, answered = _stay_town(seed, stale=True, leavers=0.02)
        assert answered >= 0.99
        assert all(len(s) >= PARAMS.k for s in kept)
        assert all(inside_own)
        areas_std, kept_std, _, answered_std = _stay_town(
            seed, stale=True, leavers=0.02, cloak={"session_risk": 1e-12}
        )
        assert answered_std >= 0.99
        assert all(len(s) >= PARAMS.k for s in kept_std)
        late += [x for a in areas for x in a[10:]]
        late_std += [x for a in areas_std for x in a[10:]]
    # the geometric mean: areas come in steps of the grid, and the medians may tie
    assert np.mean(np.log(late)) < np.mean(np.log(late_std))


def test_margins_without_a_risk_budget_are_seen_by_the_attack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """People whose stays end at any moment (hazard 1/(tau + 60 s)), k = 10 for an hour, fixes
    every 30 s: the floor margin for everyone who had stayed put (no risk budget) narrows
    sessions below k (measured 8 of 500 on five seeds: 1, 1, 1, 2, 3; with members ranked
    each by her own distance 3, 1 and 3 of 100 on the first three), the budgeted margins
    none."""
    import locpriv.core.cloak.cloaker as cloaker_module

    kw: dict[str, Any] = {
        "session_s": 3600.0,
        "askers": 100,
        "update_s": 30.0,
        "dwell_share": 0.5,
        "dwell_scale_s": 60.0,
        "k": 10,
        "minutes": 60.0,
    }
    seeds = (0, 1, 2, 3, 4)
    budgeted = sum(repeated_cloaks_attack(seed=s, **kw, cloak=box()).success_rate for s in seeds)
    assert budgeted == 0.0

    def floor_for_anyone_still(age: F64, still: F64, standard: F64, **knobs: Any) -> F64:
        return np.where(np.asarray(still) > 0, knobs["floor_m"], standard)

    monkeypatch.setattr(cloaker_module, "still_margins", floor_for_anyone_still)
    loose = sum(repeated_cloaks_attack(seed=s, **kw, cloak=box()).success_rate * 100 for s in seeds)
    assert loose >= 3  # of 500 sessions


@pytest.mark.parametrize(
    ("users", "speed_m_s"),
    [(1000, 1.4), (2000, 1.4), (4000, 1.4), (2000, 3.0)],
    ids=["sparse", "default", "dense", "fast"],
)
def test_each_region_holds_its_requester_whose_fix_is_stale(users: int, speed_m_s: float) -> None:
    """Requests with no fresh fix: each requester reports every 30 s and, right after a fix,
    may start walking from a stop or stop (the worst moment for a forecast); her thin regions
    keep her at her fix with her worst-case margin, so each of her regions holds her true
    position (members may be missed, up to the slack; she may not: the answer is for her).
    Over densities and at 3 m/s."""
    rng = np.random.default_rng(8)
    side = 4000.0
    xy = rng.uniform(0.0, side, (users, 2))
    ids = [f"u{i}" for i in range(users)]
    phase = rng.uniform(0.0, 30.0, users)
    heading = rng.uniform(0.0, 2 * np.pi, users)
    walking = rng.random(users) < 0.5
    cloaker = Cloaker(
        CloakConfig(world=(0.0, 0.0, side, side), **ONE_BOX), rng=np.random.default_rng(9)
    )
    cloaker.update_many(ids, xy, 940.0)
    t = 940.0
    missed = total = answered = 0
    for step in range(20):
        for _ in range(12):
            t += 5.0
            w = walking[:, None]
            step_m = np.column_stack([np.cos(heading), np.sin(heading)]) * speed_m_s * 5.0
            xy += np.where(w, step_m, 0.0)
            np.clip(xy, 0.0, side, out=xy)
            due = np.flatnonzero(np.floor((t - phase) / 30) > np.floor((t - 5 - phase) / 30))
            cloaker.update_many([ids[i] for i in due], xy[due], t)
            switch = due[rng.random(len(due)) < 0.3]  # right after their fix
            walking[switch] = ~walking[switch]
            heading[switch] = rng.uniform(0.0, 2 * np.pi, len(switch))
        for a in range(60):
            out = cloaker.request(("q", a, step), ids[a], PARAMS, t)
            total += 1
            if out is None or out.region is None:
                continue
            answered += 1
            x0, y0, x1, y1 = out.region.polygon.bounds
            missed += not (x0 <= xy[a, 0] <= x1 and y0 <= xy[a, 1] <= y1)
    assert total == 1200 and answered >= 0.95 * total and missed == 0


@settings(max_examples=200, deadline=None)
@given(
    tau=st.floats(0.0, 1e6),
    tau2=st.floats(0.0, 1e6),
    h=st.floats(0.0, 1e5),
)
def test_moving_time_is_at_most_the_horizon_and_falls_with_time_stayed(
    tau: float, tau2: float, h: float
) -> None:
    m = moving_time(np.array([tau, tau2, 0.0]), h)
    assert np.all(m >= -1e-6 * max(h, 1.0)) and np.all(m <= h + 1e-9)
    assert m[2] == pytest.approx(h)
    lo, hi = sorted((tau, tau2))
    m_lo, m_hi = moving_time(np.array([lo, hi]), h)
    assert m_hi <= m_lo + 1e-6 * max(h, 1.0)
    if hi > 100 * max(h, 1.0):  # long stays: about h^2 / (2 tau)
        assert m_hi == pytest.approx(h * h / (2 * hi), rel=0.05, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    age=st.floats(0.0, 120.0),
    tau=st.floats(0.0, 1e5),
    k=st.integers(2, 20),
    slack=st.integers(1, 4),
    risk=st.floats(1e-9, 0.5),
)
@example(age=1e-9, tau=1e-9, k=3, slack=3, risk=0.5)  # rounding of metres near 5 (was flaky)
def test_still_margins_never_exceed_the_standard_and_thin_with_time_stayed(
    age: float, tau: float, k: int, slack: int, risk: float
) -> None:
    standard = 5.0 + 1.0 * age
    kw: dict[str, Any] = {"k": k, "slack": slack, "risk": risk, "speed_m_s": 3.0, "floor_m": 5.0}
    m = still_margins(
        np.array([age, age, age]), np.array([0.0, tau, 2 * tau + 1]), np.full(3, standard), **kw
    )
    assert m[0] == standard  # a member who was moving keeps the standard thin margin
    assert np.all(m <= standard) and np.all(m >= 5.0)
    assert m[2] <= m[1]
    # the bound: whoever is outside her margin left within age - (m - floor) / speed seconds
    # of her fix, which a stay of tau ends in with probability w / (tau + w) <= p, that is
    # w <= p tau / (1 - p) (to a microsecond: the margin is metres near 5, rounded)
    p = min((risk / math.comb(k + slack, slack + 1)) ** (1 / (slack + 1)), 0.5)
    w = max(age - (m[1] - 5.0) / 3.0, 0.0)
    if tau > 0 and m[1] < standard:
        assert w <= p * tau / (1 - p) + 1e-6


@pytest.mark.parametrize("town", [(200, 400), (50, 150)], ids=["town", "sparse-town"])
def test_parked_insiders_take_places_in_the_set_of_a_requester_who_stays_put(
    town: tuple[int, int],
) -> None:
    """A known limit, measured (docs/algorithms.md, residual risk): without insiders every
    session keeps k honest users in all its regions; two insiders' devices parked beside a
    requester who stays put are chosen as members (near her, never moving) and leave fewer
    than k honest users in every session (measured here: 100 % in both towns, honest median 3)."""
    still, walking = town
    clean = parked_insiders_attack(
        0, still_users=still, walkers=walking, askers=20, minutes=20, cloak=box()
    )
    assert clean.sessions == 20 and clean.below_k_rate == 0.0
    parked = parked_insiders_attack(
        2, still_users=still, walkers=walking, askers=20, minutes=20, cloak=box()
    )
    assert parked.below_k_rate >= 0.5
    assert parked.honest_median <= clean.honest_median - 2


@pytest.mark.parametrize("slack", [0, 2])
def test_the_cloaker_counts_session_regions_by_their_margins(slack: int) -> None:
    """Every answered session region is counted once, as thin or worst-case
    (``Cloaker.session_counts``: benchmarks read where a session's cost comes from). Users
    who stay put with fixes 20 s old: the thin margins (5 m + 1 m/s x age) beat the
    worst-case ones (3 m/s x age), so with a slack most regions are thin; with none,
    worst-case only, and none counted ``short`` (that needs a slack to fall short of)."""
    rng = np.random.default_rng(4)
    n = 400
    xy = rng.uniform(0.0, SIDE_M, (n, 2))
    ids = [f"u{i}" for i in range(n)]
    cloaker = Cloaker(
        CloakConfig(world=(0.0, 0.0, SIDE_M, SIDE_M), session_slack=slack, **ONE_BOX),
        rng=np.random.default_rng(5),
    )
    answered = 0
    t = 1000.0
    for step in range(12):
        cloaker.update_many(ids, xy, t + 60.0 * step)
        for a in range(5):
            out = cloaker.request(("q", a, step), ids[a], PARAMS, t + 60.0 * step + 20.0)
            assert out is not None
            answered += out.region is not None
    assert answered == 60
    counts = cloaker.session_counts
    thin, worst = counts["thin"], counts["worst_case"]
    assert thin + worst == answered
    assert counts["short"] <= worst
    assert counts["audit_dropped"] == 0  # nobody moves
    if slack:
        assert thin >= 0.75 * answered  # measured 50 of 60
    else:
        assert thin == 0 and counts["short"] == 0
    # everyone but the askers reports 400 m east of where she was: interpolated to when the
    # last regions were answered, members of the thin ones were outside, and the audit
    # drops them (worst-case regions are not audited)
    t_last = t + 60.0 * 11 + 20.0
    moved = xy.copy()
    moved[5:, 0] += 400.0
    cloaker.update_many(ids[5:], moved[5:], t_last + 10.0)
    for a in range(5):
        cloaker.request(("q", a, 12), ids[a], PARAMS, t_last + 40.0)
    assert (counts["audit_dropped"] > 0) == bool(slack)
