"""Historical k-anonymity for a user's repeated cloaks (Bettini et al.'s "memorising" cloaks).

A user who asks every minute can be singled out by intersecting the sets of users inside her
successive regions: each region is k-anonymous, their intersection need not be. A *session*
therefore keeps an anonymity set: its first region is the ordinary shared-partition region and
its members (at least k) become the set; every later region is built around the current
positions of the ``k`` members of the set nearest to the requester, and the set shrinks to
those ``k``. The set only ever shrinks and always holds the requester and at least ``k``
users, so every region of the session contains the same ``k`` users and the intersection of
all of them holds at least ``k``.

The region (:func:`session_region`) is the smallest box of a grid (cells of
``max(sqrt(A_min) / 4, 10 m)``, offset at random once per session by a generator the
anonymizer seeds per session) that holds the members' box grown by the margin, grown cell by
cell until its area exceeds ``A_min``: its edges are grid lines, so they tell an observer which
cells hold members and nothing about where in a cell; the requester is not at its centre, and
while the members stay put the region does not change (nothing to average). When the members
have spread so that their box reaches ``A_max``, no region exists: the request waits (temporal
cloaking) or fails. The session goes on while requests keep coming (answered or not) and ends
only after ``session_s`` without one: restarting it at once would hand the attacker a second,
unrelated set to intersect with. With ``session_slack`` > 0 the cloaker also builds the region
of ``k + slack`` members at their dead-reckoned positions with thin margins, answers the
smaller of the two, and audits each member against her next fix (``Cloaker._audit``): a
statistical guarantee, measured in docs/algorithms.md. Members who are together
(:func:`companion_labels`) leave together, so the slack is counted in parties
(:func:`slack_shortfall`) and a thin region they could take more than the slack out of is not
built. Members are ranked by :func:`motion_scores` (where their
straight-line forecasts put them for the next minutes, and how long each has stayed put: stays
tend to last), and a member who had stayed put for long gets a thinner margin
(:func:`still_margins`, under a per-request risk budget). Every margin of a member seen moving
faster than the cloaker's pedestrian bound widens in proportion (``CloakConfig.
session_speed_factor``), a member whose fix is too old is not vouched for, and worst-case
regions keep a spare member while vehicles are about (``session_spare``). Coordinates are local
metres; areas m².
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import shapely
from numpy.typing import NDArray
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

__all__ = [
    "BOX_MARGIN_M",
    "BOX_SAMPLES",
    "BOX_WANDER_M_S",
    "COMPANION_RADIUS_M",
    "COMPANION_SPEED_M_S",
    "GRID_MIN_M",
    "WANDER_SPEED_M_S",
    "companion_labels",
    "grid_areas",
    "grid_cells",
    "grow_box",
    "joint_box_ranks",
    "motion_groups",
    "motion_scores",
    "moving_time",
    "prefix_boxes",
    "session_grid",
    "session_region",
    "slack_shortfall",
    "still_margins",
]

GRID_MIN_M = 10.0
"""Least cell side of a session's grid, metres (cells are ``max(sqrt(A_min) / 4, this)``)."""

WANDER_SPEED_M_S = 1.2
"""How fast, m/s, a user is assumed to stray from her straight-line forecast while she moves
(turns, a new trip: about a walking pace); how long she moves comes from :func:`moving_time`."""

BOX_WANDER_M_S = 0.9
"""How fast, m/s, a member's future position is taken to scatter around her forecast (per
expected second moving) when :func:`joint_box_ranks` samples futures: less than
:data:`WANDER_SPEED_M_S`, which bounds a distance, since this is the spread of a cloud."""

BOX_MARGIN_M = 20.0
"""The margin, metres, :func:`joint_box_ranks` grows every sampled box by (about a thin
margin): it keeps members on one street from costing nothing."""

BOX_SAMPLES = 16
"""Futures :func:`joint_box_ranks` samples per horizon."""

COMPANION_RADIUS_M = 25.0
"""Members whose dead-reckoned positions lie within this many metres of each other, and who
move alike (:data:`COMPANION_SPEED_M_S`) or have both stayed put, are taken to be together
(a party, friends, a meeting) by :func:`companion_labels`: they may leave a region at once."""

COMPANION_SPEED_M_S = 1.0
"""Members moving within this many m/s of each other's velocity (and within
:data:`COMPANION_RADIUS_M`) are taken to move together."""

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def moving_time(still_s: F64, h: float) -> F64:
    """Expected seconds, of the next ``h``, that each user spends moving, for users who have
    stayed put for ``still_s`` seconds (0: moving now).

    Stays are taken to end with hazard ``1 / (tau + t)`` after lasting ``tau + t`` seconds (the
    longer someone has stayed, the longer she tends to stay: she is still put ``h`` seconds on
    with probability ``tau / (tau + h)``), and a user who leaves keeps moving: the expectation
    is ``h - tau * ln(1 + h / tau)``, ``h`` for a user moving now, about ``h² / (2 tau)`` for one
    who has stayed far longer than ``h``.
    """
    tau = np.maximum(np.asarray(still_s, dtype=np.float64), 0.0)
    if h <= 0:
        return np.zeros_like(tau)
    safe = np.maximum(tau, 1e-9)
    return np.where(tau > 0, h - safe * np.log1p(h / safe), h)


def _horizons(horizon_s: float) -> tuple[float, ...]:
    """The horizons, seconds, a session's forecasts are weighed at: 0, h/4, h/2 and h
    (``horizon_s``), or now only when it is 0."""
    return (0.0, horizon_s / 4, horizon_s / 2, horizon_s) if horizon_s > 0 else (0.0,)


def _ahead(xy: F64, v: F64, h: float, forecast_s: float) -> F64:
    """Where straight-line forecasts from ``xy`` (metres) at ``v`` (m/s, no nan) put rows
    ``h`` seconds ahead, trusted for ``forecast_s`` seconds: beyond it each stays where her
    forecast got her (trips end and turn)."""
    out: F64 = xy + v * min(h, max(forecast_s, 0.0))
    return out


def _wander_m(still_s: F64, h: float) -> F64:
    """How far, metres, each row strays from her forecast over the next ``h`` seconds:
    :data:`WANDER_SPEED_M_S` times her expected time moving (:func:`moving_time`)."""
    out: F64 = WANDER_SPEED_M_S * moving_time(still_s, h)
    return out


def motion_scores(
    xy: F64,
    v: F64,
    still_s: F64,
    requester: int,
    *,
    horizon_s: float,
    forecast_s: float,
) -> F64:
    """How far, metres, each row is expected to stray from the requester over the next
    ``horizon_s`` seconds (lower is a better session member); the requester scores -1.

    ``xy`` (m, 2) positions, ``v`` (m, 2) velocities in m/s (nan: unknown, taken as 0),
    ``still_s`` (m,) how long each row has stayed put. The score is the mean, over the
    horizons 0, h/4, h/2 and h, of the L-infinity distance between the row and the requester
    as their straight-line forecasts place them (trusted for ``forecast_s`` seconds: trips
    end and turn; beyond it the forecast stays where it got) plus how far the row wanders
    meanwhile, :data:`WANDER_SPEED_M_S` times her expected time moving (:func:`moving_time`):
    users who walk the same way as the requester for the next minutes, and users who have
    stayed put for long (likely to stay for the rest of a session), score lowest.
    ``horizon_s == 0`` gives the distance now.
    """
    vv = np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0)
    rel = xy - xy[requester]
    dv = vv - vv[requester]
    hs = _horizons(horizon_s)
    score = np.zeros(len(xy))
    for h in hs:
        p = _ahead(rel, dv, h, forecast_s)
        score += np.maximum(np.abs(p[:, 0]), np.abs(p[:, 1])) + _wander_m(still_s, h)
    score /= len(hs)
    score[requester] = -1.0
    return score


def grow_box(
    fx: F64,
    fy: F64,
    first: int,
    candidates: I64,
    *,
    count: int,
    cost: Callable[[F64], F64],
    margin_m: float | F64,
) -> list[int]:
    """Greedy growth of a fixed set's box over frames: from row ``first``, ``count`` rows of
    ``candidates`` (columns of ``fx``, ``fy``: (frames, rows) x and y, metres), each the one
    whose joining gives the least ``cost`` (frames, candidates) areas (m², the box grown by
    ``margin_m``: one value, or one per row, each row's box grown by her own) ->
    (candidates,) cost; ties go to the earlier candidate. Returns the rows chosen, in order
    (``first`` not included)."""
    rows = fx.shape[1]
    mg = np.broadcast_to(np.asarray(margin_m, dtype=np.float64), (rows,))
    one = np.ndim(margin_m) == 0
    pad = float(margin_m) if one else 0.0  # one margin: grown once, as the box's own
    ex = np.zeros(rows) if one else mg  # per row: each point grown by hers
    lox, hix = fx[:, first] - ex[first], fx[:, first] + ex[first]
    loy, hiy = fy[:, first] - ex[first], fy[:, first] + ex[first]
    cand = np.asarray(candidates, dtype=np.int64)
    chosen: list[int] = []
    while len(chosen) < count and len(cand):
        e = ex[cand]
        nlox = np.minimum(lox[:, None], fx[:, cand] - e)
        nhix = np.maximum(hix[:, None], fx[:, cand] + e)
        nloy = np.minimum(loy[:, None], fy[:, cand] - e)
        nhiy = np.maximum(hiy[:, None], fy[:, cand] + e)
        area = (nhix - nlox + 2 * pad) * (nhiy - nloy + 2 * pad)
        j = int(np.argmin(cost(area)))
        chosen.append(int(cand[j]))
        lox, hix, loy, hiy = nlox[:, j], nhix[:, j], nloy[:, j], nhiy[:, j]
        cand = np.delete(cand, j)
    return chosen


def joint_box_ranks(
    xy: F64,
    v: F64,
    still_s: F64,
    requester: int,
    score: F64,
    *,
    rng: np.random.Generator,
    horizon_s: float,
    forecast_s: float,
    limit: int,
    scale: F64 | None = None,
) -> F64:
    """Session members in the order that keeps their joint box smallest: the requester first
    (-1), then, greedily, the row whose joining grows the expected log-area of the box of the
    rows chosen so far least, ``limit`` rows in all; the rest follow in ``score`` order (ties
    too). Lower is a better member, as with :func:`motion_scores`.

    A region covers all its members at once, so what a set costs is the box that holds them
    all, not each member's distance from the requester: members on one street, or all on one
    side of her, cost less than as many at the same distance all round. The futures are
    sampled: at the horizons 0, h/4, h/2 and h (``horizon_s``) each row sits where her
    straight-line forecast puts her (trusted ``forecast_s`` seconds), scattered by a normal
    cloud of :data:`BOX_WANDER_M_S` times her expected time moving (:func:`moving_time`; the
    requester's too); :data:`BOX_SAMPLES` futures per horizon drawn from ``rng``; each box is
    grown by :data:`BOX_MARGIN_M` (times each row's ``scale``, when given: how much faster than
    a pedestrian she may move, so her margins are that much wider). The log weighs a horizon
    by how much a member grows the box relative to its size then, so the first minutes count
    as much as the last. ``xy`` (m, 2) metres, ``v`` (m, 2) m/s (nan: 0), ``still_s`` (m,)
    seconds, ``score`` (m,) ties and tail, ``scale`` (m,).
    Cost O(limit * m * samples)."""
    m = len(xy)
    ranks = np.array(score, dtype=np.float64)
    ranks[requester] = -1.0
    if m <= 2 or limit <= 1:
        return ranks
    vv = np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0)
    still = np.asarray(still_s, dtype=np.float64)
    hs = _horizons(horizon_s)
    xs: list[F64] = []
    ys: list[F64] = []
    for h in hs:
        mu = _ahead(xy, vv, h, forecast_s)
        if h > 0:
            sd = BOX_WANDER_M_S * moving_time(still, h) / math.sqrt(2.0)
            pts = mu[None] + rng.standard_normal((BOX_SAMPLES, m, 2)) * sd[None, :, None]
        else:
            pts = mu[None]
        xs.append(pts[..., 0])
        ys.append(pts[..., 1])
    fx, fy = np.concatenate(xs), np.concatenate(ys)  # (futures, m)
    others = np.flatnonzero(np.arange(m) != requester)
    others = others[np.argsort(ranks[others], kind="stable")]  # ties go to the better score
    order = grow_box(
        fx,
        fy,
        requester,
        others,
        count=min(limit, m) - 1,
        cost=lambda area: np.log(area).mean(axis=0),
        margin_m=BOX_MARGIN_M
        if scale is None or np.all(scale == 1)
        else BOX_MARGIN_M * np.asarray(scale, dtype=np.float64),
    )
    for r, c in enumerate(order, start=1):
        ranks[c] = -1.0 + r / m  # below every score (scores are >= 0), in the order chosen
    return ranks


def still_margins(
    age_s: F64,
    still_s: F64,
    standard_m: F64,
    *,
    k: int,
    slack: int,
    risk: float,
    speed_m_s: float | F64,
    floor_m: float,
) -> F64:
    """Thin margins, metres, of members who had stayed put before their last fix: never more
    than their ``standard_m`` margins, less for those who had stayed long.

    ``age_s`` how old each member's fix is (s), ``still_s`` how long she had stayed put when she
    sent it (s, 0: moving). A member outside a region she was counted in is one who left her
    place since her fix, more than ``margin / speed_m_s`` seconds ago; with stays that end
    with hazard ``1 / (tau + t)`` (:func:`moving_time`) that happens with probability ``w /
    (tau + w)`` for a departure window of ``w`` seconds. Each margin keeps it at most ``p =
    (risk / C(k + slack, slack + 1)) ** (1 / (slack + 1))``, so that more than ``slack`` of the
    ``k + slack`` members of a thin region have walked out unseen with probability at most
    ``risk`` per request (independent departures): ``floor_m + speed_m_s * max(0, age - p tau
    / (1 - p))``.
    """
    age = np.asarray(age_s, dtype=np.float64)
    tau = np.maximum(np.asarray(still_s, dtype=np.float64), 0.0)
    std = np.asarray(standard_m, dtype=np.float64)
    p = (risk / math.comb(k + slack, slack + 1)) ** (1.0 / (slack + 1))
    p = min(max(p, 0.0), 0.5)
    bound = floor_m + speed_m_s * np.maximum(age - p * tau / (1.0 - p), 0.0)
    return np.where(tau > 0, np.minimum(std, bound), std)


def motion_groups(
    xy: F64,
    v: F64,
    still_s: F64,
    size: int,
    *,
    horizon_s: float,
    forecast_s: float,
) -> I64:
    """Split rows into groups of ``size`` to ``2 * size - 1`` that move alike: a group label per
    row, a function of the rows only (every member of a group gets the same group, whoever
    asks: the first region of a session is not centred on its requester).

    ``xy`` (m, 2) positions in metres, ``v`` (m, 2) velocities in m/s (nan: unknown, taken as
    0), ``still_s`` (m,) how long each row has stayed put (0: moving). Each row is the point
    (x, y, x + vx·f, y + vy·f, w), the terms :func:`motion_scores` weighs: where it is, where
    its straight-line forecast puts it ``f = min(horizon_s, forecast_s)`` seconds ahead (no
    further: trips end and turn), and how far it is expected to wander over ``horizon_s``
    (:data:`WANDER_SPEED_M_S` times :func:`moving_time`), which sets users who have stayed put
    for long apart from those moving now. Groups are cut at the median of the coordinate of
    widest spread, recursively (a k-d split). Fewer than ``2 * size`` rows make one group.
    """
    vv = np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0)
    h = max(horizon_s, 0.0)
    f = np.column_stack([xy, _ahead(xy, vv, h, forecast_s), _wander_m(still_s, h)])
    labels = np.zeros(len(xy), dtype=np.int64)
    todo = [np.arange(len(xy), dtype=np.int64)]
    nxt = 1
    while todo:
        rows = todo.pop()
        if len(rows) < 2 * size:
            continue
        axis = int(np.argmax(np.ptp(f[rows], axis=0)))
        order = rows[np.argsort(f[rows, axis], kind="stable")]
        half = len(order) // 2
        labels[order[half:]] = nxt
        nxt += 1
        todo += [order[:half], order[half:]]
    return labels


def session_grid(a_min_m2: float, rng: np.random.Generator) -> tuple[float, float, float]:
    """A session's grid: cell side ``max(sqrt(A_min) / 4, GRID_MIN_M)`` metres and its offset
    (x, y), drawn from ``rng`` (seeded per session, so every region of it shares the grid)."""
    step = max(math.sqrt(max(a_min_m2, 0.0)) / 4.0, GRID_MIN_M)
    ox, oy = (float(v) for v in rng.uniform(0.0, step, 2))
    return step, ox, oy


def grid_cells(
    box: tuple[float, float, float, float], grid: tuple[float, float, float], a_min_m2: float
) -> tuple[int, int, int, int]:
    """The smallest box of ``grid`` (cell side, x and y offsets, metres: :func:`session_grid`)
    holding ``box`` (x0, y0, x1, y1 metres), grown cell by cell on its narrower side until its
    area exceeds ``a_min_m2``: cell indices ``(ix0, iy0, ix1, iy1)``, cell ``i`` spanning
    ``offset + i * step`` to ``offset + (i + 1) * step`` (scalar: it is on every session
    request's path)."""
    step, ox, oy = grid
    x0, y0, x1, y1 = box
    ix0 = math.floor((x0 - ox) / step)
    ix1 = max(ix0 + 1, math.ceil((x1 - ox) / step))
    iy0 = math.floor((y0 - oy) / step)
    iy1 = max(iy0 + 1, math.ceil((y1 - oy) / step))
    floor_m2 = a_min_m2 * (1 + 1e-6)
    while (ix1 - ix0) * (iy1 - iy0) * step * step <= floor_m2:
        if ix1 - ix0 <= iy1 - iy0:
            ix0, ix1 = ix0 - 1, ix1 + 1
        else:
            iy0, iy1 = iy0 - 1, iy1 + 1
    return ix0, iy0, ix1, iy1


def prefix_boxes(xy: F64, order: I64, margin_m: float | F64) -> F64:
    """The boxes (p, 4: x0, y0, x1, y1 metres) of the first 1, 2, ... rows of ``order`` (rows
    of ``xy``), each row kept ``margin_m`` (one value, or one per row of ``xy``) off the
    edges."""
    pts = xy[order]
    mg = np.broadcast_to(np.asarray(margin_m, dtype=np.float64), (len(xy),))[order]
    out: F64 = np.column_stack(
        [
            np.minimum.accumulate(pts[:, 0] - mg),
            np.minimum.accumulate(pts[:, 1] - mg),
            np.maximum.accumulate(pts[:, 0] + mg),
            np.maximum.accumulate(pts[:, 1] + mg),
        ]
    )
    return out


def grid_areas(boxes: F64, grid: tuple[float, float, float], a_min_m2: float) -> F64:
    """Areas (m²) of the regions of ``grid`` (:func:`grid_cells`) that :func:`session_region`
    would build around each of ``boxes`` (b, 4: x0, y0, x1, y1 metres; e.g. the
    :func:`prefix_boxes` of an order of members)."""
    step = grid[0]
    out: F64 = np.empty(len(boxes))
    for i, b in enumerate(np.asarray(boxes, dtype=np.float64).tolist()):
        ix0, iy0, ix1, iy1 = grid_cells((b[0], b[1], b[2], b[3]), grid, a_min_m2)
        out[i] = (ix1 - ix0) * (iy1 - iy0) * step * step
    return out


def session_region(  # noqa: PLR0917
    members_xy: F64,
    requester: int,
    k: int,
    a_min_m2: float,
    a_max_m2: float,
    rng: np.random.Generator,
    margin_m: float | F64 = 0.0,
    score: F64 | None = None,
) -> tuple[shapely.Polygon | None, I64, str]:
    """The session region around ``k`` members: ``(polygon, chosen rows, reason)``.

    ``members_xy`` (m, 2) holds the last reported positions of the session's members (row
    ``requester`` is the requester); the ``k`` rows nearest the requester (her included) are
    chosen, or the ``k`` of lowest ``score`` when given (:func:`motion_scores`). ``rng`` draws
    the grid's offset: pass a generator seeded the same way for every request of one session.
    Every member keeps at least ``margin_m`` metres (one value, or one per row) from every
    edge (members move between their reports: the margin should exceed the distance one covers
    in an update interval). ``polygon`` is None, with a human reason, when fewer than ``k``
    members are known or their box with the margins leaves no room below ``a_max_m2``.
    """
    xy = np.asarray(members_xy, dtype=np.float64)
    if len(xy) < k:
        return (
            None,
            np.empty(0, dtype=np.int64),
            (f"session members left: {len(xy)} of them still known, k={k} needed"),
        )
    d = (
        np.hypot(xy[:, 0] - xy[requester, 0], xy[:, 1] - xy[requester, 1])
        if score is None
        else np.array(score, dtype=np.float64)
    )
    d[requester] = -1.0  # the requester first, whatever the ties
    chosen = np.argsort(d, kind="stable")[:k].astype(np.int64)
    pts = xy[chosen]
    marg = np.broadcast_to(np.asarray(margin_m, dtype=np.float64), (len(xy),))[chosen]
    x0 = float((pts[:, 0] - marg).min())
    y0 = float((pts[:, 1] - marg).min())
    x1 = float((pts[:, 0] + marg).max())
    y1 = float((pts[:, 1] + marg).max())
    box = (x1 - x0) * (y1 - y0)
    hi = a_max_m2 * (1 - 1e-6)
    # a grid with a secret offset (the same for the whole session: ``rng`` is seeded per
    # session), so that edges lie on grid lines, never at a function of members' coordinates
    step, ox, oy = grid = session_grid(a_min_m2, rng)
    ix0, iy0, ix1, iy1 = grid_cells((x0, y0, x1, y1), grid, a_min_m2)
    area = (ix1 - ix0) * (iy1 - iy0) * step * step
    if area >= hi:
        reason = (
            f"the session's {k} members have spread: their box with margins covers {box:.0f}"
            " m² >= a_max_m2"
        )
        return None, chosen, reason
    return (
        shapely.box(ox + ix0 * step, oy + iy0 * step, ox + ix1 * step, oy + iy1 * step),
        chosen,
        "",
    )


def companion_labels(
    xy: F64,
    v: F64,
    still: NDArray[np.bool_],
    *,
    radius_m: float = COMPANION_RADIUS_M,
    speed_m_s: float = COMPANION_SPEED_M_S,
) -> I64:
    """A label per row, equal for rows that may be together: linked when they lie within
    ``radius_m`` metres of each other (``xy`` (m, 2), metres) and either move within
    ``speed_m_s`` of each other's velocity (``v`` (m, 2), m/s, nan taken as 0) or have both
    stayed put (``still``); labels are the connected components of those links (a chain of
    companions is one party). Rows alone get labels of their own. Only the pairs a k-d tree
    finds within ``radius_m`` are compared (no m x m matrix: a pool of k_max = 100's 400
    members costs about as little as 30)."""
    n = len(xy)
    p = np.asarray(xy, dtype=np.float64).reshape(n, 2)
    vv = np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0)
    st = np.asarray(still, dtype=bool)
    near = cKDTree(p).query_pairs(radius_m, output_type="ndarray")  # pairs within radius_m
    i, j = near[:, 0], near[:, 1]
    link = (np.hypot(*(vv[i] - vv[j]).T) <= speed_m_s) | (st[i] & st[j])
    if not link.any():  # everyone alone: no graph to build
        return np.arange(n, dtype=np.int64)
    graph = coo_array((np.ones(int(link.sum())), (i[link], j[link])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    return np.asarray(labels, dtype=np.int64)


def slack_shortfall(labels: I64, requester: int, k: int, slack: int) -> int:
    """How many members short of ``k`` a region of the rows ``labels`` (from
    :func:`companion_labels`; row ``requester`` is the requester) may be left with if the
    ``slack`` largest parties other than the requester's leave it at once (0: none short).
    A thin region is built on the bet that at most ``slack`` members leave their margins
    before their next fixes, each on her own; companions leave together, so the bet is
    counted in parties. The requester's party goes where she goes: it never leaves her
    region."""
    lab = np.asarray(labels, dtype=np.int64)
    mine = lab[requester]
    _, sizes = np.unique(lab[lab != mine], return_counts=True)
    gone = int(np.sort(sizes)[::-1][: max(slack, 0)].sum())
    return max(0, k - (len(lab) - gone))
