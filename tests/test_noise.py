"""Perturbation mechanisms, degree conversion and the static-reuse (averaging) defence."""

from __future__ import annotations

import math

import numpy as np
import pytest

from locpriv.core.geo import LocalProjection, distance_m
from locpriv.core.noise import (
    GaussianMechanism,
    PerturbedPoint,
    PlanarLaplace,
    offset_lonlat,
    perturb,
    planar_laplace_radius,
)


def test_gaussian_axes_have_their_sigmas() -> None:
    rng = np.random.default_rng(1)
    d = GaussianMechanism(100.0, 40.0).sample_m(rng, 40_000)
    assert d.shape == (40_000, 2)
    assert abs(d[:, 0].std() / 100.0 - 1) < 0.02
    assert abs(d[:, 1].std() / 40.0 - 1) < 0.02
    assert abs(np.corrcoef(d.T)[0, 1]) < 0.02


@pytest.mark.parametrize("lat", [0.0, 48.137, -33.9, 70.0])
def test_wire_offsets_are_metres(lat: float) -> None:
    """σ in metres becomes the right spread in degrees: geodesic offsets have std σ per axis."""
    rng = np.random.default_rng(2)
    lon0, sigma = 11.5, 200.0
    mech = GaussianMechanism(sigma)
    pts = np.array([perturb(lon0, lat, mech, rng) for _ in range(8000)])
    dx = distance_m(lon0, lat, pts[:, 0], lat) * np.sign(pts[:, 0] - lon0)
    dy = distance_m(lon0, lat, lon0, pts[:, 1]) * np.sign(pts[:, 1] - lat)
    assert abs(dx.std() / sigma - 1) < 0.04
    assert abs(dy.std() / sigma - 1) < 0.04


def test_offset_with_projection_matches_linearisation() -> None:
    proj = LocalProjection(48.0, 11.0)
    a = offset_lonlat(11.01, 48.01, 300.0, -400.0, proj)
    b = offset_lonlat(11.01, 48.01, 300.0, -400.0)
    assert distance_m(a[0], a[1], b[0], b[1]) < 0.2  # 4e-4 of 500 m
    assert abs(float(distance_m(11.01, 48.01, a[0], a[1])) - 500.0) < 0.05


def test_offset_wraps_and_clamps() -> None:
    lon, lat = offset_lonlat(179.9999, 89.9999, 5000.0, 5000.0)
    assert -180.0 <= lon < 180.0
    assert lat == 90.0


def test_planar_laplace_radius_inverse_cdf() -> None:
    eps = 0.01
    p = np.array([0.1, 0.5, 0.9, 0.99])
    r = planar_laplace_radius(eps, p)
    cdf = 1 - (1 + eps * r) * np.exp(-eps * r)
    np.testing.assert_allclose(cdf, p, rtol=1e-10)


@pytest.mark.parametrize("method", ["lambertw", "gamma"])
def test_planar_laplace_moments(method: str) -> None:
    rng = np.random.default_rng(3)
    mech = PlanarLaplace(0.02, method=method)
    d = mech.sample_m(rng, 50_000)
    r = np.hypot(d[:, 0], d[:, 1])
    assert abs(r.mean() / mech.mean_displacement_m - 1) < 0.02  # E r = 2/ε
    assert abs(d[:, 0].std() / mech.scale_m - 1) < 0.02  # √3/ε per axis
    angles = np.arctan2(d[:, 1], d[:, 0])
    hist, _ = np.histogram(angles, bins=8, range=(-math.pi, math.pi))
    assert hist.min() > 0.9 * hist.mean()


def test_laplace_methods_agree_in_distribution() -> None:
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(4)
    a = np.hypot(*PlanarLaplace(0.05, "lambertw").sample_m(rng, 5000).T)
    b = np.hypot(*PlanarLaplace(0.05, "gamma").sample_m(rng, 5000).T)
    assert ks_2samp(a, b).pvalue > 0.001


def test_mechanism_validation() -> None:
    with pytest.raises(ValueError):
        GaussianMechanism(-1.0)
    with pytest.raises(ValueError):
        PlanarLaplace(0.0)


def test_static_device_reuses_its_point() -> None:
    rng = np.random.default_rng(5)
    pp = PerturbedPoint(GaussianMechanism(100.0), reuse_radius_m=50.0, reuse_ttl_s=600.0)
    first = pp.current(11.5, 48.1, 0.0, rng)
    # jitter of ~10 m and 100 later calls: the same point
    for i in range(100):
        lon, lat = offset_lonlat(11.5, 48.1, 10.0 * math.cos(i), 10.0 * math.sin(i))
        assert pp.current(lon, lat, float(i), rng) == first
    assert pp.fresh_draws == 1
    assert pp.draws_at(11.5, 48.1) == 1
    # moving away draws afresh; coming back reuses the place's draw
    far = offset_lonlat(11.5, 48.1, 1000.0, 0.0)
    other = pp.current(*far, 200.0, rng)
    assert other != first
    assert pp.current(11.5, 48.1, 300.0, rng) == first
    assert pp.fresh_draws == 2
    # after the ttl a fresh draw, counted at the place
    third = pp.current(11.5, 48.1, 700.0, rng)
    assert third != first
    assert pp.draws_at(11.5, 48.1) == 2


def test_draws_per_place_are_capped() -> None:
    rng = np.random.default_rng(6)
    pp = PerturbedPoint(GaussianMechanism(50.0), reuse_ttl_s=10.0, max_draws_per_place=3)
    seen = {pp.current(2.35, 48.85, 100.0 * i, rng) for i in range(20)}
    assert len(seen) == 3
    assert pp.draws_at(2.35, 48.85) == 3


def test_disabled_reuse_draws_every_time() -> None:
    rng = np.random.default_rng(7)
    pp = PerturbedPoint(GaussianMechanism(50.0), enabled=False)
    seen = {pp.current(2.35, 48.85, float(i), rng) for i in range(20)}
    assert len(seen) == 20
    assert pp.fresh_draws == 20
