"""One :class:`~locpriv.core.cloak.cloaker.Cloaker` per tile: the cloaking state of a shard.

A cloak uses the users of the requester's tile only, and its region stays inside the tile
(each tile's cloaker partitions the tile's square, :class:`~locpriv.core.tiles.Tiling`).
Without tiles there is one cloaker over the configured world, exactly as before tiles existed.

Handover: a user whose update lands in another tile of the same :class:`TileCloakers` is
removed from her old tile at once; a tile served by another process forgets her when her
:class:`~locpriv.wire.messages.LocationLeave` for it arrives (:meth:`TileCloakers.leave`; the
client sends one on every tile change), else by its TTL (``CloakConfig.user_ttl_s``).

Cloakers are made on a tile's first update. Deadlines are cached per tile and recomputed only
for the tiles touched since (a heap with lazy entries), so a driver's ``next_deadline()`` after
each message costs O(log tiles), not O(tiles). Units: metres, m², seconds.
"""

from __future__ import annotations

import heapq
import hmac
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace

from locpriv.core.cloak.cloaker import Cloaker, Revision
from locpriv.core.cloak.session_records import SessionRecord
from locpriv.core.cloak.types import CloakConfig, CloakOutcome, CloakParams, check_params
from locpriv.core.tiles import Tiling
from locpriv.errors import UnknownUser
from locpriv.wire.topics import WORLD_TILE

__all__ = ["TileCloakers", "grid_phase"]


def grid_phase(secret: bytes, tile: str) -> float:
    """The grid phase of ``tile`` in [0.05, 0.95): HMAC-SHA256(``secret``, tile) read as a
    fraction. Anyone without ``secret`` (a deployment's shared key) cannot predict it; every
    process with it cuts a tile along the same grid lines."""
    digest = hmac.new(secret, b"locpriv cloak grid phase v1\0" + tile.encode(), "sha256").digest()
    return 0.05 + 0.9 * int.from_bytes(digest[:8], "big") / 2.0**64


class TileCloakers:
    """Cloakers by tile id for ``config`` (its ``world`` is used without tiles only)."""

    def __init__(
        self, config: CloakConfig, tiling: Tiling | None = None, *, secret: bytes | None = None
    ) -> None:
        self.tiling = tiling or Tiling()
        self.config = config
        self._secret = secret
        """Derives each tile's grid phase (:func:`grid_phase`); None: each cloaker draws one."""
        rect = self.tiling.rect("t0_0")
        self._tile_config = replace(config, world=rect) if rect is not None else config
        self.cloakers: dict[str, Cloaker] = {}
        self.tile_of_user: dict[str, str] = {}
        self._tile_of_request: dict[Hashable, str] = {}
        self._due: dict[str, float | None] = {}
        self._heap: list[tuple[float, str]] = []
        self._dirty: set[str] = set()
        self._fix_wanted: list[str] = []
        self.revision = Revision()
        """Shared by every tile's cloaker (:attr:`Cloaker.revision`)."""

    @classmethod
    def of(cls, cloaker: Cloaker) -> TileCloakers:
        """An untiled set holding ``cloaker`` as its one (world) tile."""
        tc = cls(cloaker.config)
        tc.revision = cloaker.revision
        tc.cloakers[WORLD_TILE] = cloaker
        tc._dirty.add(WORLD_TILE)
        return tc

    def __len__(self) -> int:
        return sum(len(c) for c in self.cloakers.values())

    @property
    def has_users(self) -> bool:
        """True when some tile knows a user (stops at the first one)."""
        return any(len(c) for c in self.cloakers.values())

    def users_per_tile(self) -> dict[str, int]:
        """Current users of every tile that has a cloaker."""
        return {t: len(c) for t, c in self.cloakers.items()}

    def session_counts(self) -> dict[str, int]:
        """:attr:`Cloaker.session_counts` summed over every tile's cloaker (what sessions
        did: ``thin``, ``worst_case``, ``short``, ``audit_dropped``, ``rekeys``)."""
        total: Counter[str] = Counter()
        for c in self.cloakers.values():
            total.update(c.session_counts)
        return dict(total)

    @property
    def sessions_revision(self) -> int:
        """Grows whenever a session of some tile may have changed (every tile's cloaker
        shares one :class:`~locpriv.core.cloak.cloaker.Revision`)."""
        return self.revision.value

    def export_sessions(self, now: float, since: int = -1) -> dict[str, list[SessionRecord]]:
        """Every tile's live sessions changed after revision ``since`` (-1: all;
        :meth:`Cloaker.export_sessions`), by tile."""
        out = {t: c.export_sessions(now, since) for t, c in self.cloakers.items()}
        return {t: r for t, r in out.items() if r}

    def restore_sessions(self, tiles: Mapping[str, Sequence[SessionRecord]], now: float) -> int:
        """Go on with a previous process's sessions in their tiles; returns how many."""
        return sum(self.cloaker(t).restore_sessions(list(r), now) for t, r in tiles.items())

    def export_speeds(self) -> dict[str, dict[str, float]]:
        """Every tile's fast users (:meth:`Cloaker.export_speeds`), by tile."""
        out = {t: c.export_speeds() for t, c in self.cloakers.items()}
        return {t: v for t, v in out.items() if v}

    def restore_speeds(self, tiles: Mapping[str, Mapping[str, float]], now: float) -> None:
        """Speeds a previous process saw, in their tiles."""
        for t, speeds in tiles.items():
            self.cloaker(t).restore_speeds(speeds, now)

    def pending(self) -> int:
        """Requests waiting in every tile (temporal cloaking)."""
        return sum(c.pending() for c in self.cloakers.values())

    def cloaker(self, tile: str) -> Cloaker:
        """The cloaker of ``tile`` (made on first use; its world is the tile's square)."""
        c = self.cloakers.get(tile)
        if c is None:
            rect = self.tiling.rect(tile)
            cfg = self.config if rect is None else replace(self._tile_config, world=rect)
            phase = None if self._secret is None else grid_phase(self._secret, tile)
            c = self.cloakers[tile] = Cloaker(cfg, phase=phase, revision=self.revision)
        self._dirty.add(tile)
        return c

    @property
    def request_config(self) -> CloakConfig:
        """The configuration requests are checked against (with tiles: a tile's world)."""
        return self._tile_config

    def validate(self, params: CloakParams | None) -> CloakParams:
        """``params`` (or the default) checked against the bounds; raises ConfigError."""
        p = self._tile_config.default if params is None else params
        check_params(self._tile_config, p)
        return p

    # ------------------------------------------------------------------ users

    def update(
        self,
        user_id: str,
        x_m: float,
        y_m: float,
        now: float,
        tile: str,
        *,
        accuracy_m: float | None = None,
    ) -> list[CloakOutcome]:
        """Absorb a position (metres; ``accuracy_m`` as :meth:`Cloaker.update`) in ``tile``; a
        user leaving another tile of this set is removed from it at once. Returns outcomes of
        pending requests it completed."""
        old = self.tile_of_user.get(user_id)
        if old is not None and old != tile:
            prev = self.cloakers.get(old)
            if prev is not None:
                prev.remove(user_id)
                self._dirty.add(old)
        self.tile_of_user[user_id] = tile
        return self._finished(self.cloaker(tile).update(user_id, x_m, y_m, now, accuracy_m))

    def leave(self, user_id: str, tile: str) -> None:
        """The user left ``tile``: forget her there at once. A no-op unless ``tile`` is the
        tile of her latest update here (a leave that arrives after her next update in another
        tile of this set, or for a tile she never reported, changes nothing)."""
        if self.tile_of_user.get(user_id) != tile:
            return
        del self.tile_of_user[user_id]
        c = self.cloakers.get(tile)
        if c is not None and user_id in c.table:
            c.remove(user_id)
            self._dirty.add(tile)

    def tile_of(self, user_id: str) -> str | None:
        """The tile of the user's latest update, while her tile still knows her."""
        tile = self.tile_of_user.get(user_id)
        if tile is None:
            return None
        c = self.cloakers.get(tile)
        return tile if c is not None and user_id in c.table else None

    # --------------------------------------------------------------- requests

    def request(
        self, request_id: Hashable, user_id: str, params: CloakParams | None, now: float
    ) -> CloakOutcome | None:
        """Cloak ``user_id`` in the tile of her latest update (None: pending)."""
        tile = self.tile_of(user_id)
        if tile is None:
            return CloakOutcome(request_id, None, UnknownUser("no current location for this user"))
        c = self.cloaker(tile)
        outcome = c.request(request_id, user_id, params, now)
        self._fix_wanted += c.take_fix_requests()
        if outcome is None:
            self._tile_of_request[request_id] = tile
        return self._finished([outcome])[0] if outcome is not None else None

    def take_fix_requests(self) -> list[str]:
        """:meth:`Cloaker.take_fix_requests` of every tile since the last call (user ids)."""
        out, self._fix_wanted = self._fix_wanted, []
        return out

    def cancel(self, request_id: Hashable) -> None:
        """Drop a pending request; unknown ids are ignored."""
        tile = self._tile_of_request.pop(request_id, None)
        if tile is not None:
            self.cloaker(tile).cancel(request_id)

    def _finished(self, outcomes: list[CloakOutcome]) -> list[CloakOutcome]:
        for o in outcomes:
            self._tile_of_request.pop(o.request_id, None)
        return outcomes

    # ------------------------------------------------------------------ time

    def prepare(self, now: float) -> list[CloakOutcome]:
        """:meth:`Cloaker.prepare` of every tile with users."""
        out: list[CloakOutcome] = []
        for tile, c in self.cloakers.items():
            if len(c):
                out += c.prepare(now)
                self._dirty.add(tile)
        return self._finished(out)

    def on_deadline(self, now: float) -> list[CloakOutcome]:
        """Run the deadlines of every tile that has one due."""
        self._refresh()
        out: list[CloakOutcome] = []
        while self._heap and self._heap[0][0] <= now:
            due, tile = heapq.heappop(self._heap)
            if self._due.get(tile) != due:
                continue  # a stale entry
            out += self.cloakers[tile].on_deadline(now)
            del self._due[tile]  # recomputed by the next _refresh (drops duplicate entries)
            self._dirty.add(tile)
        if len(self.tile_of_user) > 2 * len(self) + 1024:  # forget users expired by TTL
            self.tile_of_user = {u: t for u in list(self.tile_of_user) if (t := self.tile_of(u))}
        return self._finished(out)

    def next_deadline(self) -> float | None:
        """The earliest deadline of any tile (s), or None."""
        self._refresh()
        while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _refresh(self) -> None:
        for tile in self._dirty:
            due = self.cloakers[tile].next_deadline() if tile in self.cloakers else None
            if due != self._due.get(tile):
                self._due[tile] = due
                if due is not None and not math.isinf(due):
                    heapq.heappush(self._heap, (due, tile))
        self._dirty.clear()
        if len(self._heap) > 4 * len(self.cloakers) + 64:
            self._heap = [(d, t) for t, d in self._due.items() if d is not None]
            heapq.heapify(self._heap)
