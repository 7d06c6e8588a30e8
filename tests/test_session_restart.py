"""Sessions carried over a restart: the intersection attack across it, before and after.

An observer who knows everyone's positions and links one user's requests intersects the users
inside each of her regions. A session keeps k of the same users in all of them; a restarted
anonymizer that forgot its sessions started an unrelated set, and the intersection across the
restart fell below k. These tests restart a real :class:`Cloaker` in the middle of sessions,
over densities and speeds, and attack the regions it answers.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from locpriv.core.cloak.cloaker import Cloaker
from locpriv.core.cloak.session_records import SessionRecord
from locpriv.core.cloak.types import CloakConfig, CloakParams

SIDE = 3000.0
F64 = NDArray[np.float64]


def _walk(xy: F64, heading: F64, speed: float, dt: float, rng: np.random.Generator) -> F64:
    heading += rng.normal(0.0, 0.3, len(heading))
    step = speed * dt * np.column_stack([np.cos(heading), np.sin(heading)])
    out: F64 = np.clip(xy + step, 0.0, SIDE)
    return out


def _inside(xy: F64, bounds: tuple[float, ...]) -> set[int]:
    x0, y0, x1, y1 = bounds
    m = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
    return set(np.flatnonzero(m).tolist())


def _sessions_across_a_restart(
    n: int, speed: float, seed: int, *, carry: bool, askers: int = 12, k: int = 5
) -> tuple[list[int], int]:
    """Askers ask every 60 s for 10 minutes in 600 s sessions; the cloaker is replaced by a
    fresh one after 5 minutes (carrying its sessions over or not). Everyone reports every
    10 s. Returns each asker's intersection size and how many sessions were restored."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0.0, SIDE, (n, 2))
    heading = rng.uniform(0.0, 2 * np.pi, n)
    ids = [f"u{i}" for i in range(n)]
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=60.0)
    ck = Cloaker(cfg, rng=np.random.default_rng(seed + 1), phase=0.4)
    p = CloakParams(k=k, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=600.0)
    cand: dict[int, set[int]] = {a: set(range(n)) for a in range(askers)}
    restored = 0
    for step in range(61):
        now = 10.0 * step
        if step == 30:  # a restart: the next process knows nobody until they report
            records: list[SessionRecord] = ck.export_sessions(now) if carry else []
            ck = Cloaker(cfg, rng=np.random.default_rng(seed + 2), phase=0.4)
            restored = ck.restore_sessions(records, now)
        xy = _walk(xy, heading, speed, 10.0, rng)
        ck.update_many(ids, xy, now=now)
        if step % 6 == 3:
            for a in range(askers):
                out = ck.request((step, a), ids[a], p, now + 0.5)
                if out is not None and out.region is not None:
                    cand[a] &= _inside(xy, out.region.polygon.bounds)
    return [len(c) for c in cand.values()], restored


@pytest.mark.parametrize(("n", "speed"), [(600, 1.4), (1500, 1.4), (1500, 0.5)])
@pytest.mark.parametrize("seed", [0, 1])
def test_sessions_carried_over_a_restart_keep_k(n: int, speed: float, seed: int) -> None:
    sizes, restored = _sessions_across_a_restart(n, speed, seed, carry=True)
    assert restored == len(sizes)
    assert min(sizes) >= 5, sizes
    forgot, _ = _sessions_across_a_restart(n, speed, seed, carry=False)
    assert sum(s < 5 for s in forgot) >= len(forgot) // 2, forgot  # the hole it closes


def test_records_leave_out_members_with_an_audit_pending_and_ended_sessions() -> None:
    rng = np.random.default_rng(3)
    n = 800
    xy = rng.uniform(0.0, SIDE, (n, 2))
    ids = [f"u{i}" for i in range(n)]
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=120.0)
    ck = Cloaker(cfg, rng=np.random.default_rng(4), phase=0.4)
    p = CloakParams(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=120.0)
    ck.update_many(ids, xy, now=0.0)
    ck.update_many(ids, xy + 1.0, now=10.0)
    for a in range(20):
        assert ck.request(("a", a), ids[a], p, 10.5) is not None
    live = ck._sessions
    pending = {u for s in live.values() for _t, _b, fixes in s.audits for u in fixes}
    recs = {r.user: r for r in ck.export_sessions(20.0)}
    assert set(recs) == set(live)
    for user, r in recs.items():
        assert not set(r.members) & {u for _t, _b, f in live[user].audits for u in f}
        assert set(r.members) <= set(live[user].members)
        assert r.seed == live[user].seed and r.k == 5
    assert pending  # thin regions answered from dead-reckoned positions, audits pending
    assert any(len(r.members) < len(live[r.user].members) for r in recs.values())
    assert ck.export_sessions(10.5 + 121.0) == []  # ended: nothing to carry
    fresh = Cloaker(cfg, phase=0.4)
    assert fresh.restore_sessions(list(recs.values()), 10.5 + 121.0) == 0
    assert fresh.restore_sessions(list(recs.values()), 30.0) == len(recs)
    assert fresh.session_counts["restored"] == len(recs)


def test_seen_speeds_go_over_a_restart_to_each_users_first_report() -> None:
    """A driver timed by one process is a driver to the next from her first report (not only
    after it has timed a chord of hers): her margins and the spare do not fall back to a
    pedestrian's in the restart's first minute."""
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=600.0)
    first = Cloaker(cfg, phase=0.4)
    rng = np.random.default_rng(5)
    walkers = rng.uniform(0.0, SIDE, (50, 2))
    ids = [f"w{i}" for i in range(50)] + ["car"]
    for step in range(9):  # 2 minutes: the car drives east at 12 m/s, walkers stroll
        now = 15.0 * step
        walkers = np.clip(walkers + rng.normal(0.0, 10.0, walkers.shape), 0.0, SIDE)
        car = np.array([[200.0 + 12.0 * now, 1500.0]])
        first.update_many(ids, np.vstack([walkers, car]), now=now)
    speeds = first.export_speeds()
    assert set(speeds) == {"car"} and 10.0 < speeds["car"] <= 12.0
    nothing = Cloaker(cfg, phase=0.4)
    carried = Cloaker(cfg, phase=0.4)
    carried.restore_speeds({**speeds, "bad": float("nan"), "neg": -1.0}, 125.0)
    assert carried.export_speeds() == speeds  # kept until she reports, for a second restart
    for c in (nothing, carried):
        c.update_many(ids, np.vstack([walkers, [[1800.0, 1500.0]]]), now=130.0)
    slot = carried.table.ids["car"]
    assert carried.table.vmax[slot] == speeds["car"]
    assert nothing.table.vmax[nothing.table.ids["car"]] == 0.0
    assert float(carried.table.vmax[carried.table.ids["w0"]]) == 0.0
    assert carried.export_speeds() == speeds
    # a carried speed that no first report claims is forgotten after the TTL, like a user
    late = Cloaker(cfg, phase=0.4)
    late.restore_speeds(speeds, 125.0)
    late.table.expire(125.0 + cfg.user_ttl_s - 1.0, cfg.user_ttl_s)
    assert late.export_speeds() == speeds
    late.table.expire(125.0 + cfg.user_ttl_s + 1.0, cfg.user_ttl_s)
    assert late.export_speeds() == {}
