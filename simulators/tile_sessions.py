"""Historical k-anonymity with regions that are unions of tiles: an idealised session policy
for issue 22's third goal (``benchmarks/study_tile_sessions.py``;
docs/algorithms.md, "Regions made of tiles"): the policy idealised, with exact positions and
fixed margins; the cloaker's own (``CloakConfig.session_tile_factor``) shares its geometry,
:mod:`locpriv.core.cloak.tile_regions`.

A session keeps one fixed set of ``k + spare`` users for its whole life: the requester and
``k - 1 + spare`` others drawn at random from her group of a k-d split of everyone's position
at her first request (:func:`simulators.causal_sessions.first_groups`, groups of ``group`` to
``2 * group - 1`` users, chosen whoever asks). Every region is the union of the square tiles
(side ``tile_m``, each larger than A_min, on a grid at a random offset drawn per session,
blind to every position)
that hold a member of the set or come within ``margin_m`` of one (a fix's scatter, the walk
since it); its area is the number of tiles times ``tile_m²``. So every member is in every
region (the intersection attack is left with the set and any bystander who happens to stay in
its tiles), and the area does not grow with the session's age: it is about ``k + spare`` tiles
however far the members scatter.

What it gives away instead, measured by :class:`TileReplay`: each member is held by her own
tile or tiles (``member_areas_m2``), not by a box shared with the others, so whoever can tell
which tile is hers (a track followed to a known door) places her to within a tile, where a
single box places her to within the whole box. Tiles of at least A_min keep that at the floor
every single region already allows.

Coordinates are metres, areas m². Pure and deterministic in ``seed``. Users never leave these
walks; a deployment would need ``spare`` members for those who do (each costs a tile).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from locpriv.core.cloak.tile_regions import Grid, member_tiles, point_tiles, tile_box
from simulators.attacks import intersection_attack
from simulators.causal_sessions import first_groups

__all__ = [
    "Asker",
    "TileReplay",
    "TileSession",
    "askers_at",
    "member_tiles",
    "play_session",
    "point_tiles",
    "replay_askers",
    "tile_box",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class TileReplay:
    """One replay: every answered region's area (m², in request order per asker, askers in
    turn) and, for each member of its set, the area of the tiles that hold her (m²; members in
    set order, regions in turn), the share of requests answered, the intersection attack's
    share of sessions narrowed below ``k`` and its mean number of candidates left, and the
    share of members whose true position lay outside an answered region (0 without scatter;
    with scatter, what the margins failed to hold), and the share of sessions left with fewer
    than ``k`` honest members when the adversary holds ``insiders`` devices in the requester's
    group (0 without)."""

    areas_m2: F64
    member_areas_m2: F64
    answered: float
    narrowed: float
    candidates: float
    missed: float
    infiltrated: float


@dataclass(frozen=True, slots=True)
class TileSession:
    """One asker's session: her group (indices into the frames), the set's members drawn from
    it (row 0 the requester), the session's tile grid and, per request, the tile keys that
    hold each member (:func:`member_tiles`)."""

    group: I64
    members: I64
    grid: Grid
    tiles: list[list[I64]]

    def union(self, j: int) -> I64:
        """The keys of request ``j``'s region, sorted."""
        out: I64 = np.unique(np.concatenate(self.tiles[j]))
        return out


def play_session(
    frames: Sequence[F64],
    me: int,
    k: int,
    rng: np.random.Generator,
    *,
    tile_m: float = 101.0,
    margin_m: float = 3.0,
    spare: int = 0,
    group: int = 10,
    a_min_m2: float = 1e4,
    scatter_m: float = 0.0,
) -> TileSession:
    """The session of user ``me`` over ``frames`` (every user's position, (n, 2) metres, at
    each request): ``k - 1 + spare`` others drawn by ``rng`` from her group at the first frame,
    a grid offset drawn by ``rng``, and each member's tiles at every frame - around her true
    position, or with ``scatter_m`` > 0 around a fix that lies off it by a normal draw of that
    standard deviation per axis (fresh at every frame), as a receiver's would."""
    if not 0 <= margin_m < tile_m:
        raise ValueError("margin_m must lie in [0, tile_m)")
    if group < k + spare:
        raise ValueError("a group must hold at least k + spare users")
    if not tile_m * tile_m > a_min_m2:
        raise ValueError("tile_m² must exceed a_min_m2 (every region's area does)")
    grid = (tile_m, float(rng.uniform(0.0, tile_m)), float(rng.uniform(0.0, tile_m)))
    labels = first_groups(frames[0], group)
    mine = np.flatnonzero(labels == labels[me])
    others = rng.permutation(mine[mine != me])[: k - 1 + spare]
    members = np.concatenate([[me], others]).astype(np.int64)
    tiles = [
        member_tiles(
            xy[members] + (rng.normal(0.0, scatter_m, (len(members), 2)) if scatter_m else 0.0),
            grid,
            margin_m,
        )
        for xy in frames
    ]
    return TileSession(mine.astype(np.int64), members, grid, tiles)


@dataclass(frozen=True, slots=True)
class Asker:
    """One session to play: the asker's user index, every user's position ((n, 2) metres) at
    each of her requests, and her k."""

    user: int
    frames: Sequence[F64]
    k: int


def replay_askers(
    askers: Sequence[Asker],
    *,
    tile_m: float = 101.0,
    margin_m: float = 3.0,
    spare: int = 0,
    group: int | None = None,
    a_min_m2: float = 1e4,
    a_max_m2: float = 4e6,
    scatter_m: float = 0.0,
    insiders: int = 0,
    seed: int = 0,
) -> TileReplay:
    """Play each asker's session with regions made of tiles (:func:`play_session`; module
    docstring), groups of ``group`` users (by default ``max(10, 2 k)``), tiles placed round
    fixes scattered by ``scatter_m`` and the attack played on true positions. A region of
    ``a_max_m2`` or more goes unanswered (nothing published, the set kept). With
    ``insiders`` > 0 the adversary holds that many devices in each requester's group (parked
    beside her, which is how a device gets into her group), drawn apart from the session's own
    draws, and the replay counts the sessions whose set holds fewer than ``k`` honest users."""
    rng = np.random.default_rng(seed)
    spies = np.random.default_rng([seed, 1])
    areas: list[float] = []
    held: list[float] = []
    seen: list[list[frozenset[int]]] = []
    ks: list[int] = []
    asked = missed = placed = infiltrated = 0
    for a in askers:
        s = play_session(
            a.frames,
            a.user,
            a.k,
            rng,
            tile_m=tile_m,
            margin_m=margin_m,
            spare=spare,
            group=group if group is not None else max(10, 2 * a.k),
            a_min_m2=a_min_m2,
            scatter_m=scatter_m,
        )
        if insiders:
            theirs = spies.choice(s.group[s.group != a.user], insiders, replace=False)
            infiltrated += len(s.members) - np.isin(s.members, theirs).sum() < a.k
        regions: list[frozenset[int]] = []
        for j, xy in enumerate(a.frames):
            asked += 1
            union = s.union(j)
            area = len(union) * tile_m * tile_m
            if area >= a_max_m2:
                continue
            inside = np.isin(point_tiles(xy, s.grid), union)
            missed += int(np.count_nonzero(~inside[s.members]))
            placed += len(s.members)
            areas.append(area)
            held.extend(len(t) * tile_m * tile_m for t in s.tiles[j])
            regions.append(frozenset(np.flatnonzero(inside).tolist()))
        if regions:
            seen.append(regions)
            ks.append(a.k)
    attack = intersection_attack(seen, ks)
    return TileReplay(
        np.asarray(areas),
        np.asarray(held),
        len(areas) / asked if asked else 0.0,
        float(attack["success_rate"]),
        float(attack["candidates_mean"]),
        missed / placed if placed else 0.0,
        infiltrated / len(askers) if askers else 0.0,
    )


def askers_at(frames: Sequence[F64], askers: int, k: int) -> list[Asker]:
    """Users ``0 .. askers - 1`` each asking at every frame of ``frames`` with the same ``k``
    (the random walkers of :func:`simulators.causal_sessions.request_frames`)."""
    return [Asker(me, frames, k) for me in range(askers)]
