"""What historical k-anonymity costs a causal anonymizer at its most favoured: idealised session
policies on random walkers, for the feasibility study of issue 22's third goal
(``benchmarks/study_causal_sessions.py``; docs/algorithms.md, "What no causal design beats").

An idealised policy sees every user's exact position at every request and nothing of the
future (the walkers of :func:`simulators.attacks.random_walks` draw a new heading every round,
independent of all that came before, so no forecast can help). It keeps a session's anonymity
set exactly as the cloaker does (the users inside every region so far, the requester among
them, never fewer than ``k``), builds each region as the box of the members it keeps, and pays
only what ``cell_m`` and ``margin_m`` say: ``cell_m = 0`` and ``margin_m = 0`` put edges on
members' coordinates (what issue 22's first goal forbids), ``cell_m > 0`` rounds each box out
to a grid with a random offset per session (the shipped session grid,
:func:`locpriv.core.cloak.history.grid_cells`), ``margin_m`` keeps every member that far off
the edges (a fix's scatter, a second of walking). Members are taken greedily by the box they
make together, from the requester, at present positions (each box grown by
:data:`locpriv.core.cloak.history.BOX_MARGIN_M` while choosing, so that members in a line do
not cost nothing); every set member a region covers stays in the set. So the first region is
centred on the requester, which the cloaker does not allow (a region centred on her gives her
away to the centre guess); with ``first_group`` > 0 it is instead the box of her group in a
k-d split of everyone's position at that request (the cloaker's own
:func:`locpriv.core.cloak.history.motion_groups`, with no velocity and nobody staying put:
these walkers' forecasts say nothing), chosen without regard to who asks, as the cloaker's
first region is.

Two families decide how many members each region keeps:

* ``schedule``: the shipped rule - the first region holds ``pool`` users, and the number kept
  falls linearly to ``k`` over ``shrink`` requests;
* ``budget``: each region keeps as many members as a region of at most ``cap_m2`` holds (at
  least ``k``): with ``cap_m2`` = c x the undefended median, every region within the cap is at
  most c x the metric's own denominator, so c = 5 aims straight at the goal's threshold (a
  real anonymizer knows only a local estimate of it, which measured worse).

Coordinates are metres, areas m². Pure and deterministic in ``seed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from locpriv.core.cloak.history import (
    BOX_MARGIN_M,
    grid_areas,
    grid_cells,
    motion_groups,
    prefix_boxes,
)
from simulators.attacks import intersection_attack, random_walks

__all__ = [
    "SessionReplay",
    "budget_rule",
    "first_groups",
    "replay_sessions",
    "request_frames",
    "schedule_rule",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

KeepRule = Callable[[int, F64], int]
"""``(request index in the session, areas of the prefixes of the greedy order) -> how many
members, the requester included, the region keeps`` (clamped to ``[k, len(order)]``)."""


@dataclass(frozen=True, slots=True)
class SessionReplay:
    """One replay: every answered region's area (m², in request order per asker, askers in
    turn) and how many members the rule kept for it (the requester included; bystanders the
    region covers stay too), the share answered, and the intersection attack's share of
    sessions narrowed below ``k`` (0 by construction; the attack checks it)."""

    areas_m2: F64
    kept: I64
    answered: float
    narrowed: float


def request_frames(
    *,
    minutes: float,
    seed: int,
    users: int = 2000,
    side_m: float = 4000.0,
    askers: int = 100,
    speed_m_s: float = 1.4,
    every_s: float = 60.0,
) -> list[F64]:
    """Every user's true position (users, 2) at each request of ``repeated_cloaks_attack``'s
    random walkers with fixes at every request (the same draws for the same arguments)."""
    return [
        w.xy.copy()
        for w in random_walks(
            users=users,
            side_m=side_m,
            askers=askers,
            every_s=every_s,
            rounds=int(minutes * 60 / every_s),
            speed_m_s=speed_m_s,
            seed=seed,
        )
        if w.request is not None
    ]


def schedule_rule(k: int, pool: int, shrink: int) -> KeepRule:
    """The shipped shrinking rule: ``pool`` members at the first request, then linearly fewer,
    ``k`` from request ``shrink`` on."""

    def keep(j: int, areas: F64) -> int:
        return pool - -((pool - k) * min(j, shrink) // -shrink)

    return keep


def budget_rule(cap_m2: float, grow_m2: float = 0.0) -> KeepRule:
    """As many members as a region of at most ``cap_m2 + grow_m2 * j`` holds at request ``j``
    (the clamp makes it ``k`` when none does): a fixed cap, or one that grows with the
    session's age."""

    def keep(j: int, areas: F64) -> int:
        return int(np.count_nonzero(areas <= cap_m2 + grow_m2 * j))

    return keep


def first_groups(xy: F64, size: int) -> I64:
    """A group label per row of ``xy`` (n, 2; metres): the cloaker's k-d split into groups
    of ``size`` to ``2 * size - 1`` (:func:`~locpriv.core.cloak.history.motion_groups`) on
    position alone (no velocity, nobody staying put)."""
    zero = np.zeros(len(xy))
    return motion_groups(xy, np.zeros_like(xy), zero, size, horizon_s=0.0, forecast_s=0.0)


def _greedy_order(xy: F64, me: int, cand: I64, stop_m2: float, need: int) -> I64:
    """``me`` and then candidates (indices into ``xy``) in the order their joining grows the
    box of those chosen so far (grown by ``BOX_MARGIN_M``) least, every candidate the box
    already covers next; stops once at least ``need`` rows are ordered and the box exceeds
    ``stop_m2``."""
    x0 = x1 = float(xy[me, 0])
    y0 = y1 = float(xy[me, 1])
    px, py = xy[cand, 0], xy[cand, 1]
    alive = np.ones(len(cand), dtype=bool)
    order = [me]
    g = 2 * BOX_MARGIN_M
    while alive.any() and not (len(order) >= need and (x1 - x0) * (y1 - y0) > stop_m2):
        nx0, nx1 = np.minimum(x0, px), np.maximum(x1, px)
        ny0, ny1 = np.minimum(y0, py), np.maximum(y1, py)
        grown = np.where(alive, (nx1 - nx0 + g) * (ny1 - ny0 + g), np.inf)
        i = int(np.argmin(grown))
        x0, x1, y0, y1 = float(nx0[i]), float(nx1[i]), float(ny0[i]), float(ny1[i])
        inside = alive & (px >= x0) & (px <= x1) & (py >= y0) & (py <= y1)
        order.extend(int(c) for c in cand[inside])
        alive &= ~inside
    return np.asarray(order, dtype=np.int64)


def replay_sessions(
    frames: Sequence[F64],
    askers: int,
    k: int,
    keep: KeepRule,
    *,
    cell_m: float = 0.0,
    margin_m: float = 0.0,
    a_min_m2: float = 1e4,
    a_max_m2: float = 4e6,
    refuse_m2: float = np.inf,
    need: int = 0,
    stop_m2: float = np.inf,
    seed: int = 0,
    first_group: int = 0,
) -> SessionReplay:
    """Play one session per asker (users ``0 .. askers - 1``) over ``frames`` (positions at
    each request) with the idealised policy that keeps ``keep`` members per region (see the
    module docstring). A region of ``refuse_m2`` or more is refused, one of ``a_max_m2`` or
    more cannot be given: either way the request goes unanswered and the set is kept whole
    (nothing was published). The greedy order is worked out until it holds ``need`` members
    and its box passes ``stop_m2`` (what ``keep`` may ask for; the rest of the set is never
    kept). Without a grid (``cell_m = 0``) a box under ``a_min_m2`` grows about its centre.
    With ``first_group`` > 0 a session's first answered region is the box of the requester's
    group of :func:`first_groups` (``first_group`` to ``2 * first_group - 1`` users) at that
    request, with its margins, not the greedy one around her."""
    rng = np.random.default_rng(seed)
    n = len(frames[0])
    areas: list[float] = []
    kept: list[int] = []
    seen: list[list[frozenset[int]]] = []
    asked = 0
    stop = min(stop_m2, a_max_m2)
    for me in range(askers):
        member = np.ones(n, dtype=bool)
        off = rng.uniform(0.0, max(cell_m, 1.0), 2)
        grid = (cell_m, float(off[0]), float(off[1]))
        regions: list[frozenset[int]] = []
        for j, xy in enumerate(frames):
            asked += 1
            if first_group > 0 and not regions:  # her group's box, whoever asks
                labels = first_groups(xy, first_group)
                order = np.flatnonzero(labels == labels[me])
                order = np.concatenate([[me], order[order != me]])
                boxes = prefix_boxes(xy, order, margin_m)[-1:]
                boxes = np.repeat(boxes, len(order), axis=0)
                keep_all = len(order)
            else:
                cand = np.flatnonzero(member)
                cand = cand[cand != me]
                order = _greedy_order(xy, me, cand, stop, max(need, k))
                boxes = prefix_boxes(xy, order, margin_m)
                keep_all = 0
            if cell_m > 0:
                got = grid_areas(boxes, grid, a_min_m2)
            else:
                w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
                got = np.maximum(w * h, a_min_m2)
            m = keep_all or min(max(keep(j, got), k), len(order))
            if got[m - 1] >= min(a_max_m2, refuse_m2):
                continue
            x0, y0, x1, y1 = boxes[m - 1].tolist()
            if cell_m > 0:
                ix0, iy0, ix1, iy1 = grid_cells((x0, y0, x1, y1), grid, a_min_m2)
                x0, x1 = grid[1] + ix0 * cell_m, grid[1] + ix1 * cell_m
                y0, y1 = grid[2] + iy0 * cell_m, grid[2] + iy1 * cell_m
            else:
                x0, y0, x1, y1 = _at_least((x0, y0, x1, y1), a_min_m2)
            inside = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
            member &= inside
            areas.append(float(got[m - 1]))
            kept.append(m)
            regions.append(frozenset(np.flatnonzero(inside).tolist()))
        seen.append(regions)
    attack = intersection_attack([r for r in seen if r], k)
    return SessionReplay(
        np.asarray(areas),
        np.asarray(kept, dtype=np.int64),
        len(areas) / asked if asked else 0.0,
        float(attack["success_rate"]),
    )


def _at_least(
    box: tuple[float, float, float, float], a_min_m2: float
) -> tuple[float, float, float, float]:
    """``box`` grown about its centre, its narrower side first, to an area of at least
    ``a_min_m2`` (the area :func:`replay_sessions` counts for it without a grid)."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    if w * h >= a_min_m2:
        return box
    side = math.sqrt(a_min_m2)
    if max(w, h) <= side:  # a square of the least area
        w = h = side
    elif w < h:
        w = a_min_m2 / h
    else:
        h = a_min_m2 / w
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    # never inside the box it grows (rounding would put an edge member out)
    return min(x0, cx - w / 2), min(y0, cy - h / 2), max(x1, cx + w / 2), max(y1, cy + h / 2)
