"""Value types and operator configuration of the cloaking core (re-exported by
locpriv.core.cloak.cloaker).

Units: coordinates and lengths in local metres, areas in m², times in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import shapely
from numpy.typing import NDArray

from locpriv.errors import ConfigError, LocprivError

__all__ = [
    "Box",
    "CloakConfig",
    "CloakOutcome",
    "CloakParams",
    "CloakRegion",
    "ParamError",
    "check_params",
    "round_a_min",
]


@dataclass(frozen=True, slots=True)
class CloakParams:
    """A privacy profile: ``k`` users, area window ``(a_min_m2, a_max_m2)`` in m², delay in s.

    ``session_s`` > 0 asks for historical k-anonymity: the user's successive regions keep at
    least ``k`` of the same users while her requests come less than ``session_s`` apart.
    """

    k: int
    a_min_m2: float
    a_max_m2: float
    max_delay_s: float
    session_s: float = 0.0


Box = tuple[float, float, float, float]
"""An axis-aligned box ``(x0, y0, x1, y1)`` in local metres."""


@dataclass(frozen=True, slots=True)
class CloakRegion:
    """A cloaking region in local metres and the time interval ``[t1, t2]`` (s) it covers.

    Invariants: the requester's snapshot position is covered by ``polygon``; ``users >= k``
    current users lie in it; ``a_min_m2 < area_m2 < a_max_m2``; ``t1 <= t2``. A session's
    region of tiles (``CloakConfig.session_tile_factor``) lists them in ``tiles`` (boxes that
    do not overlap, each of more than ``a_min_m2``); ``polygon`` is then their union.
    """

    polygon: shapely.Polygon | shapely.MultiPolygon
    area_m2: float
    users: int
    t1: float
    t2: float
    tiles: tuple[Box, ...] = ()

    @property
    def wire_shape(self) -> shapely.Polygon | shapely.MultiPolygon:
        """What goes on the wire: ``polygon``, or for tiles a MultiPolygon of one square per
        tile (their union may have holes, which a wire region cannot carry)."""
        if not self.tiles:
            return self.polygon
        return shapely.MultiPolygon([shapely.box(*b) for b in self.tiles])

    def covers_xy(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Which of the points ``(x, y)`` (metres) the region covers, edges included."""
        out: NDArray[np.bool_] = shapely.intersects_xy(self.polygon, x, y)
        return out


@dataclass(frozen=True, slots=True)
class CloakOutcome:
    """Result of one request: exactly one of ``region`` and ``error`` is set."""

    request_id: Hashable
    region: CloakRegion | None
    error: LocprivError | None


def _default_params() -> CloakParams:
    return CloakParams(k=10, a_min_m2=1.0e4, a_max_m2=4.0e6, max_delay_s=5.0)


@dataclass(frozen=True, slots=True)
class CloakConfig:
    """Operator configuration; lengths in metres, areas in m², times in seconds.

    ``world = (xmin, ymin, xmax, ymax)`` is the extent partitioned (users outside it widen the
    root rectangle of that snapshot). Requests must satisfy ``k_min <= k <= k_max``,
    ``a_min_floor_m2 <= a_min_m2 < a_max_m2 <= a_max_ceiling_m2`` and
    ``0 <= max_delay_s <= max_delay_s_bound`` and ``0 <= session_s <= session_s_bound``.
    """

    k_min: int = 2
    k_max: int = 100
    a_min_floor_m2: float = 0.0
    a_max_ceiling_m2: float = 1.0e9
    max_delay_s_bound: float = 60.0
    session_s_bound: float = 4 * 3600.0
    session_margin_m: float = 100.0
    """The widest worst-case margin, metres, a session vouches for at :attr:`session_speed_m_s`
    (scaled, like the margin, for a member seen moving faster): a member whose last update is
    older than ``session_margin_m / session_speed_m_s - epoch_s`` seconds (32 s at the
    defaults; a lost fix) is *stale*: chosen last, and kept in the set only where a region
    covers her whole worst-case margin. (Capping her margin instead would count her inside a
    region she may have left: with 30 % of fixes lost, that narrowed 19 % of the sessions of
    random walkers with fixes every 30 s.) A member whose report says her fix may lie farther
    than this (``session_accuracy_factor * accuracy_m``) is not vouched for either, and is
    never made to fit a region: one who said 1 km, beside a requester, made the regions of
    about half her requests overflow ``a_max_m2``. ``session_fix_error_m`` must not exceed it."""
    session_pool_factor: int = 2
    """A session's anonymity set starts as a group of ``session_pool_factor * k`` to twice that
    many users that move alike, of the requester's leaf for ``session_candidate_factor * k``
    (neither depends on who asks, so the first region is not centred on her; with
    ``session_horizon_s == 0``, the leaf for ``session_pool_factor * k``) ..."""
    session_shrink_requests: int = 10
    """... and its regions cover fewer of them request after request, reaching ``k`` at this
    request: those nearest the requester *then* stay (users who walked away leave the set)."""
    session_speed_m_s: float = 3.0
    """Least speed assumed for session members between their last update and the request: a
    member whose update is ``age`` seconds old is kept ``speed * (age + epoch_s)`` metres from
    the edges (a member who just reported needs little margin), ``speed`` the larger of this
    and :attr:`session_speed_factor` times the fastest she has been seen to move."""
    session_speed_factor: float = 1.25
    """A member seen moving at ``v`` m/s (:attr:`UserTable.vmax
    <locpriv.core.cloak.users.UserTable.vmax>`: chords of her reports) is taken to move at up
    to this many times ``v``, when that exceeds :attr:`session_speed_m_s`: every margin of hers
    (worst-case, thin, of a stay, and the box the members are ranked by) widens by that ratio.
    Without it a cyclist at 6 m/s outruns the 3 m/s margins (98 % of the sessions of random
    walkers at 5 m/s with fixes every 30 s were narrowed). 0: every member at
    :attr:`session_speed_m_s`."""
    session_spare: int = 1
    """Worst-case regions cover at least ``k`` plus this many members (when the set has them),
    so that one member who outruns her margin (a stay that ends in a car, a bus, a bicycle:
    faster than she was ever seen to move) does not narrow the session below ``k`` on her
    own; while :attr:`session_spare_fast_users` says nobody around moves that fast, none."""
    session_spare_fast_users: int = 1
    """:attr:`session_spare` applies while at least this many of the cloaker's current users
    have been seen moving faster than :attr:`session_speed_m_s` (vehicles about); 0: always.
    A count, not a share of the users: logins an adversary adds that stand still cannot
    switch the spare off (those that report fast motion can only switch it on: a cost)."""
    session_candidate_factor: int = 32
    """A session's first members are a group of the requester's leaf of the partition for
    ``session_candidate_factor * k`` (reciprocal): the leaf split into groups that move alike
    (:func:`locpriv.core.cloak.history.motion_groups`)."""
    session_horizon_s: float = 1800.0
    """How far ahead, seconds, session members are chosen to stay near the requester (about
    a session's length): groups are split on where users are, where their straight-line
    forecasts put them :attr:`session_forecast_s` ahead and how far they are expected to
    wander over this horizon (which sets walkers apart from those who have stayed put for
    long), and later regions keep the members expected to stay nearest her over this horizon
    (:func:`locpriv.core.cloak.history.motion_scores`: forecasts, and how long each member has
    stayed put, since stays tend to last), so a walker keeps those walking her way and
    everyone prefers members who have stayed put for long; 0 ranks by distance now."""
    session_forecast_s: float = 300.0
    """How long, seconds, a member's straight-line forecast (from her last two reports) is
    trusted when grouping and ranking session members: trips end and turn; beyond it she is
    taken to stay where the forecast got her, wandering as :attr:`session_horizon_s`
    describes."""
    session_joint_box: bool = True
    """With :attr:`session_horizon_s` > 0: keep, as a session's set shrinks, the members whose
    *joint* box is expected to stay smallest (:func:`locpriv.core.cloak.history.joint_box_ranks`:
    futures sampled around each member's forecast, chosen greedily), not the members each
    expected nearest the requester on her own (``False``: :func:`motion_scores` alone)."""
    session_keep_bystanders: bool = True
    """Keep in a session's set every member that its last region covered with her margin, not
    only the ``k`` it was built around: each still lies in all the session's regions, so the
    set keeps more than ``k`` to choose from when some walk away."""
    session_adopt: bool = True
    """With ``session_keep_bystanders``: the set starts as every user the first region covers
    with her margin, not only the group it was built around (each is in the intersection so
    far; later regions choose among more)."""
    session_rekey_factor: float = 0.0
    """0 (default): a session keeps its set to the end. Above 0, a session whose region would
    exceed this many times the requester's shared region (or none is possible) starts afresh
    from her current leaf: smaller regions, but an adversary who links her requests across the
    restart intersects two unrelated sets (docs/algorithms.md measures how often that narrows
    her below k); for experiments and operators who accept that risk."""
    session_slack: int = 2
    """0: every member is kept off the edges by the worst-case margin above, so the
    ``k`` of a session are inside every region for sure. Above 0, a region may instead cover
    ``k + session_slack`` members placed where their velocity carries them since their last
    update (dead reckoning), each kept off the edges by a thin margin sized by her observed
    motion (:attr:`session_drift_m_s`); whichever region is smaller is answered. A member
    whose next update shows she may have been outside a region when it was answered leaves the
    set (the cloaker audits itself as the adversary would), so only more than
    ``session_slack`` members walking out unseen within one request narrows the set below
    ``k``: a statistical guarantee (docs/algorithms.md measures it). The slack is counted in
    parties: members who are together (within 25 m, moving alike or both staying put:
    :func:`~locpriv.core.cloak.history.companion_labels`) may leave at once, so a thin region
    whose ``session_slack`` largest parties other than the requester's would leave fewer than
    ``k`` members is not built (the worst-case region answers)."""
    session_drift_m_s: float = 1.0
    """With ``session_slack`` > 0: how fast, m/s, a member may stray from her dead-reckoned
    position (turns, stops, starts); her thin margin is ``session_floor_m + drift * (age +
    epoch_s)``, never more than the worst-case margin."""
    session_floor_m: float = 5.0
    """With ``session_slack`` > 0: the least thin margin, metres (fix scatter)."""
    session_risk: float = 1e-4
    """With ``session_slack`` > 0: the per-request probability budget that more than
    ``session_slack`` of a thin region's members who had stayed put have left their place
    unseen; it sizes their thin margins (:func:`locpriv.core.cloak.history.still_margins`):
    a member who had stayed put for an hour keeps about ``session_floor_m``, one who just
    stopped the ordinary thin margin. In (0, 1)."""
    session_requester_quantile: float | Literal["draw"] = "draw"
    """A session region keeps its requester at least the margin of another member drawn at
    random for each region (``"draw"``), or this quantile of the other members' margins, off
    its edges (a worst-case region of their worst-case margins, a thin region of their thin
    ones; never less than her own worst-case margin, which a fresh fix makes ~3 m): with only
    that she would be the member nearest the edges, and the user nearest an edge would be
    the requester far more often than chance; with a fixed quantile she sits at a typical
    depth, which a guess by depth rank finds (docs/algorithms.md measures the guesses and the
    area). ``"draw"`` or in [0, 1]."""
    session_fix_error_m: float = 20.0
    """How far, metres, a member's fix may lie from where her device is when her report does
    not say (GPS, Wi-Fi and cell fixes scatter by metres to tens of metres): every session
    margin, worst-case and thin, the requester's too, includes it on top of what she may have
    moved since. 20 m holds for fixes scattered by up to about 6 m per axis (three times the
    scatter: docs/algorithms.md measures the attack)."""
    session_accuracy_factor: float = 2.0
    """A report that gives its ``accuracy_m`` (the radius a phone reports, about 1.5 times a
    fix's scatter per axis) is taken to lie at most this many times that from the device."""
    session_fresh_s: float = 2.0
    """Above 0 (default 2 s), a request of a session that goes on first asks every member
    whose last report is older than this (seconds) for a fresh one
    (:meth:`Cloaker.take_fix_requests`; the anonymizer publishes them on
    :meth:`locpriv.wire.topics.Topics.fix_wanted`) and waits for their reports, at most
    :attr:`session_fix_wait_s` and never past half the request's ``max_delay_s`` (a request
    with ``max_delay_s`` 0 asks nobody); a member who does not answer keeps her old report and
    its margin (every second of age widens it by ``session_speed_m_s``). 0: nobody is asked.
    2 s rather than 10 s (before 2026-12-05): a report 2-10 s old keeps its member 6-30 m
    off the edges, which a fresh one does not: the city pays 3.65x the undefended median
    against 3.76x, walkers with 30 s fixes 3-18 % less, for 38 % (city) and 61 % (walkers)
    more fix requests (``benchmarks/bench_session_knobs.py --knob '{}' --knob
    '{"session_fresh_s": 10.0}' --tag fresh_s``; docs/algorithms.md, "Fresh reports on
    request")."""
    session_tile_factor: float = 1.01
    """0: a session's regions are boxes (above). > 1: they are unions of tiles, squares of side
    ``session_tile_factor * sqrt(a_min_m2)`` on a grid offset at random once per session: each
    region is every tile within her worst-case margin of a member of a set fixed when the
    session starts (the requester and ``k - 1 +`` :attr:`session_tile_spare` others drawn at
    random from her group), so its area does not grow with the session's age. Each member
    is hidden only within her own tiles (each of more than ``a_min_m2``), not within the
    whole region: docs/algorithms.md, "Regions made of tiles"."""
    session_tile_min_m: float = 100.0
    """With :attr:`session_tile_factor` > 1: the least side of a tile, metres, whatever
    ``a_min_m2`` the requester asks. A tile holds the other members, not only her, so their
    floor is the operator's, not hers: asked for a tiny ``a_min_m2``, a session would
    otherwise place each of its members to within a few metres."""
    session_tile_spare: int = 2
    """With :attr:`session_tile_factor` > 1: members a set of tiles draws beyond ``k``, so that
    as many can leave (go silent, or be devices an adversary parked beside the requester)
    and ``k`` remain."""
    session_fix_wait_s: float = 2.0
    """With ``session_fresh_s`` > 0: the longest a session request waits for its members'
    fresh reports, seconds."""
    session_fix_every_s: float = 10.0
    """With ``session_fresh_s`` > 0: a member is asked for a fresh report at most once in
    this many seconds, however many sessions hold her or how often they ask (what a flood of
    session requests can make the anonymizer send to any one device)."""
    default: CloakParams = field(default_factory=_default_params)
    user_ttl_s: float = 300.0
    world: tuple[float, float, float, float] = (0.0, 0.0, 20_000.0, 20_000.0)
    epoch_s: float = 1.0
    max_pending: int = 10_000
    a_min_step: float = 2.0**0.125
    max_partitions: int = 64

    def __post_init__(self) -> None:
        x0, y0, x1, y1 = self.world
        if not (x1 > x0 and y1 > y0):
            raise ConfigError("world extent must have positive width and height")
        if not 1 <= self.k_min <= self.k_max:
            raise ConfigError("need 1 <= k_min <= k_max")
        if not 0 <= self.a_min_floor_m2 < self.a_max_ceiling_m2:
            raise ConfigError("need 0 <= a_min_floor_m2 < a_max_ceiling_m2")
        if self.epoch_s <= 0 or self.user_ttl_s <= 0 or self.max_delay_s_bound < 0:
            raise ConfigError("epoch_s and user_ttl_s must be > 0, max_delay_s_bound >= 0")
        if self.max_pending < 0 or self.max_partitions < 1 or self.a_min_step < 1:
            raise ConfigError("max_pending >= 0, max_partitions >= 1, a_min_step >= 1 required")
        knobs = (
            self.session_margin_m,
            self.session_speed_m_s,
            self.session_horizon_s,
            self.session_rekey_factor,
            self.session_slack,
            self.session_drift_m_s,
            self.session_floor_m,
            self.session_forecast_s,
            self.session_speed_factor,
            self.session_spare,
            self.session_spare_fast_users,
            self.session_fix_error_m,
            self.session_accuracy_factor,
            self.session_fresh_s,
            self.session_fix_wait_s,
            self.session_fix_every_s,
            self.session_tile_spare,
            self.session_tile_min_m,
        )
        if not all(v >= 0 for v in knobs):  # nan fails too
            raise ConfigError(
                "session_margin_m, session_speed_m_s, session_horizon_s,"
                " session_rekey_factor, session_slack, session_drift_m_s, session_floor_m,"
                " session_forecast_s, session_speed_factor, session_spare,"
                " session_spare_fast_users, session_fix_error_m, session_accuracy_factor,"
                " session_fresh_s, session_fix_wait_s, session_fix_every_s,"
                " session_tile_spare and session_tile_min_m must be >= 0"
            )
        if self.session_fix_error_m > self.session_margin_m:
            raise ConfigError(
                "session_fix_error_m must be <= session_margin_m (a fix that may lie farther"
                " is not vouched for: no session could count a member who gives no accuracy)"
            )
        if not 0 < self.session_risk < 1:  # nan fails too
            raise ConfigError("session_risk must be in (0, 1)")
        q = self.session_requester_quantile
        number = isinstance(q, int | float) and not isinstance(q, bool)
        if q != "draw" and not (number and 0 <= q <= 1):  # nan fails too
            raise ConfigError('session_requester_quantile must be "draw" or in [0, 1]')
        if self.session_pool_factor < 1 or self.session_candidate_factor < 1:
            raise ConfigError("session_pool_factor and session_candidate_factor must be >= 1")
        if not (self.session_tile_factor == 0 or 1 < self.session_tile_factor <= 100):
            raise ConfigError("session_tile_factor must be 0 (boxes) or in (1, 100]")
        if self.session_shrink_requests < 1:
            raise ConfigError("session_shrink_requests must be >= 1")
        check_params(self, self.default)

    @property
    def world_area_m2(self) -> float:
        """Area of the world extent in m²."""
        x0, y0, x1, y1 = self.world
        return (x1 - x0) * (y1 - y0)


class ParamError(ConfigError):
    """A privacy parameter outside the operator's bounds; ``param`` names it (``k``,
    ``a_min_m2``, ``a_max_m2``, ``max_delay_s`` or ``session_s``)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


def check_params(cfg: CloakConfig, p: CloakParams) -> None:
    """Raise :class:`ParamError` naming the first parameter of ``p`` outside ``cfg``'s bounds."""
    if not isinstance(p.k, int) or isinstance(p.k, bool) or not cfg.k_min <= p.k <= cfg.k_max:
        raise ParamError("k", f"k must be an integer in [{cfg.k_min}, {cfg.k_max}]")
    for name in ("a_min_m2", "a_max_m2", "max_delay_s", "session_s"):
        if not math.isfinite(getattr(p, name)):
            raise ParamError(name, f"{name} must be finite")
    if p.a_min_m2 < cfg.a_min_floor_m2:
        raise ParamError("a_min_m2", f"a_min_m2 must be >= {cfg.a_min_floor_m2:g}")
    if p.a_max_m2 > cfg.a_max_ceiling_m2:
        raise ParamError("a_max_m2", f"a_max_m2 must be <= {cfg.a_max_ceiling_m2:g}")
    if not p.a_min_m2 < p.a_max_m2:
        raise ParamError("a_max_m2", "a_min_m2 must be < a_max_m2")
    if p.a_min_m2 >= cfg.world_area_m2:
        raise ParamError(
            "a_min_m2", f"a_min_m2 must be smaller than the world extent ({cfg.world_area_m2:g})"
        )
    if not 0 <= p.max_delay_s <= cfg.max_delay_s_bound:
        raise ParamError("max_delay_s", f"max_delay_s must be in [0, {cfg.max_delay_s_bound:g}]")
    if not 0 <= p.session_s <= cfg.session_s_bound:
        raise ParamError("session_s", f"session_s must be in [0, {cfg.session_s_bound:g}]")


def round_a_min(a_min: float, step: float) -> float:
    """Round ``a_min`` (m²) up to the next power of ``step`` (identity when ``step == 1``)."""
    if step <= 1.0 or a_min <= 0.0:
        return a_min
    e = math.ceil(math.log(a_min) / math.log(step) - 1e-12)
    q = step**e
    return q if q >= a_min else a_min
