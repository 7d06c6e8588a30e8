"""Historical k-anonymity sessions (and seen speeds) as plain records, to carry them over a
restart.

A session keeps ``k`` of the same users in all of a user's regions (:mod:`history`). If the
anonymizer forgot it on a restart, her next request would start an unrelated set, and an
observer who links her requests across the restart intersects the two: a re-keyed session is
narrowed below ``k`` in most cases (measured, docs/algorithms.md). A :class:`SessionRecord`
holds what the next process needs to go on with the same set, and nothing of where anyone is:
the members' ids, ``k``, the session's length, its last request (s, the service's wall
clock), the seed of its grid and draws, how many requests it answered, and its pool size.

The one kind of position it holds: the audits still pending (:class:`AuditRecord`), a region
answered from dead-reckoned positions and, for each member not yet checked against her next
fix, her fix before it, so that the next process drops her from the set at that fix when she
may have been outside, as this one would have. (Leaving such members out instead emptied the
set of a session written right after a thin region: every member of it is pending then.)
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "MAX_AUDITS",
    "MAX_MEMBERS",
    "MAX_SESSIONS",
    "AuditRecord",
    "SessionRecord",
    "SessionRecords",
]

MAX_MEMBERS = 100_000
"""Members a record may hold (a hostile or corrupt file cannot exhaust memory)."""
MAX_SESSIONS = 1_000_000
"""Records a file may hold."""
MAX_AUDITS = 1_000
"""Pending audits a record may hold (one per thin region not yet checked for everyone)."""


Fix = tuple[float, float, float]
"""A member's fix: x (m), y (m), t (s)."""


def _check_ids(ids: Iterable[str]) -> None:
    if any(not 0 < len(u) <= 256 for u in ids):
        raise ValueError("member ids have 1 to 256 characters")


class AuditRecord(BaseModel):
    """A session region answered from dead-reckoned positions at ``t`` (s, the service's wall
    clock), ``box`` ``(x0, y0, x1, y1)`` in the tile's metres, and for each member not yet
    checked her fix ``(x, y, t)`` before it (metres, metres, s)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    t: float
    box: tuple[float, float, float, float]
    fixes: dict[str, Fix] = Field(max_length=MAX_MEMBERS)

    @field_validator("fixes")
    @classmethod
    def _ids(cls, v: dict[str, Fix]) -> dict[str, Fix]:
        _check_ids(v)
        return v


class SessionRecord(BaseModel):
    """One user's session: no position but the fixes of its pending audits."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    user: str = Field(min_length=1, max_length=256)
    members: list[str] = Field(max_length=MAX_MEMBERS)
    k: int = Field(ge=1, le=MAX_MEMBERS)
    session_s: float = Field(gt=0.0)
    last: float
    seed: int = Field(ge=0, lt=2**63)
    count: int = Field(ge=0)
    pool: int = Field(ge=0, le=MAX_MEMBERS)
    audits: list[AuditRecord] = Field(default_factory=list, max_length=MAX_AUDITS)

    @field_validator("members")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        _check_ids(v)
        return v


class SessionRecords(BaseModel):
    """The sessions of one anonymizer process by tile, as written before it answers."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    version: int = Field(1, ge=1, le=1)
    saved_at: float
    tiles: dict[str, list[SessionRecord]]
    speeds: dict[str, dict[str, float]] = Field(default_factory=dict)
    """By tile: users seen moving faster than a pedestrian and the fastest each was seen, m/s
    (so that a driver's margins are a driver's from her first report to the next process)."""

    @field_validator("tiles")
    @classmethod
    def _bounded(cls, v: dict[str, list[SessionRecord]]) -> dict[str, list[SessionRecord]]:
        if sum(len(r) for r in v.values()) > MAX_SESSIONS:
            raise ValueError(f"more than {MAX_SESSIONS} sessions")
        return v

    @field_validator("speeds")
    @classmethod
    def _speeds(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        if sum(len(r) for r in v.values()) > MAX_SESSIONS:
            raise ValueError(f"more than {MAX_SESSIONS} speeds")
        for by_user in v.values():
            for uid, speed in by_user.items():
                if not 0 < len(uid) <= 256 or not speed > 0:
                    raise ValueError("speeds are positive, ids 1 to 256 characters")
        return v
