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
  Real fixes wander (5-50 m and more indoors), so the device keeps the place where it *dwells*
  (an anchor: the running mean of its fixes there) while its fixes stay within a hold radius
  that grows with the scatter it observes in its own fixes (``hold_factor`` × σ̂, between
  ``reuse_radius_m`` and ``max_hold_m``), leaves only on a very far fix or two far fixes in a
  row, and takes a remembered anchor back when it returns. ``rekey_s`` optionally changes the
  key every period (one more point per place and period).
* **Unkeyed** (``secret=None``): fresh random draws, reused for at most ``reuse_ttl_s``; the draw
  of each place visited is remembered, so coming back reuses it, and ``max_draws_per_place``
  caps the fresh draws per place (a static device then averages down to ``σ/√cap``).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections import OrderedDict, deque
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
class _Anchor:
    """Where a keyed device dwells: its place key (cell of the first fix) and the running mean
    of the fixes it absorbed (degrees; ``n`` of them, capped so the mean can follow a drift)."""

    key: tuple[int, int]
    lon: float
    lat: float
    n: int = 1
    point: tuple[float, float] | None = None
    period: int | None = None


def _dist_m(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Local flat-earth distance in metres (for neighbourhoods of at most a few km)."""
    m_lon, m_lat = metres_per_degree(lat1)
    return math.hypot((lon2 - lon1) * m_lon, (lat2 - lat1) * m_lat)


_RAYLEIGH_MEDIAN = math.sqrt(2.0 * math.log(2.0))  # median of a Rayleigh(1) distance


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
    places_only: bool = False
    """Keyed mode, for experiments only: the previous defence (one point per place of side
    ``reuse_radius_m``, noise per place, hysteresis of ``reuse_radius_m`` from the fix that
    entered it), which wandering fixes defeat; kept to measure before/after."""
    region_m: float = 2000.0
    """Keyed mode: side (metres) of the regions whose places share one noise draw."""
    hold_factor: float = 3.5
    """Keyed mode: the device keeps its point while within ``hold_factor`` × its observed fix
    scatter (per-axis σ, metres) of where it dwells, at least ``reuse_radius_m``."""
    max_hold_m: float = 250.0
    """Keyed mode: the largest hold radius, metres (a fix farther than twice this leaves at
    once; between the hold radius and that, a second far fix in a row confirms the move)."""
    fresh_draws: int = 0
    _current: _Draw | None = None
    _anchor: _Anchor | None = None
    _anchors: OrderedDict[tuple[int, int], _Anchor] = field(default_factory=OrderedDict)
    _steps: deque[float] = field(default_factory=lambda: deque(maxlen=64))
    _fixes: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=3))
    _far: int = 0
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
        if not self.region_m >= self.reuse_radius_m:
            raise ValueError("region_m must be >= reuse_radius_m")
        if not (self.hold_factor > 0.0 and self.max_hold_m >= self.reuse_radius_m):
            raise ValueError("hold_factor must be > 0 and max_hold_m >= reuse_radius_m")

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
        """The place's point: its centre moved by the noise of its *region* (a cell of side
        ``region_m`` of a second grid shifted by the secret), seeded from the secret, region
        and period. Every place of a region shares the region's noise, so the points of the
        places a device visits around home (walks, scatter across place boundaries) average to
        their centres plus that one noise, not towards home; the noise of each point is still
        one draw of the mechanism (the accuracy of queries is unchanged)."""
        assert self.secret is not None
        lon, lat = self._centre(key)
        side = self.region_m
        shift = (
            _prf(self.secret, "region-x") / 2**64 * side,
            _prf(self.secret, "region-y") / 2**64 * side,
        )
        region = _place_key(lon, lat, side, shift)
        place_rng = np.random.default_rng(_prf(self.secret, "region", region[0], region[1], period))
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
        if self.keyed and self.places_only:
            return self._current_place(lon_deg, lat_deg, now, projection)
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

    def _current_place(
        self, lon_deg: float, lat_deg: float, now: float, projection: LocalProjection | None
    ) -> tuple[float, float]:
        """``places_only``: the point of the place the device is at, kept while within
        ``reuse_radius_m`` of the fix that entered it, noise seeded per place."""
        assert self.secret is not None
        period = 0 if self.rekey_s is None else math.floor(now / self.rekey_s)
        cur = self._current
        same_period = cur is not None and period == (
            0 if self.rekey_s is None else math.floor(cur.drawn_at / self.rekey_s)
        )
        if (
            cur is not None
            and same_period
            and _dist_m(cur.origin_lon, cur.origin_lat, lon_deg, lat_deg) <= self.reuse_radius_m
        ):
            return cur.lon, cur.lat
        key = self.place_of(lon_deg, lat_deg)
        place_rng = np.random.default_rng(_prf(self.secret, "place", key[0], key[1], period))
        lon, lat = perturb(*self._centre(key), self.mechanism, place_rng, projection)
        if key not in self._draw_counts:
            self.fresh_draws += 1
            self._draw_counts[key] = 1
        self._current = _Draw(lon, lat, lon_deg, lat_deg, now)
        return lon, lat

    def scatter_m(self) -> float:
        """The device's observed fix scatter (per-axis σ, metres), 0 before 4 samples.

        Each distinct fix after the first two gives the distance of the middle one of the last
        three from the midpoint of its neighbours: fixes scattered by σ around a point make it
        ``√1.5 σ`` Rayleigh (median ``1.177 √1.5 σ``), while steady motion makes it small (a
        device that moves is not mistaken for one that wanders). The median over the last 64
        is robust to a minority of turns and walks."""
        if len(self._steps) < 4:
            return 0.0
        return float(np.median(np.fromiter(self._steps, float))) / (
            math.sqrt(1.5) * _RAYLEIGH_MEDIAN
        )

    def hold_radius_m(self) -> float:
        """How far (metres) the device may wander from where it dwells and keep its point:
        ``hold_factor`` × :meth:`scatter_m`, clamped to ``[reuse_radius_m, max_hold_m]``;
        ``max_hold_m`` until the scatter is known (4 steps)."""
        if len(self._steps) < 4:
            return self.max_hold_m
        return min(self.max_hold_m, max(self.reuse_radius_m, self.hold_factor * self.scatter_m()))

    def _anchor_point(
        self, a: _Anchor, period: int, projection: LocalProjection | None
    ) -> tuple[float, float]:
        if a.point is None or a.period != period:
            a.point = self._keyed_draw(a.key, period, projection)
            a.period = period
        return a.point

    @staticmethod
    def _absorb(a: _Anchor, lon: float, lat: float) -> None:
        a.n = min(a.n + 1, 100)
        a.lon += (lon - a.lon) / a.n
        a.lat += (lat - a.lat) / a.n

    def _current_keyed(
        self, lon_deg: float, lat_deg: float, now: float, projection: LocalProjection | None
    ) -> tuple[float, float]:
        """Keyed mode: the point of the place where the device *dwells*, with hysteresis sized
        by its own fix scatter. The device keeps its anchor (the running mean of its fixes
        there) while a fix lies within :meth:`hold_radius_m` of it; a fix beyond leaves only if
        it is very far (``2 * max_hold_m``) or the next fix is beyond too (a real move goes on,
        scatter does not). On leaving, a remembered anchor within reach is taken back (the same
        point at every return home), else a new one keyed by the place of the fix. Every
        anchor's point is a function of the secret, its place and the key period, so a device
        whose fixes wander by tens of metres presents one point where it dwells, not one per
        cell its fixes fall in; a device that moves gets the point of each new place."""
        period = 0 if self.rekey_s is None else math.floor(now / self.rekey_s)
        fix = (lon_deg, lat_deg)
        new_fix = not self._fixes or fix != self._fixes[-1]
        if new_fix:
            self._fixes.append(fix)
            if len(self._fixes) == 3:
                (a0, b0), (a1, b1), (a2, b2) = self._fixes
                self._steps.append(_dist_m(a1, b1, (a0 + a2) / 2.0, (b0 + b2) / 2.0))
        radius = self.hold_radius_m()
        cur = self._anchor
        if cur is not None:
            d = _dist_m(cur.lon, cur.lat, lon_deg, lat_deg)
            if d <= radius:
                if new_fix:
                    self._absorb(cur, lon_deg, lat_deg)
                self._far = 0
                return self._anchor_point(cur, period, projection)
            if d <= 2.0 * self.max_hold_m and (self._far == 0 or not new_fix):
                self._far = 1
                return self._anchor_point(cur, period, projection)
        self._far = 0
        best: _Anchor | None = None
        best_d = math.inf
        for a in self._anchors.values():
            d = _dist_m(a.lon, a.lat, lon_deg, lat_deg)
            if d <= radius and d < best_d:
                best, best_d = a, d
        if best is None:
            key = self.place_of(lon_deg, lat_deg)
            best = self._anchors.get(key) or _Anchor(key, lon_deg, lat_deg)
            if key not in self._draw_counts:
                self.fresh_draws += 1
                self._draw_counts[key] = 1
        self._anchors[best.key] = best
        self._anchors.move_to_end(best.key)
        while len(self._anchors) > self.max_places:
            self._anchors.popitem(last=False)
        self._anchor = best
        return self._anchor_point(best, period, projection)


__all__ = [
    "GaussianMechanism",
    "Mechanism",
    "PerturbedPoint",
    "PlanarLaplace",
    "offset_lonlat",
    "perturb",
    "planar_laplace_radius",
]
