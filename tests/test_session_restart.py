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
from _box_sessions import box
from numpy.typing import NDArray

from locpriv.core.cloak.cloaker import Cloaker
from locpriv.core.cloak.session_records import SessionRecord, SessionRecords
from locpriv.core.cloak.types import CloakConfig, CloakParams

"""Sessions of one box per region (``session_tile_factor = 0``); regions of tiles, the default
since 2026-12-06, are tested in tests/test_session_tiles.py."""

SIDE = 3000.0
EXACT = {"session_fix_error_m": 0.0}
"""The walkers' fixes are exact: no margin for where a fix may lie."""
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
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=60.0, **box(EXACT))
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


P120 = CloakParams(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=120.0)


def _thin_sessions(seed: int, askers: int) -> tuple[Cloaker, CloakConfig, list[str], F64]:
    """800 users who reported at 0 s and 10 s; ``askers`` of them asked at 10.5 s (thin
    regions: every member's audit pending). Returns the cloaker, its config, ids, positions."""
    rng = np.random.default_rng(seed)
    n = 800
    xy = rng.uniform(0.0, SIDE, (n, 2))
    ids = [f"u{i}" for i in range(n)]
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=120.0, **box(EXACT))
    ck = Cloaker(cfg, rng=np.random.default_rng(seed + 1), phase=0.4)
    ck.update_many(ids, xy, now=0.0)
    ck.update_many(ids, xy + 1.0, now=10.0)
    for a in range(askers):
        assert ck.request(("a", a), ids[a], P120, 10.5) is not None
    return ck, cfg, ids, xy


def test_records_carry_pending_audits_which_the_next_process_runs() -> None:
    """A session written right after a thin region has every member of it pending: the record
    keeps them with their audits, and the next process drops, at her first fix there, a
    member who was outside that region when it was answered, as this one would have."""
    ck, cfg, ids, xy = _thin_sessions(3, 20)
    p = P120
    live = ck._sessions
    before = ck.revision.value
    recs = {r.user: r for r in ck.export_sessions(10.6)}
    assert set(recs) == set(live)
    pending = 0
    for user, r in recs.items():
        assert r.members == live[user].members and r.seed == live[user].seed and r.k == 5
        assert [(a.t, a.box, a.fixes) for a in r.audits] == live[user].audits
        pending += sum(len(a.fixes) for a in r.audits)
    assert pending  # thin regions answered from dead-reckoned positions, audits pending
    # through the file's model and JSON, as a crash would leave them
    file = SessionRecords(saved_at=10.6, tiles={"world": list(recs.values())})
    back = SessionRecords.model_validate_json(file.model_dump_json()).tiles["world"]
    assert back == list(recs.values())
    user, r = next((u, r) for u, r in recs.items() if r.audits)
    t_ans, x1, fixes = r.audits[0].t, r.audits[0].box[2], r.audits[0].fixes
    out = next(u for u in fixes if u != user)  # she walks out: at t_ans she was outside
    bx, by, bt = fixes[out]
    fresh = Cloaker(cfg, phase=0.4)
    assert fresh.restore_sessions(back, 10.6) == len(recs)
    assert fresh.revision.value > 0 and ck.revision.value == before
    t_new = 2 * t_ans - bt  # her next fix: at t_ans she was midway
    moved = xy + 1.0
    moved[int(out[1:])] = (2 * (x1 + 20.0) - bx, by)
    fresh.update_many(ids, moved, now=t_new)
    ck.update_many(ids, moved, now=t_new)  # what the process that answered does
    again = {q.user: q for q in fresh.export_sessions(t_new)}
    assert again == {q.user: q for q in ck.export_sessions(t_new)}
    assert out not in again[user].members and out in r.members
    assert not any(q.audits for q in again.values())  # everyone reported: nothing pending
    assert fresh.session_counts["audit_dropped"] == ck.session_counts["audit_dropped"] >= 1
    assert fresh.session_counts["restored"] == len(recs)
    # what a write after the last one carries: the sessions changed since, and only those
    mark = ck.revision.value
    assert ck.export_sessions(t_new, since=mark) == []
    assert ck.request(("again", 0), user, p, t_new + 0.5) is not None
    assert [q.user for q in ck.export_sessions(t_new + 0.5, since=mark)] == [user]
    assert ck.export_sessions(t_new + 0.5 + 121.0) == []  # ended: nothing to carry
    assert Cloaker(cfg, phase=0.4).restore_sessions(back, 10.5 + 121.0) == 0


def test_seen_speeds_go_over_a_restart_to_each_users_first_report() -> None:
    """A driver timed by one process is a driver to the next from her first report (not only
    after it has timed a chord of hers): her margins and the spare do not fall back to a
    pedestrian's in the restart's first minute."""
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=600.0, **box(EXACT))
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


def test_records_over_the_bounds_lose_members_never_audits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A set or an audit list longer than a record may hold is cut on the safe side: members
    are left out (a set that lost them), and a member of an audit left out goes with it."""
    import locpriv.core.cloak.cloaker as cloaker_module

    ck, _cfg, _ids, _xy = _thin_sessions(6, 10)
    live = {
        u: (list(s.members), [set(f) for _t, _b, f in s.audits]) for u, s in ck._sessions.items()
    }
    assert any(pending for _m, pending in live.values())
    monkeypatch.setattr(cloaker_module, "MAX_MEMBERS", 6)
    monkeypatch.setattr(cloaker_module, "MAX_AUDITS", 0)
    for r in ck.export_sessions(10.6):
        members, pending = live[r.user]
        assert len(r.members) <= 6 and set(r.members) <= set(members[:6])
        assert not r.audits and not set(r.members) & set().union(*pending)
        assert r.pool <= 6


def test_a_request_before_the_members_report_again_keeps_them_pending() -> None:
    """Right after a restart the next process knows nobody until they report. A requester who
    asks before her members' next fixes gets no region (too few of them known), and keeps
    them: their audits wait for those fixes, and once they report her session goes on with
    the same members (dropping them for not being known yet emptied the session)."""
    ck, cfg, ids, xy = _thin_sessions(3, 20)
    recs = ck.export_sessions(10.6)
    user, r = next((r.user, r) for r in recs if r.audits)  # her members' audits pending
    fresh = Cloaker(cfg, phase=0.4)
    assert fresh.restore_sessions(recs, 10.6) == len(recs)
    me = ids.index(user)
    fresh.update(user, *(xy[me] + 1.0), now=12.0)  # she alone has reported since
    early = fresh.request(("early", 0), user, P120, 13.5)
    assert early is not None and early.region is None and early.error is not None
    assert "still known" in str(early.error)
    kept = {q.user: q for q in fresh.export_sessions(13.5)}[user]
    assert kept.members == r.members  # nobody dropped for not having reported yet
    fresh.update_many(ids, xy + 1.0, now=20.0)  # everyone's next fix, where they were
    late = fresh.request(("late", 0), user, P120, 21.5)
    assert late is not None and late.region is not None, late
    x0, y0, x1, y1 = late.region.polygon.bounds
    at = xy + 1.0
    inside = {ids[j] for j in _inside(at, (x0, y0, x1, y1))}
    assert len(inside & set(r.members)) >= P120.k
