"""Protocol 3 (anonymisation without mediation) and the cloaking half of Protocol 1.

The anonymizer keeps every user's latest position (from :class:`LocationUpdate` messages,
projected to local metres) in the :class:`~locpriv.core.cloak.cloaker.Cloaker` of her tile
(:class:`~locpriv.core.cloak.tiled.TileCloakers`; one cloaker for the world without tiles). On a
:class:`CloakRequest` it
returns only the cloaked region (:class:`CloakReply`: region in WGS84, ``area_m2``, ``users``,
``[t1, t2]``) and never contacts DS; the user queries DS herself. Temporal cloaking: a request the
cloaker cannot serve now stays pending up to ``max_delay_s`` seconds and is answered by a later
location update or deadline (or ``cloak_timeout``).

Times: the cloaker is fed the driver's ``now`` (receive time, Unix seconds), not the device's
``t``, so skewed device clocks cannot age or rejuvenate positions.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Hashable

from shapely.geometry import MultiPolygon, Polygon

from locpriv.core.cloak.cloaker import Cloaker, CloakOutcome, CloakParams
from locpriv.core.cloak.tiled import TileCloakers
from locpriv.core.cloak.types import CloakConfig
from locpriv.core.geo import LocalProjection, region_to_wire
from locpriv.errors import ConfigError, ErrorCode, ServiceUnavailable
from locpriv.protocols.effects import Send, error_send
from locpriv.protocols.p2 import RegionInfo
from locpriv.wire.messages import (
    CloakReply,
    CloakRequest,
    ErrorDetails,
    FixWanted,
    LocationLeave,
    LocationUpdate,
    Message,
    PrivacyProfile,
    ProfileBounds,
    QueryRequest,
)
from locpriv.wire.topics import Topics

__all__ = ["Anonymizer", "Continuation", "outcome_error", "profile_bounds", "profile_to_params"]

log = logging.getLogger(__name__)


Continuation = Callable[[CloakOutcome, RegionInfo | None, float], list[Send]]
"""What to do with a finished cloak: ``(outcome, region in WGS84 or None, now) -> effects``."""


def profile_bounds(config: CloakConfig) -> ProfileBounds:
    """The operator's bounds of a privacy profile, as a ``bad_parameters`` reply carries them."""
    return ProfileBounds(
        k_min=config.k_min,
        k_max=config.k_max,
        a_min_floor_m2=config.a_min_floor_m2,
        a_max_ceiling_m2=config.a_max_ceiling_m2,
        world_area_m2=config.world_area_m2,
        max_delay_s_max=config.max_delay_s_bound,
        session_s_max=config.session_s_bound,
    )


def profile_to_params(profile: PrivacyProfile | None) -> CloakParams | None:
    """Wire privacy profile to cloaking parameters (None: the operator's default)."""
    if profile is None:
        return None
    return CloakParams(
        k=profile.k,
        a_min_m2=profile.a_min_m2,
        a_max_m2=profile.a_max_m2,
        max_delay_s=profile.max_delay_s,
        session_s=profile.session_s,
    )


class Anonymizer:
    """Location updates in, cloaked regions out (sans-I/O); ``cloakers`` per tile, or one
    :class:`Cloaker` for an untiled world."""

    def __init__(
        self,
        cloakers: TileCloakers | Cloaker,
        projection: LocalProjection,
        *,
        prepare_epochs: bool = True,
        topics: Topics | None = None,
    ) -> None:
        if isinstance(cloakers, Cloaker):
            cloakers = TileCloakers.of(cloakers)
        self.cloakers = cloakers
        self.projection = projection
        self.topics = topics
        """Where members are asked for fresh reports (``[cloak] session_fresh_s``); None:
        never asked (their requests still wait ``session_fix_wait_s`` for updates)."""
        self._last_xy: tuple[float, float, float, float] = (math.nan, math.nan, 0.0, 0.0)
        self.prepare_epochs = prepare_epochs
        """Pre-build each epoch's snapshot and partitions at the epoch boundary (a timer
        deadline while users are known), so that requests do not pay for them."""
        self._waiting: dict[Hashable, Continuation] = {}
        self._addresses: dict[Hashable, tuple[str, str]] = {}
        self._seq = itertools.count()
        self._prepared_epoch: int | None = None
        self.revision = 0
        """Changes whenever the set of waiting requests does (the driver journals them)."""

    @property
    def pending(self) -> int:
        """Cloak requests waiting (temporal cloaking)."""
        return len(self._waiting)

    def in_flight(self) -> list[tuple[str, str]]:
        """``(reply_to, correlation_id)`` of every waiting cloak (lost if the process dies)."""
        return list(self._addresses.values())

    # ----------------------------------------------------------------- inputs

    def _xy(self, lon: float, lat: float) -> tuple[float, float]:
        """``projection.point_to_xy``, remembering the last point: the route's tile check and
        the update that follows project the same position, and once is enough."""
        last = self._last_xy
        if last[0] == lon and last[1] == lat:
            return last[2], last[3]
        x, y = self.projection.point_to_xy(lon, lat)
        self._last_xy = (lon, lat, x, y)
        return x, y

    def tile_at(self, lon: float, lat: float) -> str | None:
        """The tile of a position (degrees), None when it projects to no finite point."""
        x, y = self._xy(lon, lat)
        return self.cloakers.tiling.tile_of(x, y)

    def update(
        self,
        user_id: str,
        *,
        lon: float,
        lat: float,
        now: float,
        accuracy_m: float | None = None,
    ) -> list[Send]:
        """Absorb a position (degrees; ``accuracy_m``: how far it may lie from the device, as
        the report says) in its tile; returns effects of cloaks it completed."""
        x, y = self._xy(lon, lat)
        tile = self.cloakers.tiling.tile_of(x, y)
        if tile is None:
            return []  # beyond the projection's domain; the route's tile check rejects it
        done = self.cloakers.update(user_id, x, y, now, tile, accuracy_m=accuracy_m)
        return self._dispatch(done, now)

    def cloak(
        self,
        *,
        user_id: str,
        lat: float | None,
        lon: float | None,
        profile: PrivacyProfile | None,
        now: float,
        then: Continuation,
        reply_to: str,
        correlation_id: str,
        accuracy_m: float | None = None,
    ) -> list[Send]:
        """Cloak ``user_id`` (at ``lat``/``lon`` if given, else her last update) and call
        ``then`` with the outcome, now or when a pending request completes. Parameters out of
        the operator's bounds are answered ``bad_parameters`` on ``reply_to``; the request is
        listed by :meth:`in_flight` while it waits."""
        out: list[Send] = []
        try:
            params = self.cloakers.validate(profile_to_params(profile))
        except ConfigError as exc:
            param = getattr(exc, "param", None)
            field = "profile" if param is None or profile is None else f"profile.{param}"
            details = ErrorDetails(bounds=profile_bounds(self.cloakers.request_config))
            code = ErrorCode.BAD_PARAMETERS
            return [error_send(reply_to, correlation_id, code, str(exc), field, details=details)]
        if lat is not None and lon is not None:
            out += self.update(user_id, lon=lon, lat=lat, now=now, accuracy_m=accuracy_m)
        rid = next(self._seq)
        self._waiting[rid] = then
        outcome = self.cloakers.request(rid, user_id, params, now)
        out += self._ask_fixes()
        if outcome is not None:
            out += self._dispatch([outcome], now)
        else:
            self._addresses[rid] = (reply_to, correlation_id)
            self.revision += 1
        return out

    def receive(self, message: Message, now: float) -> list[Send]:
        """A :class:`LocationUpdate`, :class:`LocationLeave` or Protocol 3 :class:`CloakRequest`."""
        if isinstance(message, LocationUpdate):
            return self.update(
                message.user_id,
                lon=message.lon,
                lat=message.lat,
                now=now,
                accuracy_m=message.accuracy_m,
            )
        if isinstance(message, LocationLeave):
            self.cloakers.leave(message.user_id, message.tile)
            return []
        if isinstance(message, CloakRequest):
            reply_to, cid = message.reply_to, message.correlation_id

            def then(outcome: CloakOutcome, info: RegionInfo | None, now: float) -> list[Send]:
                region = outcome.region
                if region is None or info is None:
                    return [outcome_error(reply_to, cid, outcome)]
                reply = CloakReply(
                    correlation_id=cid,
                    region=info.region,
                    area_m2=info.area_m2,
                    users=region.users,
                    t1=info.t1,
                    t2=info.t2,
                )
                return [Send(reply_to, reply)]

            return self.cloak_for(message, now, then)
        return []

    def cloak_for(
        self, request: CloakRequest | QueryRequest, now: float, then: Continuation
    ) -> list[Send]:
        """:meth:`cloak` for the user, position, profile and reply address of ``request``."""
        return self.cloak(
            user_id=request.user_id,
            lat=request.lat,
            lon=request.lon,
            profile=request.profile,
            now=now,
            then=then,
            reply_to=request.reply_to,
            correlation_id=request.correlation_id,
            accuracy_m=request.accuracy_m,
        )

    def on_deadline(self, now: float) -> list[Send]:
        """Prepare a new epoch, expire users, retry pending cloaks, time out overdue ones."""
        outcomes = []
        epoch = math.floor(now / self.cloakers.config.epoch_s)
        if self.prepare_epochs and self.cloakers.has_users and epoch != self._prepared_epoch:
            self._prepared_epoch = epoch
            outcomes += self.cloakers.prepare(now)
        outcomes += self.cloakers.on_deadline(now)
        return self._dispatch(outcomes, now)

    def next_deadline(self) -> float | None:
        """When :meth:`on_deadline` has work next (s), or None."""
        deadline = self.cloakers.next_deadline()
        if self.prepare_epochs and self.cloakers.has_users:
            epoch_s = self.cloakers.config.epoch_s
            boundary = (
                (self._prepared_epoch + 1) * epoch_s if self._prepared_epoch is not None else 0.0
            )
            deadline = boundary if deadline is None else min(deadline, boundary)
        return deadline

    def shutdown(self, now: float) -> list[Send]:
        """Fail every pending cloak with ``unavailable``."""
        out: list[Send] = []
        waiting, self._waiting = self._waiting, {}
        self._addresses.clear()
        self.revision += 1
        for rid, then in waiting.items():
            self.cloakers.cancel(rid)
            err = ServiceUnavailable("the anonymizer is shutting down")
            out += then(CloakOutcome(rid, None, err), None, now)
        return out

    # --------------------------------------------------------------- internals

    def _ask_fixes(self) -> list[Send]:
        """One :class:`FixWanted` (QoS 0: a lost one costs a wider margin, nothing else) to
        each member the cloakers want a fresh report from."""
        users = self.cloakers.take_fix_requests()
        if self.topics is None or not users:
            return []
        ask = FixWanted(within_s=min(60.0, self.cloakers.config.session_fix_wait_s))
        out = []
        for uid in users:
            try:
                out.append(Send(self.topics.fix_wanted(uid), ask, qos=0))
            except ValueError:  # not a topic segment (cannot come from a checked topic)
                log.warning("no fix request for a user id that is no topic segment")
        return out

    def _dispatch(self, outcomes: list[CloakOutcome], now: float) -> list[Send]:
        out: list[Send] = []
        for outcome in outcomes:
            then = self._waiting.pop(outcome.request_id, None)
            if then is None:
                continue
            if self._addresses.pop(outcome.request_id, None) is not None:
                self.revision += 1
            info = None
            if outcome.region is not None:
                r = outcome.region
                # a region of tiles goes out tile by tile (their union may have holes)
                poly = self.projection.geometry_to_lonlat(r.wire_shape)
                assert isinstance(poly, Polygon | MultiPolygon)
                info = RegionInfo(region_to_wire(poly), r.area_m2, r.t1, r.t2, r.users)
            out += then(outcome, info, now)
        return out


def outcome_error(reply_to: str, cid: str, outcome: CloakOutcome) -> Send:
    """The error reply for a failed cloak (its code and human reason)."""
    err = outcome.error
    if err is None:  # pragma: no cover - a region without projection cannot happen
        return error_send(reply_to, cid, ErrorCode.INTERNAL, "cloaking produced no region")
    return error_send(reply_to, cid, err.code, str(err))
