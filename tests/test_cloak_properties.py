"""Hypothesis properties of the shared partition and of cloak_once / Cloaker outcomes."""

from __future__ import annotations

import numpy as np
import shapely
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from locpriv.core.cloak.cloaker import (
    CloakConfig,
    Cloaker,
    CloakOutcome,
    CloakParams,
    CloakRegion,
    cloak_once,
)
from locpriv.core.cloak.partition import build_partition
from locpriv.errors import CloakInfeasible, CloakTimeout, UnknownUser

WORLD = (0.0, 0.0, 5000.0, 5000.0)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@st.composite
def populations(draw: st.DrawFn) -> NDArray[np.float64]:
    """Uniform, Gaussian hot spots, or many users stacked on one exact spot (metres)."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 400))
    kind = draw(st.sampled_from(["uniform", "hotspots", "stacked"]))
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        xy = rng.uniform(0, 5000, (n, 2))
    elif kind == "hotspots":
        centres = rng.uniform(500, 4500, (3, 2))
        xy = centres[rng.integers(3, size=n)] + rng.normal(0, 40, (n, 2))
    else:
        xy = rng.uniform(0, 5000, (n, 2))
        xy[: n * 3 // 4] = (2500.0, 1200.0)
    return np.clip(xy, 0.0, 5000.0)


def _covered(region: CloakRegion, xy: NDArray[np.float64]) -> NDArray[np.bool_]:
    x0, y0, x1, y1 = region.polygon.bounds
    m: NDArray[np.bool_] = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
    return m


@SETTINGS
@given(
    xy=populations(),
    k=st.integers(1, 30),
    a_min=st.sampled_from([0.0, 10.0, 1e4, 2e5, 3e6]),
)
def test_partition_invariants(xy: NDArray[np.float64], k: int, a_min: float) -> None:
    n = len(xy)
    part = build_partition(xy[:, 0], xy[:, 1], np.zeros(n), WORLD, k=k, a_min_m2=a_min)
    r = part.rects
    areas = (r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1])
    # leaves tile the root and hold exactly their members
    assert np.isclose(areas.sum(), 25e6)
    assert np.bincount(part.leaf_of, minlength=len(r)).tolist() == part.counts.tolist()
    own = r[part.leaf_of]
    assert np.all((xy[:, 0] >= own[:, 0]) & (xy[:, 0] <= own[:, 2]))
    assert np.all((xy[:, 1] >= own[:, 1]) & (xy[:, 1] <= own[:, 3]))
    m = part.mbrs[part.leaf_of]
    assert np.all((xy >= m[:, :2]) & (xy <= m[:, 2:]))
    if len(r) > 1:  # a split happened: every leaf meets both constraints
        assert part.counts.min() >= k
        assert areas.min() > a_min
    if n >= 2 * k and a_min == 0.0 and len(np.unique(xy[:, 0])) == n:
        assert len(r) > 1
    # leaves never hold 2k or more users unless a_min (or ties) forbid a split
    if a_min == 0.0 and len(np.unique(xy, axis=0)) == n:
        assert part.counts.max() < 2 * k


@SETTINGS
@given(
    xy=populations(),
    data=st.data(),
    k=st.integers(2, 20),
    a_min=st.sampled_from([1.0, 1e3, 5e4, 1e6]),
    a_max_factor=st.sampled_from([1.5, 10.0, 1e3]),
)
def test_cloak_once_invariants_or_justified_error(
    xy: NDArray[np.float64], data: st.DataObject, k: int, a_min: float, a_max_factor: float
) -> None:
    n = len(xy)
    u = data.draw(st.integers(0, n - 1))
    p = CloakParams(k=k, a_min_m2=a_min, a_max_m2=a_min * a_max_factor, max_delay_s=0.0)
    try:
        region = cloak_once(xy, u, p, world=WORLD)
    except CloakInfeasible:
        # Oracle for this partition: it fails only if there are fewer than k users, or the
        # members of the requester's leaf (the only reciprocal choice) span >= a_max / 2.
        if n >= k:
            part = build_partition(xy[:, 0], xy[:, 1], np.zeros(n), WORLD, k=k, a_min_m2=a_min)
            leaf = part.leaf_of[u]
            mb = part.mbrs[leaf]
            mbr_area = (mb[2] - mb[0]) * (mb[3] - mb[1])
            assert mbr_area * 4 >= p.a_max_m2 / 2 or p.a_min_m2 * (1 + 1e-6) >= p.a_max_m2
        return
    inside = _covered(region, xy)
    assert inside[u]
    assert shapely.covers(region.polygon, shapely.Point(xy[u]))
    assert inside.sum() >= k
    assert region.users >= k
    assert inside.sum() >= region.users
    assert p.a_min_m2 < region.area_m2 < p.a_max_m2
    assert np.isclose(region.polygon.area, region.area_m2)
    assert region.t1 <= region.t2


@SETTINGS
@given(
    xy=populations(),
    data=st.data(),
    k=st.integers(2, 12),
    a_min=st.sampled_from([1.0, 5e4, 1e6]),
)
def test_cloaker_outcomes_hold_invariants_on_snapshot(
    xy: NDArray[np.float64], data: st.DataObject, k: int, a_min: float
) -> None:
    n = len(xy)
    cfg = CloakConfig(world=WORLD, a_max_ceiling_m2=1e8)
    ck = Cloaker(cfg)
    ids = [f"u{i}" for i in range(n)]
    ck.update_many(ids, xy, now=0.0)
    p = CloakParams(k=k, a_min_m2=a_min, a_max_m2=2.5e7, max_delay_s=0.0)
    for u in data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5)):
        out = ck.request(("r", u), ids[u], p, now=0.5)
        assert out is not None
        if n < k:
            assert isinstance(out.error, CloakInfeasible)
            assert "too few users" in str(out.error)
            continue
        # a_max = the whole world: always feasible
        assert out.error is None
        assert out.region is not None
        inside = _covered(out.region, xy)
        assert inside[u]
        assert inside.sum() >= out.region.users >= k
        assert a_min < out.region.area_m2 < p.a_max_m2
        assert out.region.t1 <= out.region.t2 == 0.5


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cloaker_random_operation_sequences(data: st.DataObject) -> None:
    """Random interleavings of updates, requests, removals, ticks and prepare(): every request
    gets at most one outcome (exactly one by the end), regions hold the invariants for the
    snapshot they describe (positions as of t2), timeouts never come early."""
    ttl = 1000.0
    ck = Cloaker(CloakConfig(world=(0.0, 0.0, 2000.0, 2000.0), epoch_s=1.0, user_ttl_s=ttl))
    users = [f"u{i}" for i in range(10)]
    hist: dict[str, list[tuple[float, float, float] | tuple[float, None, None]]] = {
        u: [] for u in users
    }
    req: dict[int, tuple[str, CloakParams, float]] = {}
    outcomes: dict[object, object] = {}
    t = 0.0

    def collect(outs: list[CloakOutcome] | CloakOutcome | None, now: float) -> None:
        if outs is None:
            return
        for o in outs if isinstance(outs, list) else [outs]:
            assert o.request_id in req
            assert o.request_id not in outcomes
            outcomes[o.request_id] = o
            event("region" if o.region is not None else type(o.error).__name__)
            uid, p, t_req = req[int(o.request_id)]
            if o.region is None:
                assert o.error is not None
                if isinstance(o.error, CloakTimeout):
                    assert now >= t_req + p.max_delay_s
                continue
            r = o.region
            assert t_req - 1.0 < r.t2 <= now
            assert r.t1 <= r.t2
            assert p.a_min_m2 < r.area_m2 < p.a_max_m2
            x0, y0, x1, y1 = r.polygon.bounds

            def pos_at(u: str, when: float) -> tuple[float, float] | None:
                last = [h for h in hist[u] if h[0] <= when]
                if not last or last[-1][1] is None:
                    return None
                return (float(last[-1][1]), float(last[-1][2]))

            mine = pos_at(uid, r.t2)
            assert mine is not None
            assert x0 <= mine[0] <= x1 and y0 <= mine[1] <= y1
            inside = 0
            for u in users:
                q = pos_at(u, r.t2)
                inside += q is not None and x0 <= q[0] <= x1 and y0 <= q[1] <= y1
            assert inside >= r.users >= p.k

    n_ops = data.draw(st.integers(5, 60))
    for i in range(n_ops):
        t += data.draw(st.sampled_from([0.01, 0.1, 0.3, 0.6, 1.1]))
        op = data.draw(
            st.sampled_from(["update", "update", "update", "request", "tick", "prep", "rm"])
        )
        u = data.draw(st.sampled_from(users))
        if op == "update":
            x = data.draw(st.floats(0.0, 2000.0))
            y = data.draw(st.floats(0.0, 2000.0))
            hist[u].append((t, x, y))
            collect(ck.update(u, x, y, t), t)
        elif op == "request":
            p = CloakParams(
                k=data.draw(st.integers(2, 4)),
                a_min_m2=data.draw(st.sampled_from([1.0, 1e4])),
                a_max_m2=data.draw(st.sampled_from([5e4, 4e6])),
                max_delay_s=data.draw(st.sampled_from([0.0, 0.5, 2.0])),
            )
            req[i] = (u, p, t)
            out = ck.request(i, u, p, t)
            if out is not None and isinstance(out.error, UnknownUser):
                assert not hist[u] or hist[u][-1][1] is None
            collect(out, t)
        elif op == "tick":
            collect(ck.on_deadline(t), t)
        elif op == "prep":
            collect(ck.prepare(t), t)
        else:
            hist[u].append((t, None, None))
            ck.remove(u)
    t += 10.0
    collect(ck.on_deadline(t), t)
    assert ck.pending() == 0
    assert set(outcomes) == set(req)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 300),
    span=st.sampled_from([3, 20, 200]),
    k=st.integers(2, 8),
    a_min=st.sampled_from([1.0, 1e4]),
)
def test_reciprocity_with_many_tied_coordinates(
    seed: int, n: int, span: int, k: int, a_min: float
) -> None:
    """Integer positions on a coarse grid (many exact ties): every user covered by R (boundary
    included) gets the same R."""
    rng = np.random.default_rng(seed)
    xy = rng.integers(0, span, (n, 2)).astype(np.float64) * (5000.0 / span)
    ck = Cloaker(CloakConfig(world=WORLD))
    ids = [f"u{i}" for i in range(n)]
    ck.update_many(ids, xy, now=0.0)
    p = CloakParams(k=k, a_min_m2=a_min, a_max_m2=2.5e7, max_delay_s=0.0)
    for u in rng.choice(n, size=min(n, 5), replace=False).tolist():
        out = ck.request(("u", u), ids[u], p, now=0.5)
        assert out is not None
        if out.region is None:
            assert n < k
            continue
        inside = np.flatnonzero(_covered(out.region, xy))
        assert u in inside
        assert len(inside) >= k
        for v in inside.tolist():
            other = ck.request(("v", v), ids[v], p, now=0.5)
            assert other is not None
            assert other.region == out.region
