"""Reciprocity and attacks by an observer who knows every position and sees R.

A centred baseline (the smallest square centred on the requester holding k users) shows that
the attacks are real: they break the baseline, and stay at or below 1/k on the shared partition.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from locpriv.cloak import CloakConfig, Cloaker, CloakParams

WORLD = (0.0, 0.0, 10_000.0, 10_000.0)
N = 3000
K = 5

Attack = Callable[[NDArray[np.float64], NDArray[np.intp], tuple[float, float, float, float]], int]


def _population(kind: str, seed: int) -> NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.uniform(0, 10_000, (N, 2))
    # Gaussian hot spots, one holding a third of the users in ~30 m, plus a uniform background
    centres = np.array([[2500.0, 2500.0], [7000.0, 6000.0], [4000.0, 8000.0]])
    sd = np.array([30.0, 300.0, 600.0])
    which = rng.choice(3, size=N, p=[0.34, 0.33, 0.33])
    xy = centres[which] + rng.normal(size=(N, 2)) * sd[which, None]
    bg = rng.random(N) < 0.1
    xy[bg] = rng.uniform(0, 10_000, (int(bg.sum()), 2))
    out: NDArray[np.float64] = np.clip(xy, 0.0, 10_000.0)
    return out


def _cloaker(xy: NDArray[np.float64]) -> tuple[Cloaker, list[str]]:
    ck = Cloaker(CloakConfig(world=WORLD, epoch_s=10.0))
    ids = [f"u{i}" for i in range(len(xy))]
    ck.update_many(ids, xy, now=0.0)
    return ck, ids


def _inside(xy: NDArray[np.float64], b: tuple[float, float, float, float]) -> NDArray[np.intp]:
    x0, y0, x1, y1 = b
    m = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
    return np.flatnonzero(m)


def _nearest_centre(xy: NDArray[np.float64], ins: NDArray[np.intp], b: tuple[float, ...]) -> int:
    c = np.array([(b[0] + b[2]) / 2, (b[1] + b[3]) / 2])
    return int(ins[np.argmin(np.hypot(*(xy[ins] - c).T))])


def _nearest_centroid(xy: NDArray[np.float64], ins: NDArray[np.intp], b: tuple[float, ...]) -> int:
    c = xy[ins].mean(axis=0)
    return int(ins[np.argmin(np.hypot(*(xy[ins] - c).T))])


def _uniform(rng: np.random.Generator) -> Attack:
    return lambda xy, ins, b: int(rng.choice(ins))


def _centred_baseline(xy: NDArray[np.float64], u: int, k: int) -> tuple[float, float, float, float]:
    d = np.max(np.abs(xy - xy[u]), axis=1)  # Chebyshev: smallest centred square with k users
    r = float(np.partition(d, k - 1)[k - 1]) + 1.0
    x, y = float(xy[u, 0]), float(xy[u, 1])
    return (x - r, y - r, x + r, y + r)


@pytest.mark.parametrize("kind", ["uniform", "hotspots"])
@pytest.mark.parametrize("a_min", [1.0, 2e4])
def test_reciprocity_every_user_in_r_gets_r(kind: str, a_min: float) -> None:
    xy = _population(kind, seed=11)
    ck, ids = _cloaker(xy)
    p = CloakParams(k=K, a_min_m2=a_min, a_max_m2=5e7, max_delay_s=0.0)
    rng = np.random.default_rng(5)
    checked = 0
    for u in rng.choice(N, size=40, replace=False):
        out = ck.request(("u", u), ids[u], p, now=1.0)
        assert out is not None and out.region is not None
        bounds = out.region.polygon.bounds
        members = _inside(xy, bounds)
        assert len(members) >= K
        for v in members:
            other = ck.request(("v", v), ids[v], p, now=2.0)
            assert other is not None and other.region is not None
            assert other.region.polygon.equals(out.region.polygon)
            assert other.region == out.region
            checked += 1
    assert checked >= 40 * K


@pytest.mark.parametrize("kind", ["uniform", "hotspots"])
def test_attacks_stay_at_or_below_one_over_k(kind: str) -> None:
    xy = _population(kind, seed=21)
    ck, ids = _cloaker(xy)
    p = CloakParams(k=K, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=0.0)
    rng = np.random.default_rng(9)
    attacks: dict[str, Attack] = {
        "nearest_centre": _nearest_centre,
        "uniform": _uniform(rng),
        "nearest_centroid": _nearest_centroid,
    }
    trials = 1500
    wins = dict.fromkeys(attacks, 0)
    base_wins = dict.fromkeys(attacks, 0)
    for u in rng.integers(0, N, size=trials):
        out = ck.request(("u", u), ids[u], p, now=1.0)
        assert out is not None and out.region is not None
        b = out.region.polygon.bounds
        ins = _inside(xy, b)
        bb = _centred_baseline(xy, int(u), K)
        bins = _inside(xy, bb)
        for name, attack in attacks.items():
            wins[name] += attack(xy, ins, b) == u
            base_wins[name] += attack(xy, bins, bb) == u
    bound = 1 / K + 3 * math.sqrt((1 / K) * (1 - 1 / K) / trials)
    for name in attacks:
        assert wins[name] / trials <= bound, (name, wins[name] / trials)
    # the attack is real: it identifies the requester of a centred region almost always
    assert base_wins["nearest_centre"] / trials > 0.9


@pytest.mark.parametrize(("kind", "a_min"), [("uniform", 1e4), ("hotspots", 2e5)])
def test_requester_is_not_at_the_centre(kind: str, a_min: float) -> None:
    xy = _population(kind, seed=31)
    ck, ids = _cloaker(xy)
    p = CloakParams(k=K, a_min_m2=a_min, a_max_m2=5e7, max_delay_s=0.0)
    rng = np.random.default_rng(3)
    offs = []
    base = []
    for u in rng.integers(0, N, size=800):
        out = ck.request(("u", u), ids[u], p, now=1.0)
        assert out is not None and out.region is not None
        x0, y0, x1, y1 = out.region.polygon.bounds
        offs.append(((xy[u, 0] - x0) / (x1 - x0), (xy[u, 1] - y0) / (y1 - y0)))
        bx0, by0, bx1, by1 = _centred_baseline(xy, int(u), K)
        base.append(((xy[u, 0] - bx0) / (bx1 - bx0), (xy[u, 1] - by0) / (by1 - by0)))
    o = np.array(offs)
    bo = np.array(base)
    assert np.all((o >= 0) & (o <= 1))
    # Uniform offsets put 4 % in the central [0.4, 0.6]² box and have mean |o - 0.5| = 0.25;
    # the centred baseline puts 100 % there with mean distance 0.
    central = np.mean(np.all(np.abs(o - 0.5) <= 0.1, axis=1))
    assert central < 0.15
    assert np.mean(np.abs(o - 0.5)) > 0.15
    assert np.mean(np.all(np.abs(bo - 0.5) <= 0.1, axis=1)) == 1.0
    # and the offset histogram is not peaked in the middle decile
    hist, _ = np.histogram(o.ravel(), bins=10, range=(0, 1))
    assert hist[4] + hist[5] <= 2.5 * hist.mean()
