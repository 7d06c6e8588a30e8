"""Sans-I/O spatio-temporal cloaking core of the trusted anonymizer.

API notes for callers (deviations from / additions to the agreed contract):

* Epoch/snapshot model. Time is cut into epochs of ``CloakConfig.epoch_s`` seconds
  (epoch = ``floor(now / epoch_s)``). The first call in a new epoch takes a snapshot of all current
  users; every region of that epoch is computed from that snapshot, so reciprocity holds within
  an epoch: every user inside R asking with the same ``k`` and an ``a_min_m2`` on the same rung
  (see ``a_min_step``) in the same epoch gets the identical :class:`CloakRegion` (if R had to be
  shrunk to fit ``a_max_m2``, the same ``a_max_m2`` too). R contains the
  requester's position *as of the snapshot*; ``t2`` is the snapshot time and ``t1`` the earliest
  last-update time of the users inside R, so ``[t1, t2]`` is the interval the region covers.
* A user whose first update came after the current snapshot is not in it: its request stays
  pending until the next epoch (or fails with ``CloakInfeasible`` if ``max_delay_s == 0``).
* Pending requests (temporal cloaking) are retried once per epoch, from :meth:`Cloaker.update`,
  :meth:`Cloaker.update_many` or :meth:`Cloaker.on_deadline`, whichever first sees the new epoch;
  :meth:`Cloaker.request` never returns other requests' outcomes.
* Addition: :meth:`Cloaker.prepare` (optional) takes the new epoch's snapshot and pre-builds the
  partitions used in the previous epoch (~0.1 s of CPU per epoch at 100k users), so requests
  do not pay for them; call it from a timer just after each epoch boundary
  (``floor(now / epoch_s) * epoch_s``). It also returns outcomes of pending requests it completed.
* :meth:`Cloaker.next_deadline` returns the earliest of: a pending request's deadline, the next
  epoch boundary (only while requests are pending) and the next possible user expiry (TTL).
* :meth:`Cloaker.request` also accepts ``params=None`` (the configured default profile);
  :meth:`Cloaker.pending` and ``len(cloaker)`` report pending requests and current users.
* :meth:`Cloaker.update` / :meth:`Cloaker.update_many` raise ``ValueError`` for non-finite
  coordinates.
* Errors in :attr:`CloakOutcome.error` come from :mod:`locpriv.errors`: ``CloakInfeasible``
  (``max_delay_s == 0`` and no region now), ``CloakTimeout``, ``UnknownUser`` (code
  ``unknown_user``) and ``Overloaded`` (code ``overloaded``).
  ``str(error)`` is the human reason; it names the failing constraint and never contains ids or
  coordinates.
* ``a_min_m2`` is rounded *up* to a power of ``a_min_step`` (default ``2**(1/8)``, at most 9 %
  more area) so that the number of partitions per epoch stays bounded; the region still has area
  strictly greater than the requested ``a_min_m2``.

Modules: value types and configuration in :mod:`locpriv.core.cloak.types`, the shared partition and
:func:`cloak_once` in :mod:`locpriv.core.cloak.partition` (all re-exported here); docs/algorithms.md
explains the choices.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections import Counter, OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import shapely
from numpy.typing import NDArray
from scipy.spatial import cKDTree

from locpriv.core.cloak.history import (
    companion_labels,
    joint_box_ranks,
    motion_groups,
    motion_scores,
    session_region,
    slack_shortfall,
    still_margins,
)
from locpriv.core.cloak.partition import (
    Partition,
    RegionCache,
    build_partition,
    cloak_once,
    shared_region,
)
from locpriv.core.cloak.session_records import (
    MAX_AUDITS,
    MAX_MEMBERS,
    AuditRecord,
    SessionRecord,
)
from locpriv.core.cloak.tile_regions import (
    point_tiles,
    tile_grid,
    tile_region,
    tile_side_m,
)
from locpriv.core.cloak.types import (
    CloakConfig,
    CloakOutcome,
    CloakParams,
    CloakRegion,
    check_params,
    round_a_min,
)
from locpriv.core.cloak.users import UserTable
from locpriv.errors import CloakInfeasible, CloakTimeout, Overloaded, UnknownUser
from locpriv.wire.messages import MAX_REGION_PARTS

__all__ = [
    "CloakConfig",
    "CloakOutcome",
    "CloakParams",
    "CloakRegion",
    "Cloaker",
    "cloak_once",
]

log = logging.getLogger(__name__)

STALE_RANK = 1e12
"""Added to the rank of a session member whose fix is too old to vouch for (ranks are metres
or below 0), so that every other member is chosen first."""

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(slots=True)
class _Motion:
    """How users ``slots`` of a :class:`UserTable` move, as of their latest reports, for
    choosing and bounding session members: velocity ``vx, vy`` (m/s; nan with one report),
    ``vmax`` the fastest each was seen to move (m/s), ``error_m`` her fix's accuracy (m; nan:
    unsaid), ``stayed_s`` how long she had stayed put when she sent her latest fix (0: she was
    moving) and ``still_s`` as of ``now``, taking her to stay put until a fix says otherwise (0
    for a mover, not her fix's age)."""

    vx: F64
    vy: F64
    vmax: F64
    error_m: F64
    stayed_s: F64
    still_s: F64

    @classmethod
    def of(cls, table: UserTable, slots: I64, now: float, unsaid_m: float) -> _Motion:
        """``unsaid_m``: the accuracy (m) taken for a report that gives none."""
        t, ot = table.t[slots], table.ot[slots]
        dt = t - ot
        ok = np.isfinite(ot) & (dt > 0)
        safe = np.where(ok, dt, 1.0)
        stayed = np.maximum(t - table.still_t[slots], 0.0)
        # velocity from the origin her earlier reports average to, its length less twice
        # what her fix may be off (a scatter read as motion would forecast her hundreds of
        # metres away; exact fixes, said or configured, keep it whole)
        dx, dy = table.x[slots] - table.ox[slots], table.y[slots] - table.oy[slots]
        err = np.nan_to_num(table.error_m[slots], nan=unsaid_m)
        length = np.hypot(dx, dy)
        keep = np.where(
            length > 0, np.maximum(length - 2 * err, 0.0) / np.where(length > 0, length, 1.0), 0.0
        )
        return cls(
            vx=np.where(ok, dx * keep / safe, np.nan),
            vy=np.where(ok, dy * keep / safe, np.nan),
            vmax=table.vmax[slots].copy(),
            error_m=table.error_m[slots].copy(),
            stayed_s=stayed,
            still_s=np.where(stayed > 0, now - table.still_t[slots], 0.0),
        )

    def take(self, rows: I64) -> _Motion:
        """These users' rows ``rows`` (copies)."""
        return _Motion(*(getattr(self, n)[rows] for n in _Motion.__slots__))

    def then(self, more: _Motion) -> _Motion:
        """These rows, then ``more``'s."""
        return _Motion(
            *(np.concatenate([getattr(self, n), getattr(more, n)]) for n in _Motion.__slots__)
        )


@dataclass(slots=True)
class _Rows:
    """The rows a session region is built from: snapshot rows ``idx`` (positions ``xy`` m,
    fix times ``t`` s, and their :class:`_Motion`)."""

    idx: I64
    xy: F64
    t: F64
    motion: _Motion

    @classmethod
    def of(cls, snap: _Snapshot, idx: I64) -> _Rows:
        xy = np.column_stack([snap.x[idx], snap.y[idx]])
        return cls(idx, xy, snap.t[idx].copy(), snap.motion.take(idx))

    def extended(self, snap: _Snapshot, extra: I64) -> _Rows:
        """These rows, then snapshot rows ``extra`` (appended: row numbers are kept)."""
        more = _Rows.of(snap, extra)
        return _Rows(
            np.concatenate([self.idx, extra]),
            np.concatenate([self.xy, more.xy]),
            np.concatenate([self.t, more.t]),
            self.motion.then(more.motion),
        )

    def hold_newest(
        self, snap: _Snapshot, table: UserTable, me: int, now: float, reach_m: float
    ) -> bool:
        """Put row ``me``, the requester, at her latest report if that lies more than
        ``reach_m`` (per axis) from her fix in the snapshot (returns whether it did). The
        epoch's snapshot is usually taken before the fix her request brought, and a region
        around the snapshot's fix with her margin (``reach_m``) holds her wherever a walker
        can have got since; one who moved further (a jump after a poor fix, a car) would not
        be in her own region. Only then: placed exactly at a fresh fix while the others lie
        anywhere within their margins of theirs, she stands out by her depth (the depth-rank
        guess among the candidates 1.52-1.65x chance in ``tests/test_session_joint_box.py``'s
        towns, against 1.36-1.63x). Her margin is left as the snapshot's fix gives it."""
        slot = snap.slots[self.idx[me] : self.idx[me] + 1]
        s = int(slot[0])
        if not table.t[s] > self.t[me]:
            return False
        dx = abs(table.x[s] - self.xy[me, 0])
        dy = abs(table.y[s] - self.xy[me, 1])
        if max(dx, dy) <= reach_m:
            return False
        self.xy[me] = (table.x[s], table.y[s])
        self.t[me] = table.t[s]
        own = _Motion.of(table, slot, now, snap.unsaid_m)
        for name in _Motion.__slots__:
            getattr(self.motion, name)[me] = getattr(own, name)[0]
        return True


class _Snapshot:
    """Positions of all current users at one epoch boundary, with shared sort orders."""

    def __init__(
        self, table: UserTable, epoch: int, now: float, world: F64, unsaid_m: float
    ) -> None:
        self.epoch = epoch
        self.time = now
        self.unsaid_m = unsaid_m
        """The accuracy (m) taken for a report that gives none (:meth:`Cloaker._unsaid_m`)."""
        self.slots = table.active_slots()
        self.gen = table.gen[self.slots].copy()
        self.x = table.x[self.slots].copy()
        self.y = table.y[self.slots].copy()
        self.t = table.t[self.slots].copy()
        self.motion = motion = _Motion.of(table, self.slots, now, unsaid_m)
        self.vx, self.vy = motion.vx, motion.vy
        self.vmax, self.error_m = motion.vmax, motion.error_m
        self.stayed_s, self.still_s = motion.stayed_s, motion.still_s
        self._fast: dict[float, int] = {}
        self.n = len(self.slots)
        # index into the snapshot by table slot (-1: not in snapshot)
        self.index_of_slot = np.full(len(table.x), -1, dtype=np.int64)
        self.index_of_slot[self.slots] = np.arange(self.n, dtype=np.int64)
        self.order_x = np.argsort(self.x)
        self.order_y = np.argsort(self.y)
        b = world.copy()
        if self.n:  # users outside the extent double it about its centre (no edge on a user)
            x0, x1 = float(self.x[self.order_x[0]]), float(self.x[self.order_x[-1]])
            y0, y1 = float(self.y[self.order_y[0]]), float(self.y[self.order_y[-1]])
            cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
            hw, hh = (b[2] - b[0]) / 2, (b[3] - b[1]) / 2
            while not (cx - hw <= x0 and x1 <= cx + hw and cy - hh <= y0 and y1 <= cy + hh):
                hw, hh = 2 * hw, 2 * hh
            b = np.array([cx - hw, cy - hh, cx + hw, cy + hh])
        self.bounds = (float(b[0]), float(b[1]), float(b[2]), float(b[3]))
        self.partitions: OrderedDict[tuple[int, float], _CachedPartition] = OrderedDict()
        self._tree: cKDTree | None = None

    def index(self, table: UserTable, slot: int) -> int:
        """Snapshot index of the user now in ``slot``, or -1 if it joined after the snapshot."""
        if slot >= len(self.index_of_slot):
            return -1
        i = int(self.index_of_slot[slot])
        if i < 0 or self.gen[i] != table.gen[slot]:
            return -1
        return i

    def fast_users(self, speed_m_s: float) -> int:
        """How many of the snapshot's users have been seen moving faster than ``speed_m_s``
        (a count, not a share: users an adversary adds who stand still cannot lower it)."""
        got = self._fast.get(speed_m_s)
        if got is None:
            got = int(np.count_nonzero(self.vmax > speed_m_s))
            self._fast[speed_m_s] = got
        return got

    def knn_area(self, i: int, k: int) -> float:
        """Area (m²) of the smallest disc around user ``i`` holding ``k`` users of the snapshot."""
        if self._tree is None:
            self._tree = cKDTree(np.column_stack([self.x, self.y]))
        d, _ = self._tree.query((self.x[i], self.y[i]), k=[k])
        return math.pi * float(d[0]) ** 2


@dataclass(slots=True)
class _CachedPartition:
    part: Partition
    regions: RegionCache
    a_min_m2: float  # the rung it was built with


@dataclass(slots=True)
class _Pending:
    request_id: Hashable
    user_id: str
    params: CloakParams
    deadline: float
    reason: str
    not_before: float = -math.inf
    """A session request waiting for its members' fresh reports is not tried before this
    (s) unless every one it waits for has arrived (:attr:`wanted` empty)."""
    wanted: set[str] = field(default_factory=set)
    """Members whose fresh report it still waits for."""
    arrived: float = -math.inf
    """When the last of :attr:`wanted` arrived (s)."""


@dataclass(slots=True)
class _Session:
    """A user's historical anonymity set (see :mod:`locpriv.core.cloak.history`)."""

    members: list[str]
    k: int
    session_s: float
    last: float
    seed: int
    count: int = 0
    pool: int = 0
    audits: list[
        tuple[float, tuple[float, float, float, float], dict[str, tuple[float, float, float]]]
    ] = field(default_factory=list)
    """Regions answered from dead-reckoned positions, not yet checked for every member: (time
    answered, box, member -> her fix (x, y, t) then)."""
    rev: int = 0
    """The cloaker's :attr:`Cloaker.revision` at this session's last change."""


@dataclass(slots=True)
class Revision:
    """A counter of session changes, shared by the cloakers that hold it."""

    value: int = 0


_CARRIED = ("k", "session_s", "last", "seed", "count", "pool")
"""The fields of a :class:`_Session` that a :class:`SessionRecord` carries besides its user,
members and audits (same names in both)."""


class Cloaker:
    """Spatio-temporal cloaking over moving users (sans-I/O; the caller supplies ``now`` in s).

    Not thread-safe; call from one task. See the module docstring for the epoch model. ``rng``
    offsets session grids (historical k-anonymity); by default seeded from OS entropy.
    """

    def __init__(
        self,
        config: CloakConfig,
        *,
        rng: np.random.Generator | None = None,
        phase: float | None = None,
        revision: Revision | None = None,
    ) -> None:
        self.config = config
        self._rng = rng if rng is not None else np.random.default_rng()
        self._sessions: dict[str, _Session] = {}
        self.table = UserTable()
        self._world = np.asarray(config.world, dtype=np.float64)
        # where the partition's grids of split positions sit inside their cells: a secret
        # fixed across epochs, so the grids do not line up with round coordinates; drawn here
        # unless given (in [0.05, 0.95]: every anonymizer of a deployment derives the same one
        # from the shared token key, so shards and restarts cut the same regions)
        drawn = float(self._rng.uniform(0.05, 0.95))
        self._phase = drawn if phase is None else min(0.95, max(0.05, float(phase)))
        self._snap: _Snapshot | None = None
        self._pending: dict[Hashable, _Pending] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._retry_epoch: int | None = None  # last epoch whose pending were retried
        self._next_expiry = math.inf
        self._fix_wanted: list[str] = []  # members to ask for a fresh report (not yet taken)
        self._asked: dict[str, float] = {}  # member -> when she was last asked
        self._waiting_on: dict[str, set[Hashable]] = {}  # member -> requests waiting on her
        self.session_counts: Counter[str] = Counter()
        """What sessions did, for benchmarks and operators: ``thin`` and ``worst_case``,
        regions answered from thin or from worst-case margins; ``short``, the worst-case ones
        answered because fewer than ``k + session_slack`` members were left (no thin region
        could be built; with a slack only); ``audit_dropped``, members the self-audit found
        outside a thin region they were counted in; ``rekeys``, sessions restarted with a
        fresh set (``CloakConfig.session_rekey_factor``); ``fix_asked``, members asked for a fresh
        report, and ``fix_waits``, session requests that waited for such reports
        (``CloakConfig.session_fresh_s``); ``companions``, thin regions given up (the
        worst-case region answers instead) because members who move together (``history.
        companion_labels``) would have taken more than the slack out of them at once."""
        self.revision = revision if revision is not None else Revision()
        """Grows whenever a session may have changed (a request of one, a set that starts,
        shrinks or ends, an audit); cloakers may share one (every tile's, in
        :class:`~locpriv.core.cloak.tiled.TileCloakers`). A driver that keeps sessions over a
        crash writes those changed after the revision it last wrote
        (:meth:`export_sessions`) before it publishes an answer made after a change."""

    # ----------------------------------------------------------------- users
    def update(
        self,
        user_id: str,
        x_m: float,
        y_m: float,
        now: float,
        accuracy_m: float | None = None,
    ) -> list[CloakOutcome]:
        """Absorb one location update (metres, seconds; ``accuracy_m``: how far the fix may
        lie from her device, as her device says, None if it does not: sessions then assume
        ``session_fix_error_m``); returns outcomes it completed.

        Raises ValueError for non-finite coordinates or a negative or non-finite accuracy.
        """
        if not (math.isfinite(x_m) and math.isfinite(y_m)):
            raise ValueError("coordinates must be finite")
        if accuracy_m is not None and not (math.isfinite(accuracy_m) and accuracy_m >= 0):
            raise ValueError("accuracy_m must be finite and >= 0")
        self.table.update(user_id, x_m, y_m, now, accuracy_m)
        if self._waiting_on:
            self._arrived(user_id, now)
        if self._pending:
            return self._tick(now)
        return []

    def update_many(
        self,
        user_ids: Sequence[str],
        xy_m: F64,
        now: float,
        accuracy_m: F64 | None = None,
    ) -> list[CloakOutcome]:
        """Vectorised :meth:`update`; ``xy_m`` has shape ``(len(user_ids), 2)``,
        ``accuracy_m`` ``(len(user_ids),)`` (nan: not said) or None (none said).

        Raises ValueError for a wrong shape, non-finite coordinates or a negative accuracy
        (then nothing is stored).
        """
        xy_m = np.asarray(xy_m, dtype=np.float64)
        if not np.isfinite(xy_m).all():
            raise ValueError("coordinates must be finite")
        if accuracy_m is not None:
            accuracy_m = np.asarray(accuracy_m, dtype=np.float64)
            if accuracy_m.shape != (len(user_ids),) or (accuracy_m < 0).any():
                raise ValueError("accuracy_m must have one value >= 0 (or nan) per user")
            accuracy_m = np.where(np.isinf(accuracy_m), np.nan, accuracy_m)
        self.table.update_many(user_ids, xy_m, now, accuracy_m)
        if self._waiting_on:
            for uid in self._waiting_on.keys() & set(user_ids):
                self._arrived(uid, now)
        if self._pending:
            return self._tick(now)
        return []

    def remove(self, user_id: str) -> None:
        """Forget a user (it stays in the current epoch's snapshot, which describes the past)."""
        self.table.remove(user_id)

    def __len__(self) -> int:
        return len(self.table)

    # -------------------------------------------------------------- requests
    def validate(self, params: CloakParams | None) -> CloakParams:
        """Return ``params`` (or the configured default); raise ConfigError if out of bounds."""
        p = self.config.default if params is None else params
        check_params(self.config, p)
        return p

    def request(
        self, request_id: Hashable, user_id: str, params: CloakParams | None, now: float
    ) -> CloakOutcome | None:
        """Cloak ``user_id`` now; ``None`` means pending (answered by update()/on_deadline()).

        Raises :class:`locpriv.errors.ConfigError` if ``params`` is outside the operator bounds.
        """
        p = self.validate(params)
        self.cancel(request_id)
        slot = self.table.ids.get(user_id)
        if slot is None:
            return CloakOutcome(request_id, None, UnknownUser("no current location for this user"))
        wanted = self._ask_fixes(user_id, p, now)
        if wanted and len(self._pending) < self.config.max_pending:
            self._wait_for(request_id, user_id, p, now, wanted)
            return None
        snap = self._snapshot(now)
        region, reason = self._attempt(snap, slot, p, user_id, now)
        if region is not None:
            return CloakOutcome(request_id, region, None)
        if p.max_delay_s <= 0:
            return CloakOutcome(request_id, None, CloakInfeasible(reason))
        if len(self._pending) >= self.config.max_pending:
            return CloakOutcome(
                request_id, None, Overloaded("too many pending cloak requests; retry later")
            )
        self._enqueue(_Pending(request_id, user_id, p, now + p.max_delay_s, reason))
        return None

    def take_fix_requests(self) -> list[str]:
        """The members to ask for a fresh location report now (each once; the list empties):
        those of sessions that went on since the last call, whose last report is older than
        ``session_fresh_s`` and who were not asked within ``session_fix_every_s``. Their
        requests wait for the reports (answered by :meth:`update` or :meth:`on_deadline`)."""
        out, self._fix_wanted = self._fix_wanted, []
        return out

    def _ask_fixes(self, user_id: str, p: CloakParams, now: float) -> set[str]:
        """The members a request of ``user_id``'s live session should wait for (empty: none,
        or not a session that goes on); queues those not asked recently for
        :meth:`take_fix_requests`."""
        cfg = self.config
        if cfg.session_fresh_s <= 0 or cfg.session_fix_wait_s <= 0 or p.max_delay_s <= 0:
            return set()
        if not self._goes_on(user_id, p, now):
            return set()
        s = self._sessions[user_id]
        tab, asked, wanted = self.table, self._asked, set()
        for u in s.members:
            slot = tab.ids.get(u)
            if u == user_id or slot is None or now - float(tab.t[slot]) <= cfg.session_fresh_s:
                continue
            when = asked.get(u)
            if when is None or now - when >= cfg.session_fix_every_s:
                asked[u] = now
                self._fix_wanted.append(u)
                self.session_counts["fix_asked"] += 1
                wanted.add(u)
            elif now - when < cfg.session_fix_wait_s and when > float(tab.t[slot]):
                wanted.add(u)  # asked moments ago for another request: her report is coming
        if len(asked) > 2 * len(tab) + 1024:
            self._asked = {u: t for u, t in asked.items() if now - t < cfg.session_fix_every_s}
        return wanted

    def _goes_on(self, user_id: str, p: CloakParams, now: float) -> bool:
        """Whether a request of ``user_id`` with ``p`` now goes on with her session."""
        s = self._sessions.get(user_id)
        return s is not None and s.k == p.k and now - s.last <= max(s.session_s, p.session_s)

    def _wait_for(
        self, request_id: Hashable, user_id: str, p: CloakParams, now: float, wanted: set[str]
    ) -> None:
        """Queue a session request until ``wanted`` report (or ``session_fix_wait_s``)."""
        wait = min(self.config.session_fix_wait_s, p.max_delay_s / 2)
        why = "waiting for the session members' fresh reports"
        pend = _Pending(request_id, user_id, p, now + p.max_delay_s, why, now + wait, wanted)
        for u in wanted:
            self._waiting_on.setdefault(u, set()).add(request_id)
        self.session_counts["fix_waits"] += 1
        self._enqueue(pend)

    def _arrived(self, user_id: str, now: float) -> None:
        """A report of ``user_id`` came in: requests waiting for it wait for one fewer."""
        for rid in self._waiting_on.pop(user_id, ()):
            pend = self._pending.get(rid)
            if pend is not None and user_id in pend.wanted:
                pend.wanted.discard(user_id)
                if not pend.wanted:
                    pend.arrived = now

    def _enqueue(self, pend: _Pending) -> None:
        request_id = pend.request_id
        self._pending[request_id] = pend
        deadline = pend.deadline
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, request_id))
        if len(self._heap) > 4 * len(self._pending) + 1024:  # drop entries of finished requests
            self._heap = [
                (q.deadline, i, q.request_id) for i, q in enumerate(self._pending.values())
            ]
            heapq.heapify(self._heap)
        if len(self._waiting_on) > 4 * len(self._pending) + 1024:  # members who never answered
            self._waiting_on = {}
            for q in self._pending.values():
                for u in q.wanted:
                    self._waiting_on.setdefault(u, set()).add(q.request_id)

    def prepare(self, now: float) -> list[CloakOutcome]:
        """Take the snapshot of ``now``'s epoch if not yet taken and pre-build the partitions
        the previous epoch used, so that requests do not pay for them; also retries pending
        requests (returns the outcomes it completed). Optional: call it just after each epoch
        boundary (e.g. from a timer); without it the first request of an epoch does the work.
        """
        prev = self._snap
        keys = list(prev.partitions) if prev is not None else []
        snap = self._snapshot(now)
        if snap is not prev:
            for k, a_min in keys:
                self._partition(snap, k, a_min)
        return self._tick(now) if self._pending else []

    def cancel(self, request_id: Hashable) -> None:
        """Drop a pending request (no outcome will be produced); unknown ids are ignored."""
        self._pending.pop(request_id, None)

    def pending(self) -> int:
        """Number of pending requests."""
        return len(self._pending)

    def on_deadline(self, now: float) -> list[CloakOutcome]:
        """Forget stale users, retry pending requests in a new epoch, time out overdue ones."""
        if now >= self._next_expiry:
            self.table.expire(now, self.config.user_ttl_s)
            oldest = self.table.oldest_update()
            self._next_expiry = math.inf if oldest is None else oldest + self.config.user_ttl_s
        out = self._tick(now) if self._pending else []
        while self._heap and self._heap[0][0] <= now:
            _, _, rid = heapq.heappop(self._heap)
            pend = self._pending.get(rid)
            if pend is not None and pend.deadline <= now:
                del self._pending[rid]
                out.append(CloakOutcome(rid, None, CloakTimeout(pend.reason)))
        return out

    def next_deadline(self) -> float | None:
        """Time (s) at which :meth:`on_deadline` should be called next, or None if never."""
        while self._heap and self._heap[0][2] not in self._pending:
            heapq.heappop(self._heap)
        cands = [self._next_expiry]
        if self._heap:
            cands.append(self._heap[0][0])
            cands.append(self._next_epoch_start())
        if self.table.ids and math.isinf(self._next_expiry):
            oldest = self.table.oldest_update()
            if oldest is not None:
                self._next_expiry = oldest + self.config.user_ttl_s
                cands.append(self._next_expiry)
        best = min(cands)
        return None if math.isinf(best) else best

    # -------------------------------------------------------------- internals
    def _epoch(self, now: float) -> int:
        return math.floor(now / self.config.epoch_s)

    def _next_epoch_start(self) -> float:
        e = self._snap.epoch + 1 if self._snap is not None else 0
        return e * self.config.epoch_s

    def _snapshot(self, now: float) -> _Snapshot:
        e = self._epoch(now)
        snap = self._snap
        if snap is None or e > snap.epoch:
            self.table.expire(now, self.config.user_ttl_s)
            snap = _Snapshot(self.table, e, now, self._world, self._unsaid_m())
            self._snap = snap
            log.debug("snapshot epoch=%d users=%d", e, snap.n)
        return snap

    def _tick(self, now: float) -> list[CloakOutcome]:
        """Retry pending requests once per new epoch; returns completed outcomes."""
        e = self._epoch(now)
        if self._retry_epoch is not None and e <= self._retry_epoch:
            return []
        self._retry_epoch = e
        snap = self._snapshot(now)
        out: list[CloakOutcome] = []
        for rid, pend in list(self._pending.items()):
            if pend.deadline < now:
                continue  # on_deadline reports it
            if now < pend.not_before and (pend.wanted or snap.time < pend.arrived):
                continue  # her members' fresh reports are still coming (or not in the snapshot)
            slot = self.table.ids.get(pend.user_id)
            if slot is None:
                pend.reason = "requesting user was forgotten (silent longer than the TTL)"
                continue
            region, reason = self._attempt(snap, slot, pend.params, pend.user_id, now)
            if region is not None:
                del self._pending[rid]
                out.append(CloakOutcome(rid, region, None))
            else:
                pend.reason = reason
        return out

    def _partition(self, snap: _Snapshot, k: int, a_min: float) -> _CachedPartition:
        key = (k, round_a_min(a_min, self.config.a_min_step))
        cp = snap.partitions.get(key)
        if cp is None:
            part = build_partition(
                snap.x,
                snap.y,
                snap.t,
                snap.bounds,
                k=k,
                a_min_m2=key[1],
                order_x=snap.order_x,
                order_y=snap.order_y,
                phase=self._phase,
            )
            cp = _CachedPartition(part, RegionCache(), key[1])
            snap.partitions[key] = cp
            if len(snap.partitions) > self.config.max_partitions:
                snap.partitions.popitem(last=False)
        else:
            snap.partitions.move_to_end(key)
        return cp

    def _attempt(
        self, snap: _Snapshot, slot: int, p: CloakParams, user_id: str, now: float
    ) -> tuple[CloakRegion | None, str]:
        i = snap.index(self.table, slot)
        if i < 0:
            return None, "waiting for the next snapshot epoch (user joined after the snapshot)"
        if p.session_s > 0:
            session = self._live_session(user_id, p, now)
            if session is not None:
                got, why = self._session_attempt(snap, i, session, p, now)
                factor = self.config.session_rekey_factor
                settled = session.count > self.config.session_shrink_requests  # down to k
                if (
                    factor <= 0
                    or not (got is None or settled)
                    or not self._rekey(snap, i, p, got, factor)
                ):
                    return got, why
                # re-keyed (opt-in, weakens the guarantee): a fresh set from the current leaf
                del self._sessions[user_id]
                self.revision.value += 1
                self.session_counts["rekeys"] += 1
        region, reason, held = self._shared_attempt(snap, i, p)
        if region is not None and p.session_s > 0:
            if held is None:  # the region holds her whole leaf
                leaf_of = self._partition(snap, p.k, p.a_min_m2).part.leaf_of
                held = np.flatnonzero(leaf_of == leaf_of[i])
            # a new session: its anonymity set is the shared region's members, and already
            # its first region is a session region (members kept off the edges)
            seed = int(self._rng.integers(2**63))
            cfg = self.config
            k_pool = cfg.session_pool_factor * p.k
            pools = [held]
            if k_pool > p.k and snap.n >= k_pool:
                big = self._partition(snap, k_pool, p.a_min_m2).part.leaf_of
                pools.insert(0, np.flatnonzero(big == big[i]))
            k_cand = max(cfg.session_candidate_factor, cfg.session_pool_factor) * p.k
            if k_cand > k_pool and snap.n >= k_cand and cfg.session_horizon_s > 0:
                # the group of the candidates that moves like her: a split of the leaf for
                # k_cand that does not depend on who asks
                big = self._partition(snap, k_cand, p.a_min_m2).part.leaf_of
                cands = np.flatnonzero(big == big[i])
                v = np.column_stack([snap.vx[cands], snap.vy[cands]])
                xy = np.column_stack([snap.x[cands], snap.y[cands]])
                g = motion_groups(
                    xy,
                    v,
                    snap.still_s[cands],
                    k_pool,
                    horizon_s=cfg.session_horizon_s,
                    forecast_s=cfg.session_forecast_s,
                )
                cands = cands[g == g[int(np.flatnonzero(cands == i)[0])]]
                pools.insert(0, cands)
            if cfg.session_tile_factor > 0:
                pools = [self._tile_set(pools, i, p.k, seed)]
            for members in pools:
                ids = [self.table.slot_ids[int(snap.slots[j])] for j in members]
                session = _Session(
                    members=[u for u in ids if u is not None],
                    k=p.k,
                    session_s=p.session_s,
                    last=now,
                    seed=seed,
                    pool=len(members),
                )
                self._sessions[user_id] = session
                first, _ = self._session_attempt(snap, i, session, p, now)
                if first is not None:
                    return first, ""
        return region, reason

    def _tile_set(self, pools: list[I64], i: int, k: int, seed: int) -> I64:
        """A session of tiles' fixed set: row ``i``, the requester, and ``k - 1 +
        session_tile_spare`` others drawn at random (from a stream of the session's ``seed``)
        from the first of ``pools`` (snapshot rows, best first; each a group or leaf that
        every member of it gets, whoever asks) that holds ``k`` users, or all of it."""
        pool = next((g for g in pools if len(g) >= k), pools[-1])
        others = pool[pool != i]
        want = k - 1 + self.config.session_tile_spare
        drawn = np.random.default_rng([seed, 2]).permutation(others)[:want]
        out: I64 = np.concatenate([[i], drawn]).astype(np.int64)
        return out

    def _rekey(
        self, snap: _Snapshot, i: int, p: CloakParams, got: CloakRegion | None, factor: float
    ) -> bool:
        """Whether a session whose region came out as ``got`` should start afresh: none was
        possible, or (once its set is down to k) it exceeds ``factor`` times the requester's
        shared region now."""
        if got is None:
            return True
        shared, _, _ = self._shared_attempt(snap, i, p)
        return shared is not None and got.area_m2 > factor * shared.area_m2

    def export_sessions(self, now: float, since: int = -1) -> list[SessionRecord]:
        """The sessions still live at ``now`` that changed after revision ``since`` (-1:
        all), to carry over a restart or a crash (:mod:`~locpriv.core.cloak.session_records`):
        audits are run first against the fixes this process has, and those still pending go
        with the record (the members' fixes before each thin region), for the next process to
        run at their next fixes."""
        out: list[SessionRecord] = []
        for user, s in self._sessions.items():
            if s.rev <= since or now - s.last > s.session_s:
                continue
            if s.audits:
                self._audit(s)
            # within the record's bounds (built unvalidated, for speed), always on the safe
            # side: a member left out is a set that lost her, an audit never is
            members, pending = s.members, s.audits
            if len(members) > MAX_MEMBERS or len(pending) > MAX_AUDITS:
                cut = max(0, len(pending) - MAX_AUDITS)  # the oldest audits go
                dropped = {u for _t, _b, fixes in pending[:cut] for u in fixes}
                members = [u for u in members[:MAX_MEMBERS] if u not in dropped]
                kept = set(members)
                pending = [
                    (t, box, {u: f for u, f in fixes.items() if u in kept})
                    for t, box, fixes in pending[cut:]
                ]
            audits = [
                AuditRecord.model_construct(t=t, box=box, fixes=dict(fixes))
                for t, box, fixes in pending
                if fixes
            ]
            carried = {f: getattr(s, f) for f in _CARRIED} | {"pool": min(s.pool, MAX_MEMBERS)}
            out.append(
                SessionRecord.model_construct(
                    user=user, members=list(members), audits=audits, **carried
                )
            )
        return out

    def restore_sessions(self, records: Sequence[SessionRecord], now: float) -> int:
        """Go on with the sessions of a previous process (:meth:`export_sessions`); those
        ended by ``now`` are dropped, a user's live session here is kept. Returns how many
        were restored (``session_counts["restored"]``)."""
        got = 0
        for r in records:
            if now - r.last > r.session_s or r.user in self._sessions:
                continue
            carried = r.model_dump(include=set(_CARRIED))
            members = list(dict.fromkeys(r.members))
            known = set(members)
            audits = [
                (a.t, a.box, {u: f for u, f in a.fixes.items() if u in known}) for a in r.audits
            ]
            self._sessions[r.user] = _Session(
                members=members,
                audits=[a for a in audits if a[2]],
                rev=self.revision.value + 1,
                **carried,
            )
            got += 1
        self.session_counts["restored"] += got
        if got:
            self.revision.value += 1
        return got

    def export_speeds(self) -> dict[str, float]:
        """Users whose seen speed widens their session margins or switches the spare on
        (faster than ``session_speed_m_s / max(1, session_speed_factor)``), with it (m/s)."""
        cfg = self.config
        return self.table.fast_users(cfg.session_speed_m_s / max(1.0, cfg.session_speed_factor))

    def restore_speeds(self, speeds: Mapping[str, float], now: float) -> None:
        """Speeds a previous process saw (:meth:`export_speeds`), each given to its user at
        her first report here, or forgotten after ``user_ttl_s`` without one."""
        self.table.know_speeds(speeds, now)

    def _live_session(self, user_id: str, p: CloakParams, now: float) -> _Session | None:
        """The user's session if it goes on (same k, last request within ``session_s``)."""
        if len(self._sessions) > 4 * self.config.max_pending + 1024:
            self._sessions = {
                u: s for u, s in self._sessions.items() if now - s.last <= s.session_s
            }
        session = self._sessions.get(user_id)
        if session is None:
            return None
        if session.k != p.k or now - session.last > max(session.session_s, p.session_s):
            del self._sessions[user_id]
            self.revision.value += 1
            return None
        session.session_s = p.session_s
        return session

    def _session_attempt(
        self, snap: _Snapshot, i: int, session: _Session, p: CloakParams, now: float
    ) -> tuple[CloakRegion | None, str]:
        cfg = self.config
        self.revision.value += 1  # its last request changes at least
        session.rev = self.revision.value
        if session.audits:
            self._audit(session)
        if cfg.session_tile_factor > 0:
            return self._tile_attempt(snap, i, session, p, now)
        rows, names, got, age = self._member_rows(snap, i, session, now)
        idx = got.idx
        me = rows.index(i)
        xy, mo = got.xy, got.motion
        rng = np.random.default_rng(session.seed)  # the same grid for the whole session
        # the requester's drawn margin, per request, from a stream of its own
        draw = np.random.default_rng([session.seed, session.count, 1])
        # the set shrinks from its pool to k over session_shrink_requests answered requests
        steps = max(1, self.config.session_shrink_requests)
        # (the first region covers the whole pool: choosing part of it around her would centre
        # the region on her)
        want = session.pool - -((session.pool - session.k) * session.count // -steps)
        m_base = max(session.k, min(want, len(rows)))
        spare = cfg.session_spare
        if snap.fast_users(cfg.session_speed_m_s) < cfg.session_spare_fast_users:
            spare = 0  # nobody here moves faster than the margins assume
        # members whose fixes may lie beyond any margin are chosen only where a region fits
        # them anyway (kept as bystanders), never to fill a region
        loose = int(self._loose(self._fix_error(mo), me).sum())
        vouched = len(rows) - loose
        m = max(session.k, min(max(m_base, session.k + spare), vouched))
        scale = self._scale(mo)
        vel = np.column_stack([mo.vx, mo.vy])
        score = None
        if cfg.session_horizon_s > 0:
            score = motion_scores(
                xy,
                vel,
                mo.still_s,
                me,
                horizon_s=cfg.session_horizon_s,
                forecast_s=cfg.session_forecast_s,
            )
            if cfg.session_joint_box and m < len(rows):  # else every row is chosen anyway
                score = joint_box_ranks(
                    xy,
                    vel,
                    mo.still_s,
                    me,
                    score,
                    rng=np.random.default_rng([session.seed, session.count]),
                    horizon_s=cfg.session_horizon_s,
                    forecast_s=cfg.session_forecast_s,
                    limit=m + max(cfg.session_slack, 0),
                    scale=scale,
                )
        worst, stale = self._worst(mo, age, me)
        if stale.any():  # not vouched for: chosen last, kept only where a region covers them
            if score is None:
                score = np.hypot(xy[:, 0] - xy[me, 0], xy[:, 1] - xy[me, 1])
            score = score + np.where(stale, STALE_RANK, 0.0)
        margin = worst.copy()
        margin[me] = max(float(worst[me]), self._requester_floor(worst, me, draw, stale))
        poly, chosen, reason = session_region(
            xy, me, m, p.a_min_m2, p.a_max_m2, rng, margin_m=margin, score=score
        )
        at, thin = xy, False
        slack = cfg.session_slack
        if slack > 0 and len(rows) - int(stale.sum()) >= session.k + slack:
            # thin margins around dead-reckoned positions, k + slack members (statistical)
            guess, drift = self._thin(
                mo, xy, age, worst, stale=stale, k=session.k, me=me, draw=draw
            )
            m_thin = max(session.k + slack, min(m_base + slack, vouched))
            thin_got = session_region(
                guess,
                me,
                m_thin,
                p.a_min_m2,
                p.a_max_m2,
                np.random.default_rng(session.seed),
                margin_m=drift,
                score=score,
            )
            chosen_thin = thin_got[1]
            # the slack is a bet on members leaving one by one; companions leave together, so
            # it is counted in parties, and a thin region they could take more than the slack
            # out of is not built: the worst-case region answers (grown by the members they
            # would take out instead, its box was centred on the requester more often:
            # tests/test_session_joint_box.py)
            if thin_got[0] is not None and slack_shortfall(
                companion_labels(
                    guess[chosen_thin], vel[chosen_thin], mo.stayed_s[chosen_thin] > 0
                ),
                int(np.flatnonzero(chosen_thin == me)[0]),
                session.k,
                slack,
            ):
                self.session_counts["companions"] += 1
                thin_got = (None, chosen_thin, "companions")
            if thin_got[0] is not None and (poly is None or thin_got[0].area < poly.area):
                poly, chosen, reason = thin_got
                at, margin, thin = guess, drift, True
        session.last = now  # a session lasts while requests keep coming, answered or not
        if poly is None:
            return None, (
                f"{reason}; the session ends after {session.session_s:g} s without requests"
            )
        x0, y0, x1, y1 = poly.bounds
        inside = (snap.x >= x0) & (snap.x <= x1) & (snap.y >= y0) & (snap.y <= y1)
        inside[i] = True  # at her latest fix (a session region holds the requester)
        if cfg.session_keep_bystanders:
            if session.count == 0 and cfg.session_adopt:
                # the first region: every user it covers with her margin joins the set (each
                # is in the intersection so far), not only the group it was built around
                extra = np.setdiff1d(np.flatnonzero(inside), idx)
                if len(extra):  # appended: the rows of ``chosen`` keep their indices
                    names = names + [self.table.slot_ids[int(snap.slots[j])] or "" for j in extra]
                    age = np.concatenate([age, max(now, snap.time) - snap.t[extra] + cfg.epoch_s])
                    got = got.extended(snap, extra)
                    xy, mo = got.xy, got.motion
                    margin, stale = self._worst(mo, age, me)
                    at = xy
                    if thin:  # the adopted stale too: their worst-case box, not a thin one
                        at, margin = self._thin(
                            mo, xy, age, margin, stale=stale, k=session.k, me=me, draw=draw
                        )
            # every member the region covers with her margin stays (the chosen ones do)
            held = (
                (at[:, 0] - margin >= x0)
                & (at[:, 0] + margin <= x1)
                & (at[:, 1] - margin >= y0)
                & (at[:, 1] + margin <= y1)
            )
            held[chosen] = True
            chosen = np.flatnonzero(held)
        session.members = [names[int(c)] for c in chosen]
        if thin:  # to be checked against each member's next update
            session.audits.append(
                (
                    max(now, snap.time),
                    (x0, y0, x1, y1),
                    {
                        names[int(c)]: (float(xy[c, 0]), float(xy[c, 1]), float(got.t[c]))
                        for c in chosen
                    },
                )
            )
        session.last = now
        session.count += 1
        self.session_counts["thin" if thin else "worst_case"] += 1
        if not thin and slack > 0 and len(rows) < session.k + slack:
            self.session_counts["short"] += 1
        region = CloakRegion(
            poly, float(poly.area), int(inside.sum()), float(got.t[chosen].min()), snap.time
        )
        return region, ""

    def _member_rows(
        self, snap: _Snapshot, i: int, session: _Session, now: float
    ) -> tuple[list[int], list[str], _Rows, F64]:
        """The snapshot rows of ``session``'s members that the snapshot knows, the requester
        (row ``i``) among them even if she joined it only now: ``(rows, their user ids, their
        :class:`_Rows`, each fix's age in s)``, the requester held at her latest report where
        it lies beyond her margin (:meth:`_Rows.hold_newest`)."""
        cfg = self.config
        rows: list[int] = []
        names: list[str] = []
        for uid in session.members:
            slot = self.table.ids.get(uid)
            j = -1 if slot is None else snap.index(self.table, slot)
            if j >= 0:
                rows.append(j)
                names.append(uid)
        if i not in rows:  # the requester is always a member; add her back if she was new
            rows.append(i)
            names.append(self.table.slot_ids[int(snap.slots[i])] or "")
        me = rows.index(i)
        got = _Rows.of(snap, np.asarray(rows, dtype=np.int64))
        age = max(now, snap.time) - got.t + cfg.epoch_s  # margins from the snapshot's fixes
        reach, _ = self._worst(got.motion, age, me)
        got.hold_newest(snap, self.table, me, max(now, snap.time), float(reach[me]))
        return rows, names, got, age

    def _tile_attempt(
        self, snap: _Snapshot, i: int, session: _Session, p: CloakParams, now: float
    ) -> tuple[CloakRegion | None, str]:
        """A session region of tiles (``session_tile_factor`` > 0;
        :mod:`~locpriv.core.cloak.tile_regions`): every tile of the session's grid within a
        member's worst-case margin (:meth:`_worst`; the requester's at least another member's,
        drawn: :meth:`_requester_floor`) of her fix. More tiles than a wire region carries
        (``MAX_REGION_PARTS + 1``, 64; large k) give way to their box, a grid box too. The set
        never grows; members the snapshot no longer knows leave it, members whose fixes may
        lie farther than ``session_margin_m`` (:meth:`_loose`) leave it, and while the region
        would reach ``a_max_m2`` so do members with the widest margins, those whose fixes are
        too old to vouch for (:meth:`_worst`) first; never below ``k``."""
        cfg = self.config
        rows, names, got, age = self._member_rows(snap, i, session, now)
        me = rows.index(i)
        margin, stale = self._worst(got.motion, age, me)
        draw = np.random.default_rng([session.seed, session.count, 1])
        margin[me] = max(float(margin[me]), self._requester_floor(margin, me, draw, stale))
        grid = tile_grid(
            tile_side_m(p.a_min_m2, cfg.session_tile_factor, cfg.session_tile_min_m),
            np.random.default_rng([session.seed, 3]),  # the same offset for the whole session
        )
        # members whose fixes may lie beyond any margin are not vouched for and leave the set
        # (covering them would let one who claims a poor fix inflate every region holding
        # her); while the region would reach a_max_m2, members leave largest margin first,
        # those whose fixes are too old to vouch for before the others (one who makes herself
        # seem fast, to widen her margins, cannot wedge a session); never below k
        keep = ~self._loose(self._fix_error(got.motion), me)
        if int(keep.sum()) < session.k:
            keep[:] = True
        order = np.lexsort((-margin, ~stale))  # stale first, then by margin, widest first
        droppable = [int(r) for r in order if keep[r] and r != me]
        hi = p.a_max_m2 * (1 - 1e-6)
        session.last = now  # a session lasts while requests keep coming, answered or not
        cap = MAX_REGION_PARTS + 1  # more tiles than a wire region carries: their box
        while True:
            got_region = tile_region(got.xy[keep], margin[keep], grid, cap)
            if got_region.area_m2 < hi or not droppable or int(keep.sum()) <= session.k:
                break
            keep[droppable.pop(0)] = False
        tiles, union, area, keys = got_region
        left = int(keep.sum())
        if left < session.k or area >= hi:
            why = (
                f"session members left: {left} of them still known, k={session.k} needed"
                if left < session.k
                else f"the session's members' tiles cover {area:.0f} m² >= a_max_m2"
            )
            return None, f"{why}; the session ends after {session.session_s:g} s without requests"
        pts = np.column_stack([snap.x, snap.y])
        if tiles:
            inside = np.isin(point_tiles(pts, grid), keys)
        else:
            inside = shapely.intersects_xy(union, pts[:, 0], pts[:, 1])
        inside[i] = True  # at her latest fix (a session region holds the requester)
        session.members = [names[int(r)] for r in np.flatnonzero(keep)]
        session.count += 1
        self.session_counts["tiles" if tiles else "tile_boxes"] += 1
        t1 = float(got.t[keep].min())
        return CloakRegion(union, area, int(inside.sum()), t1, snap.time, tiles=tiles), ""

    def _scale(self, mo: _Motion) -> F64:
        """How much faster than ``session_speed_m_s`` each of the rows of ``mo`` may move
        (at least 1): ``session_speed_factor`` times the fastest she was seen to move, over
        ``session_speed_m_s``. Every margin of hers scales by it."""
        cfg = self.config
        base = max(cfg.session_speed_m_s, 1e-9)
        return np.maximum(1.0, cfg.session_speed_factor * mo.vmax / base)

    def _unsaid_m(self) -> float:
        """The accuracy (m) taken for a report that gives none: ``session_fix_error_m`` over
        ``session_accuracy_factor`` (the margin such a fix gets is that factor times it; 10 m
        by default, 0 where the operator says fixes are exact)."""
        cfg = self.config
        return cfg.session_fix_error_m / max(cfg.session_accuracy_factor, 1.0)

    def _fix_error(self, mo: _Motion) -> F64:
        """How far each of the fixes of the rows of ``mo`` may lie from her device (m):
        ``session_accuracy_factor`` times the accuracy her report gave, else
        ``session_fix_error_m``."""
        cfg = self.config
        said = mo.error_m
        out: F64 = np.where(
            np.isnan(said), cfg.session_fix_error_m, cfg.session_accuracy_factor * said
        )
        return out

    def _worst(self, mo: _Motion, age: F64, me: int) -> tuple[F64, NDArray[np.bool_]]:
        """Worst-case margins (m) of the rows of ``mo``, whose fixes are ``age`` s old:
        where each fix may lie from her device (:meth:`_fix_error`) plus ``session_speed_m_s *
        age`` times her scale (:meth:`_scale`); and which are *stale*, not vouched for
        because their fix is older than ``session_margin_m / session_speed_m_s - epoch_s``
        seconds (row ``me``, the requester, never is). A stale member is chosen last and
        stays in the set only where a region covers her whole margin; capping her margin
        instead would count her inside a region she may have left."""
        cfg = self.config
        base = cfg.session_speed_m_s * age
        error = self._fix_error(mo)
        stale = (base > cfg.session_margin_m) | self._loose(error, me)
        stale[me] = False
        return error + base * self._scale(mo), stale

    def _loose(self, error: F64, me: int) -> NDArray[np.bool_]:
        """Which rows' fixes (``error``, m, from :meth:`_fix_error`) may lie farther than
        ``session_margin_m`` from their devices: not vouched for, like a stale fix, and never
        made to fit a region (:meth:`_session_attempt` chooses among the others): a member who
        says her fix may be kilometres off would otherwise make every region of each session
        holding her overflow ``a_max_m2``. Row ``me``, the requester, never is."""
        out: NDArray[np.bool_] = error > self.config.session_margin_m
        out[me] = False
        return out

    def _thin(
        self,
        mo: _Motion,
        xy: F64,
        age: F64,
        margin: F64,
        *,
        stale: NDArray[np.bool_],
        k: int,
        me: int,
        draw: np.random.Generator,
    ) -> tuple[F64, F64]:
        """Dead-reckoned positions of the rows of ``mo`` (at ``xy``, fixes ``age`` s old) and
        their thin margins (never above the worst-case ``margin``): where her fix may lie
        (:meth:`_fix_error`) ``+ floor + drift * age``,
        thinner for members who had stayed put for long (:func:`still_margins`, ``k`` the
        session's). Row ``me``, the requester, keeps her fix and her worst-case margin: the
        region must hold her, not only probably (her request usually brings a fresh fix); and
        at least another member's thin margin drawn at random (:meth:`_requester_floor`), so
        that she sits as deep as a member does. Every margin of a row grows by her ``scale``
        (:meth:`_scale`); rows ``stale`` (:meth:`_worst`) keep their fix and worst-case margin."""
        cfg = self.config
        scale = self._scale(mo)
        v = np.nan_to_num(np.column_stack([mo.vx, mo.vy]), nan=0.0)
        standard = np.minimum(margin, cfg.session_floor_m + cfg.session_drift_m_s * scale * age)
        drift = still_margins(
            age,
            mo.stayed_s,
            standard,
            k=k,
            slack=cfg.session_slack,
            risk=cfg.session_risk,
            speed_m_s=cfg.session_speed_m_s * scale,
            floor_m=cfg.session_floor_m,
        )
        drift = np.minimum(margin, drift + self._fix_error(mo))  # where her fix may lie
        guess = xy + v * age[:, None]
        guess[stale] = xy[stale]  # not vouched for, even statistically: her worst-case box
        drift[stale] = margin[stale]
        guess[me] = xy[me]
        drift[me] = max(float(margin[me]), self._requester_floor(drift, me, draw, stale))
        return guess, drift

    def _requester_floor(
        self,
        margin: F64,
        me: int,
        draw: np.random.Generator,
        stale: NDArray[np.bool_],
    ) -> float:
        """The least margin (m) for row ``me``, the requester, in a region whose members keep
        ``margin``: the margin of another member drawn with ``draw`` (``session_requester_quantile``
        ``"draw"``), or that quantile of the others' (0 with no others). Her request usually
        brings a fresh fix, so her own margin is a few metres where the others' cover fixes up
        to an update interval old: boxed by the thinnest margin, she would be the user nearest
        an edge far more often than chance (among the users left in every region of her
        session, 2.14-2.41 times as often in the city before worst-case regions had a floor
        too); boxed by a fixed quantile, at a typical depth (the best depth-rank guess among
        them, 1.27-1.46 times chance at 0.75; 1.20-1.30 drawn). Members ``stale`` (not
        vouched for: :meth:`_worst`) are not drawn from."""
        keep = ~stale
        keep[me] = False
        others = margin[keep]
        if not len(others):
            return 0.0
        q = self.config.session_requester_quantile
        if q == "draw":
            return float(others[int(draw.integers(len(others)))])
        return float(np.quantile(others, q))

    def _audit(self, session: _Session) -> None:
        """Drop from ``session`` every member whose update since a region was answered from
        dead-reckoned positions puts her, interpolated to the time it was answered, outside
        that region less ``session_floor_m`` (what an adversary who knew her true path would
        deduce: she is not in every region); members not updated since stay pending, those the
        table does not know (yet: after a restart, before their next fix) too: a region counts
        only members of its snapshot. Of her last two reports, the earliest after the answer is
        read (the one nearest in time)."""
        tol = self.config.session_floor_m
        members = set(session.members)
        table = self.table
        left: list[
            tuple[float, tuple[float, float, float, float], dict[str, tuple[float, float, float]]]
        ] = []
        for t_ans, (x0, y0, x1, y1), fixes in session.audits:
            for uid in list(fixes):
                if uid not in members:
                    del fixes[uid]
                    continue
                slot = table.ids.get(uid)
                if slot is None:
                    continue  # not reported since (a restart, an expiry): still pending
                bx, by, bt = fixes[uid]
                ta, ax, ay = float(table.t[slot]), float(table.x[slot]), float(table.y[slot])
                if ta <= t_ans or ta <= bt:
                    continue  # no update since: still pending
                pt = float(table.pt[slot])
                if pt > t_ans and pt > bt:  # the report before the latest is nearer in time
                    ta, ax, ay = pt, float(table.px[slot]), float(table.py[slot])
                w = (t_ans - bt) / (ta - bt)
                x = bx + w * (ax - bx)
                y = by + w * (ay - by)
                if not (x0 + tol <= x <= x1 - tol and y0 + tol <= y <= y1 - tol):
                    members.discard(uid)
                    self.session_counts["audit_dropped"] += 1
                del fixes[uid]
            if fixes:
                left.append((t_ans, (x0, y0, x1, y1), fixes))
        session.audits = left
        session.members = [u for u in session.members if u in members]

    def _shared_attempt(
        self, snap: _Snapshot, i: int, p: CloakParams
    ) -> tuple[CloakRegion | None, str, I64 | None]:
        """The shared-partition region of snapshot user ``i`` (reciprocal), and the snapshot
        indices of the users it holds when that is not her whole leaf (a core region)."""
        if snap.n < p.k:
            return None, f"too few users: {snap.n} current users, k={p.k} requested", None
        cp = self._partition(snap, p.k, p.a_min_m2)
        # regions use the rung's a_min, so that they depend on (k, rung, a_max) only
        region, held = shared_region(
            cp.part,
            i,
            p,
            snap.time,
            x=snap.x,
            y=snap.y,
            t=snap.t,
            cache=cp.regions,
            a_min_m2=cp.a_min_m2,
        )
        if region is not None:
            return region, "", held
        disc = snap.knn_area(i, p.k)
        if disc >= p.a_max_m2:
            return (
                None,
                (
                    f"too few users near the requester: the {p.k} nearest users span a disc of "
                    f"{disc:.0f} m² >= a_max_m2"
                ),
                None,
            )
        return (
            None,
            (
                f"a_max_m2 too small for k={p.k}: the shared region holding the requester needs "
                f"more than a_max_m2 ({cp.regions.leaves[int(cp.part.leaf_of[i])].area_m2:.0f} m² "
                "before shrinking)"
            ),
            None,
        )
