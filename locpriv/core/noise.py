"""Location perturbation for Protocol 4: Gaussian and planar-Laplace noise, static-point reuse.

Noise is drawn in metres in a local tangent plane (east, north) and converted to WGS84 degrees
for the wire. With a :class:`~locpriv.core.geo.LocalProjection` the conversion goes through it;
without
one the offset is scaled by :func:`~locpriv.core.geo.metres_per_degree` at the true point, whose
relative error for offsets ``d`` ≪ 100 km is about ``d·tan(lat)/R`` (3e-4 at 1 km and 60°).

Mechanisms (one per deployment, all behind :class:`Mechanism`):

* :class:`GaussianMechanism` — ``εx ~ N(0, σx²)``, ``εy ~ N(0, σy²)`` independent, metres.
* :class:`PlanarLaplace` — ε-geo-indistinguishability (Andrés et al., CCS 2013): uniform angle,
  radius with density ``ε² r e^{-ε r}`` (a Gamma(2, 1/ε)), mean ``2/ε`` metres, drawn by the
  inverse CDF ``r = -(W₋₁((p-1)/e) + 1)/ε`` with Lambert's ``W₋₁``.

Averaging defence (Lemma 1: ``n`` fresh copies of a static point average to error ``σ/√n``):
:class:`PerturbedPoint` keeps one perturbed point and reuses it while the device stays within
``reuse_radius_m`` of where it was drawn. Places are cells of side ``reuse_radius_m``.

* **Keyed** (``secret`` given; the default of Protocol 4 devices): the noise of a place is a
  pseudo-random function of the device's secret and the place (HMAC-SHA256 seeds the draw), so
  a device that stays or comes back, whatever the time, publishes the *same* point there: an
  adversary who records every broadcast for months holds one sample per place, and its error
  stays that of one draw (``σ·√(π/2)`` on average for Gaussian noise). The place grid is shifted
  by a secret offset, so crossing a place boundary tells nothing about where the boundaries are.
  ``rekey_s`` optionally changes the key every period (one more point per place and period).
* **Unkeyed** (``secret=None``): fresh random draws, reused for at most ``reuse_ttl_s``; the draw
  of each place visited is remembered, so coming back reuses it, and ``max_draws_per_place``
  caps the fresh draws per place (a static device then averages down to ``σ/√cap``).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.special import lambertw

from locpriv.core.geo import LocalProjection, metres_per_degree

_MEAN_M_PER_DEG_LAT = 111_195.0  # for place keys only


@runtime_checkable
class Mechanism(Protocol):
    """A planar noise mechanism: offsets in metres (east, north)."""

    def sample_m(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """``n`` offsets as an ``(n, 2)`` array in metres, or one ``(2,)`` offset for ``None``."""
        ...

    @property
    def scale_m(self) -> float:
        """Per-axis standard deviation in metres (σ for Gaussian, ``√3/ε`` for Laplace)."""
        ...


@dataclass(frozen=True, slots=True)
class GaussianMechanism:
    """Independent Gaussian noise per axis: ``σx``, ``σy`` in metres (``σy`` defaults to ``σx``)."""

    sigma_x_m: float
    sigma_y_m: float | None = None

    def __post_init__(self) -> None:
        sy = self.sigma_x_m if self.sigma_y_m is None else self.sigma_y_m
        if not (math.isfinite(self.sigma_x_m) and self.sigma_x_m >= 0.0):
            raise ValueError(f"sigma_x_m must be finite and >= 0, got {self.sigma_x_m}")
        if not (math.isfinite(sy) and sy >= 0.0):
            raise ValueError(f"sigma_y_m must be finite and >= 0, got {sy}")

    @property
    def sigmas_m(self) -> tuple[float, float]:
        """``(σx, σy)`` in metres."""
        return self.sigma_x_m, self.sigma_x_m if self.sigma_y_m is None else self.sigma_y_m

    @property
    def scale_m(self) -> float:
        """Root mean square of ``σx`` and ``σy``, metres."""
        sx, sy = self.sigmas_m
        return math.sqrt((sx * sx + sy * sy) / 2.0)

    def sample_m(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Offsets in metres: shape ``(2,)`` for ``n=None`` else ``(n, 2)``."""
        sx, sy = self.sigmas_m
        size = (2,) if n is None else (n, 2)
        return np.asarray(rng.standard_normal(size) * np.array([sx, sy]), dtype=np.float64)


def planar_laplace_radius(epsilon_per_m: float, p: np.ndarray | float) -> np.ndarray:
    """Inverse CDF of the planar-Laplace radius: ``C_ε⁻¹(p) = -(W₋₁((p-1)/e) + 1)/ε`` metres.

    ``C_ε(r) = 1 - (1 + ε r) e^{-ε r}``; ``p`` in [0, 1).
    """
    q = np.asarray(p, dtype=np.float64)
    w = lambertw((q - 1.0) / math.e, k=-1).real
    return np.asarray(-(w + 1.0) / epsilon_per_m, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class PlanarLaplace:
    """ε-geo-indistinguishable planar Laplace noise; ``epsilon_per_m`` in 1/metres.

    Expected displacement ``2/ε`` metres; per-axis standard deviation ``√3/ε`` metres
    (``E r² = 6/ε²``).
    """

    epsilon_per_m: float
    method: str = "lambertw"
    """``"lambertw"`` (inverse CDF) or ``"gamma"`` (Gamma(2, 1/ε)); same distribution."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon_per_m) and self.epsilon_per_m > 0.0):
            raise ValueError(f"epsilon_per_m must be finite and > 0, got {self.epsilon_per_m}")
        if self.method not in ("lambertw", "gamma"):
            raise ValueError(f"unknown method {self.method!r}")

    @property
    def mean_displacement_m(self) -> float:
        """``E r = 2/ε`` metres."""
        return 2.0 / self.epsilon_per_m

    @property
    def scale_m(self) -> float:
        """Per-axis standard deviation ``√3/ε`` metres."""
        return math.sqrt(3.0) / self.epsilon_per_m

    def sample_m(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Offsets in metres: shape ``(2,)`` for ``n=None`` else ``(n, 2)``."""
        count = 1 if n is None else n
        theta = rng.uniform(0.0, 2.0 * math.pi, count)
        if self.method == "gamma":
            r = rng.gamma(2.0, 1.0 / self.epsilon_per_m, count)
        else:
            r = planar_laplace_radius(self.epsilon_per_m, rng.random(count))
        out = np.column_stack((r * np.cos(theta), r * np.sin(theta)))
        return out[0] if n is None else out


def offset_lonlat(
    lon_deg: float,
    lat_deg: float,
    dx_m: float,
    dy_m: float,
    projection: LocalProjection | None = None,
) -> tuple[float, float]:
    """Move ``(lon, lat)`` by ``(dx, dy)`` metres east/north; returns ``(lon, lat)`` degrees.

    Latitude is clamped to [-90, 90]; longitude wrapped to [-180, 180).
    """
    if projection is not None:
        x, y = projection.point_to_xy(lon_deg, lat_deg)
        lon, lat = projection.point_to_lonlat(x + dx_m, y + dy_m)
    else:
        m_lon, m_lat = metres_per_degree(lat_deg)
        lat = lat_deg + dy_m / m_lat
        lon = lon_deg + dx_m / max(m_lon, 1e-6)
    lat = min(90.0, max(-90.0, lat))
    lon = ((lon + 180.0) % 360.0) - 180.0
    return lon, lat


def perturb(
    lon_deg: float,
    lat_deg: float,
    mechanism: Mechanism,
    rng: np.random.Generator,
    projection: LocalProjection | None = None,
) -> tuple[float, float]:
    """One perturbed copy ``(lon', lat')`` of a point, noise drawn in metres."""
    d = mechanism.sample_m(rng)
    return offset_lonlat(lon_deg, lat_deg, float(d[0]), float(d[1]), projection)


def _place_key(
    lon_deg: float, lat_deg: float, side_m: float, shift_m: tuple[float, float] = (0.0, 0.0)
) -> tuple[int, int]:
    row = math.floor((lat_deg * _MEAN_M_PER_DEG_LAT + shift_m[1]) / side_m)
    m_lon = max(metres_per_degree(lat_deg)[0], 1.0)
    return row, math.floor((lon_deg * m_lon + shift_m[0]) / side_m)


def _prf(secret: bytes, *parts: object) -> int:
    """A 64-bit pseudo-random value keyed by ``secret`` (HMAC-SHA256 of the parts)."""
    msg = "/".join(str(p) for p in parts).encode()
    return int.from_bytes(hmac.new(secret, msg, hashlib.sha256).digest()[:8], "big")


@dataclass(slots=True)
class _Draw:
    lon: float  # perturbed, degrees
    lat: float
    origin_lon: float  # true location when drawn
    origin_lat: float
    drawn_at: float  # s


@dataclass(slots=True)
class PerturbedPoint:
    """The device's current perturbed location, reused while static (the averaging defence).

    Invariants: :meth:`current` returns the same point until the device moves more than
    ``reuse_radius_m`` metres from the draw's origin or ``reuse_ttl_s`` seconds pass; a place
    (cell of side ``reuse_radius_m``) never sees more than ``max_draws_per_place`` fresh draws
    (``None``: unlimited); with ``enabled=False`` every call draws afresh (for experiments only).
    With a ``secret`` (see the module docstring) a place's point is a function of the secret,
    the place and the key period (``rekey_s``), so the TTL and the cap no longer matter.
    """

    mechanism: Mechanism
    reuse_radius_m: float = 50.0
    reuse_ttl_s: float = 3600.0
    max_draws_per_place: int | None = None
    enabled: bool = True
    max_places: int = 256
    secret: bytes | None = None
    rekey_s: float | None = None
    fresh_draws: int = 0
    _current: _Draw | None = None
    _places: OrderedDict[tuple[int, int], _Draw] = field(default_factory=OrderedDict)
    _draw_counts: dict[tuple[int, int], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.reuse_radius_m > 0.0:
            raise ValueError("reuse_radius_m must be > 0")
        if not self.reuse_ttl_s > 0.0:
            raise ValueError("reuse_ttl_s must be > 0")
        if self.secret is not None and len(self.secret) < 16:
            raise ValueError("a place secret needs at least 16 bytes")
        if self.rekey_s is not None and not self.rekey_s > 0.0:
            raise ValueError("rekey_s must be > 0")

    @property
    def keyed(self) -> bool:
        """True when places have deterministic keyed noise (the static-device defence)."""
        return self.enabled and self.secret is not None

    def _shift(self) -> tuple[float, float]:
        if self.secret is None:
            return (0.0, 0.0)
        side = self.reuse_radius_m
        return (
            _prf(self.secret, "grid-x") / 2**64 * side,
            _prf(self.secret, "grid-y") / 2**64 * side,
        )

    def place_of(self, lon_deg: float, lat_deg: float) -> tuple[int, int]:
        """The place (cell of side ``reuse_radius_m``, shifted by the secret) of a position."""
        return _place_key(lon_deg, lat_deg, self.reuse_radius_m, self._shift())

    def draws_at(self, lon_deg: float, lat_deg: float) -> int:
        """Fresh draws made so far at the place of ``(lon, lat)``."""
        return self._draw_counts.get(self.place_of(lon_deg, lat_deg), 0)

    def _centre(self, key: tuple[int, int]) -> tuple[float, float]:
        """The centre ``(lon, lat)`` of a place: a function of the place alone."""
        side = self.reuse_radius_m
        sx, sy = self._shift()
        lat = ((key[0] + 0.5) * side - sy) / _MEAN_M_PER_DEG_LAT
        m_lon = max(metres_per_degree(lat)[0], 1.0)
        return ((key[1] + 0.5) * side - sx) / m_lon, lat

    def _keyed_draw(
        self, key: tuple[int, int], period: int, projection: LocalProjection | None
    ) -> tuple[float, float]:
        """The place's point: its centre moved by noise seeded from the secret, place, period."""
        assert self.secret is not None
        place_rng = np.random.default_rng(_prf(self.secret, "place", key[0], key[1], period))
        lon, lat = self._centre(key)
        return perturb(lon, lat, self.mechanism, place_rng, projection)

    def _usable(self, d: _Draw, lon: float, lat: float, now: float) -> bool:
        if now - d.drawn_at >= self.reuse_ttl_s:
            return False
        m_lon, m_lat = metres_per_degree(lat)
        dx = (lon - d.origin_lon) * m_lon
        dy = (lat - d.origin_lat) * m_lat
        return math.hypot(dx, dy) <= self.reuse_radius_m

    def current(
        self,
        lon_deg: float,
        lat_deg: float,
        now: float,
        rng: np.random.Generator,
        projection: LocalProjection | None = None,
    ) -> tuple[float, float]:
        """The perturbed ``(lon, lat)`` to publish for a device truly at ``(lon, lat)``."""
        if self.keyed:
            return self._current_keyed(lon_deg, lat_deg, now, projection)
        if self.enabled:
            if self._current is not None and self._usable(self._current, lon_deg, lat_deg, now):
                return self._current.lon, self._current.lat
            key = self.place_of(lon_deg, lat_deg)
            capped = (
                self.max_draws_per_place is not None
                and self._draw_counts.get(key, 0) >= self.max_draws_per_place
            )
            old = self._places.get(key)
            if old is not None and (capped or self._usable(old, lon_deg, lat_deg, now)):
                self._current = old
                self._places.move_to_end(key)
                return old.lon, old.lat
        lon, lat = perturb(lon_deg, lat_deg, self.mechanism, rng, projection)
        draw = _Draw(lon, lat, lon_deg, lat_deg, now)
        self.fresh_draws += 1
        if self.enabled:
            key = self.place_of(lon_deg, lat_deg)
            self._draw_counts[key] = self._draw_counts.get(key, 0) + 1
            self._places[key] = draw
            self._places.move_to_end(key)
            while len(self._places) > self.max_places:
                self._places.popitem(last=False)
            self._current = draw
        return lon, lat

    def _current_keyed(
        self, lon_deg: float, lat_deg: float, now: float, projection: LocalProjection | None
    ) -> tuple[float, float]:
        """Keyed mode: the point of the place the device is at, with hysteresis: it keeps the
        current place while within ``reuse_radius_m`` of where it entered it (GPS jitter at a
        boundary must not alternate between two points), and its key period."""
        period = 0 if self.rekey_s is None else math.floor(now / self.rekey_s)
        cur = self._current
        cur_period = (
            None
            if cur is None
            else (0 if self.rekey_s is None else math.floor(cur.drawn_at / self.rekey_s))
        )
        if cur is not None and cur_period == period:
            m_lon, m_lat = metres_per_degree(lat_deg)
            dx = (lon_deg - cur.origin_lon) * m_lon
            dy = (lat_deg - cur.origin_lat) * m_lat
            if math.hypot(dx, dy) <= self.reuse_radius_m:
                return cur.lon, cur.lat
        key = self.place_of(lon_deg, lat_deg)
        # a function of the place and period only: the same point at every visit, wherever in
        # the place the device stands (its moves inside a place are not revealed either)
        lon, lat = self._keyed_draw(key, period, projection)
        if key not in self._draw_counts:
            self.fresh_draws += 1
            self._draw_counts[key] = 1
        self._current = _Draw(lon, lat, lon_deg, lat_deg, now)
        return lon, lat


__all__ = [
    "GaussianMechanism",
    "Mechanism",
    "PerturbedPoint",
    "PlanarLaplace",
    "offset_lonlat",
    "perturb",
    "planar_laplace_radius",
]
