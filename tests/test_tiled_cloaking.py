"""Tiles in the pure machines: per-tile cloaking, handover, the topic's tile checked, the
requester computing her tile from the retained deployment configuration."""

from __future__ import annotations

import pytest
import shapely

from locpriv.config import ServiceConfig
from locpriv.core.geo import LocalProjection, LonLat
from locpriv.core.tiles import Shard
from locpriv.errors import ErrorCode, LocalProtocolError
from locpriv.protocols.dispatch import Dispatcher
from locpriv.protocols.effects import Send
from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core, shard_tiles
from locpriv.protocols.user import UserMachine
from locpriv.transport.base import Received
from locpriv.wire.messages import (
    CloakReply,
    CloakRequest,
    DeploymentConfig,
    ErrorReply,
    LocationLeave,
    NearestQuery,
    PrivacyProfile,
    encode,
)
from locpriv.wire.topics import WORLD_TILE, Topics

TOPICS = Topics("tl")
T0 = 1_700_000_000.0
LAT0, LON0 = 41.3874, 2.1686
PROJ = LocalProjection(LAT0, LON0)
SIDE = 2000.0
PROFILE = PrivacyProfile(k=3, a_min_m2=1e4, a_max_m2=5e7)
DEPLOYMENT = DeploymentConfig(lat0_deg=LAT0, lon0_deg=LON0, tile_m=SIDE)


def _service(shard: Shard | None = None) -> Dispatcher:
    shard = shard or Shard()
    config = ServiceConfig.model_validate(
        {"prefix": "tl", "tiles": {"side_m": SIDE}, "limits": {"requests_per_s": 1000.0}}
    )
    core = build_trusted_core(config, TOPICS.reply("mediator"))
    routes = anonymizer_routes(
        TOPICS,
        TOPICS.reply("mediator"),
        anonymizer=core.anonymizer,
        tiles=shard_tiles(config, shard),
        subscribe_tiles=shard.count > 1,
    )
    return Dispatcher(
        name="anonymizer", machine=core, routes=routes, topics=TOPICS, max_payload=65536
    )


def _run(d: Dispatcher, sends: list[Send], now: float = T0) -> list[Send]:
    out: list[Send] = []
    for s in sends:
        out += d.handle(Received(s.topic, encode(s.message)), now)
    return out


def _user() -> UserMachine:
    return UserMachine(TOPICS, TOPICS.reply("app"), deployment=DEPLOYMENT)


def _lonlat(x: float, y: float) -> LonLat:
    return LonLat(*PROJ.point_to_lonlat(x, y))


def test_the_requester_computes_her_tile_from_the_deployment() -> None:
    um = UserMachine(TOPICS, TOPICS.reply("app"))
    with pytest.raises(LocalProtocolError, match="deployment configuration"):
        um.location_update(user_id="al", position=_lonlat(0, 0), now=T0)
    um.configure(DEPLOYMENT)
    (send,) = um.location_update(user_id="al", position=_lonlat(2500.0, -10.0), now=T0)
    assert send.topic == TOPICS.location("al", tile="t1_-1")
    _, (req,) = um.cloak(user_id="al", position=None, profile=None, now=T0, timeout_s=1.0)
    assert isinstance(req, Send) and req.topic == TOPICS.p3_cloak("al", tile="t1_-1")
    # a P2 query elsewhere relays her point but does not move her: later cloaks stay in t1_-1
    query = NearestQuery(category="cafe", n=1)
    um.query(
        query,
        protocol=2,
        user_id="al",
        position=_lonlat(4500.0, 10.0),
        profile=None,
        now=T0,
        timeout_s=1.0,
    )
    _, (req,) = um.cloak(user_id="al", position=None, profile=None, now=T0, timeout_s=1.0)
    assert isinstance(req, Send) and req.topic == TOPICS.p3_cloak("al", tile="t1_-1")
    with pytest.raises(LocalProtocolError, match="no position"):
        um.cloak(user_id="bo", position=None, profile=None, now=T0, timeout_s=1.0)
    um.configure(DeploymentConfig(lat0_deg=LAT0, lon0_deg=LON0))  # no tiles
    (send,) = um.location_update(user_id="al", position=_lonlat(2500.0, -10.0), now=T0)
    assert send.topic == TOPICS.location("al", tile=WORLD_TILE)


def test_cloaks_use_the_users_of_the_requesters_tile_and_stay_inside_it() -> None:
    d = _service()
    um = _user()
    # three users just west of the border x = 2000 m (tile t0_0), three just east (t1_0)
    west = [(1990.0, 100.0 + 10 * i) for i in range(3)]
    east = [(2010.0, 100.0 + 10 * i) for i in range(3)]
    updates = [
        send
        for side, pts in (("w", west), ("e", east))
        for i, xy in enumerate(pts)
        for send in um.location_update(user_id=f"{side}{i}", position=_lonlat(*xy), now=T0)
    ]
    assert {s.topic.split("/")[3] for s in updates} == {"t0_0", "t1_0"}
    assert _run(d, updates) == []
    for who, tile_box in (("w0", (0, 0, 2000, 2000)), ("e0", (2000, 0, 4000, 2000))):
        _, req = um.cloak(user_id=who, position=None, profile=PROFILE, now=T0, timeout_s=1.0)
        (reply,) = _run(d, [r for r in req if isinstance(r, Send)], T0 + 1.0)
        assert isinstance(reply.message, CloakReply), reply.message
        assert reply.message.users == 3  # the other tile's three never count
        region = PROJ.geometry_to_xy(shapely.Polygon(reply.message.region.ring))
        assert shapely.box(*tile_box).buffer(0.01).covers(region)


def test_a_user_crossing_a_border_is_handed_over_at_once() -> None:
    d = _service()
    um = _user()
    sends = [
        send
        for i in range(4)
        for send in um.location_update(user_id=f"u{i}", position=_lonlat(500.0 + i, 500.0), now=T0)
    ]
    _run(d, sends)
    anonymizer = d.machine.anonymizer  # type: ignore[attr-defined]
    assert anonymizer.cloakers.users_per_tile() == {"t0_0": 4}
    _run(d, um.location_update(user_id="u0", position=_lonlat(2500.0, 500.0), now=T0 + 1))
    assert anonymizer.cloakers.users_per_tile() == {"t0_0": 3, "t1_0": 1}
    assert anonymizer.cloakers.tile_of("u0") == "t1_0"


def _owner(tile: str) -> int:
    config = ServiceConfig.model_validate({"tiles": {"side_m": SIDE}})
    return next(i for i in range(2) if tile in (shard_tiles(config, Shard(i, 2)) or []))


def _two_tiles_of_two_shards() -> tuple[tuple[float, float], tuple[float, float]]:
    """A point in a tile of shard 0 and one in a neighbouring tile of shard 1 (metres)."""
    for ix in range(-5, 5):
        a, b = (ix * SIDE + 500.0, 500.0), ((ix + 1) * SIDE + 500.0, 500.0)
        tiles = [f"t{ix}_0", f"t{ix + 1}_0"]
        if [_owner(t) for t in tiles] == [0, 1]:
            return a, b
    raise AssertionError("no neighbouring tiles of two shards")


def test_a_user_moving_to_another_shards_tile_is_forgotten_by_the_old_one_at_once() -> None:
    """Each shard sees its own tiles' topics only: the old shard learns that she left from the
    LocationLeave her client sends on the old tile's topic, not from her next update."""
    shards = [_service(Shard(i, 2)) for i in range(2)]
    home, away = _two_tiles_of_two_shards()
    um = _user()
    tiling_of = {0: shards[0], 1: shards[1]}

    def deliver(sends: list[Send], now: float) -> None:
        for s in sends:
            tile = TOPICS.tile_of(s.topic) or ""
            assert _run(tiling_of[_owner(tile)], [s], now) == []  # accepted, nothing to answer

    for i in range(3):
        deliver(um.location_update(user_id=f"u{i}", position=_lonlat(*home), now=T0), T0)
    old = shards[0].machine.anonymizer.cloakers  # type: ignore[attr-defined]
    new = shards[1].machine.anonymizer.cloakers  # type: ignore[attr-defined]
    assert sum(old.users_per_tile().values()) == 3
    moved = um.location_update(user_id="u0", position=_lonlat(*away), now=T0 + 5)
    assert [type(s.message).__name__ for s in moved] == ["LocationLeave", "LocationUpdate"]
    deliver(moved, T0 + 5)
    assert sum(old.users_per_tile().values()) == 2 and old.tile_of("u0") is None
    assert new.tile_of("u0") is not None
    # staying in the tile sends no leave; P2 (the mediator only relays) moves nobody
    assert len(um.location_update(user_id="u0", position=_lonlat(*away), now=T0 + 6)) == 1
    query = NearestQuery(category="cafe", n=1)
    _, p2 = um.query(
        query,
        protocol=2,
        user_id="u1",
        position=_lonlat(*away),
        profile=None,
        now=T0 + 7,
        timeout_s=1.0,
    )
    assert [type(e.message).__name__ for e in p2 if isinstance(e, Send)] == ["QueryRequest"]
    # P1 and P3 with a position place the user there: they leave the old tile first
    _, p3 = um.cloak(
        user_id="u2", position=_lonlat(*away), profile=PROFILE, now=T0 + 8, timeout_s=1.0
    )
    assert [type(e.message).__name__ for e in p3 if isinstance(e, Send)] == [
        "LocationLeave",
        "CloakRequest",
    ]


def test_a_deployment_config_on_a_reply_topic_changes_nothing() -> None:
    """Every app may publish on another's reply topic: a forged configuration there (a 1 m
    tile, say) must not re-route her updates; only the retained ``config`` topic counts."""
    um = _user()
    forged = DeploymentConfig(lat0_deg=LAT0, lon0_deg=LON0, tile_m=1.0)
    assert um.receive(forged, T0) == []
    assert um.deployment == DEPLOYMENT
    (send,) = um.location_update(user_id="al", position=_lonlat(2500.0, -10.0), now=T0)
    assert send.topic == TOPICS.location("al", tile="t1_-1")


def test_a_late_or_foreign_leave_changes_nothing() -> None:
    d = _service()
    um = _user()
    anonymizer = d.machine.anonymizer  # type: ignore[attr-defined]
    _run(d, um.location_update(user_id="u0", position=_lonlat(500.0, 500.0), now=T0))
    leave, update = um.location_update(user_id="u0", position=_lonlat(2500.0, 500.0), now=T0 + 1)
    _run(d, [update, leave])  # the leave arrives after her update in the new tile
    assert anonymizer.cloakers.users_per_tile() == {"t0_0": 0, "t1_0": 1}
    assert anonymizer.cloakers.tile_of("u0") == "t1_0"
    # a leave must name the topic's tile
    assert isinstance(leave.message, LocationLeave)
    forged = Send(TOPICS.location("u0", tile="t1_0"), leave.message)
    (err,) = _run(d, [forged])
    assert isinstance(err.message, ErrorReply)
    assert (err.message.code, err.message.field) == (ErrorCode.INVALID_FIELD, "tile")
    assert anonymizer.cloakers.tile_of("u0") == "t1_0"
    # and the topic's user: nobody leaves in another's name
    other = Send(
        TOPICS.location("mallory", tile="t1_0"), leave.message.model_copy(update={"tile": "t1_0"})
    )
    (err,) = _run(d, [other])
    assert isinstance(err.message, ErrorReply) and err.message.field == "user_id"
    assert anonymizer.cloakers.tile_of("u0") == "t1_0"


def test_the_topics_tile_must_hold_the_position_and_be_served() -> None:
    d = _service()
    um = _user()
    (right,) = um.location_update(user_id="al", position=_lonlat(2500.0, 10.0), now=T0)
    wrong = Send(TOPICS.location("al", tile="t0_0"), right.message)
    (err,) = _run(d, [wrong])
    assert isinstance(err.message, ErrorReply)
    assert (err.message.code, err.message.field) == (ErrorCode.INVALID_FIELD, "tile")
    assert "t1_0" in err.message.reason and err.topic == TOPICS.errors("anonymizer")
    far = Send(TOPICS.location("al", tile="t900_0"), right.message)  # outside the world
    (err,) = _run(d, [far])
    assert isinstance(err.message, ErrorReply) and err.message.code == ErrorCode.UNAVAILABLE
    # a shard refuses a tile it does not own (its broker subscription never delivers one)
    config = ServiceConfig.model_validate({"tiles": {"side_m": SIDE}})
    owner = next(i for i in range(2) if "t1_0" in (shard_tiles(config, Shard(i, 2)) or []))
    other = _service(Shard(1 - owner, 2))
    request = CloakRequest(correlation_id="c", reply_to=TOPICS.reply("app"), user_id="al")
    (err,) = _run(other, [Send(TOPICS.p3_cloak("al", tile="t1_0"), request)])
    assert isinstance(err.message, ErrorReply) and err.message.code == ErrorCode.UNAVAILABLE
    assert err.topic == TOPICS.reply("app")
    assert _run(_service(Shard(owner, 2)), [right]) == []


def test_a_shard_subscribes_to_its_tiles_only() -> None:
    config = ServiceConfig.model_validate({"tiles": {"side_m": 5000.0}})
    shares = [shard_tiles(config, Shard(i, 3)) or [] for i in range(3)]
    assert sorted(t for s in shares for t in s) == sorted(shard_tiles(config, Shard()) or [])
    core = build_trusted_core(config, TOPICS.reply("m"))
    routes = anonymizer_routes(
        TOPICS,
        TOPICS.reply("m"),
        anonymizer=core.anonymizer,
        tiles=shares[0],
        subscribe_tiles=True,
    )
    filters = [f for r in routes[:4] for f in r.filters]
    assert len(filters) == 4 * len(shares[0])
    assert all(f.split("/")[-2] in shares[0] for f in filters)
    assert routes[4].filters == (TOPICS.reply("m"),)
    assert shard_tiles(ServiceConfig(), Shard()) is None  # no tiles: the one tile, anywhere


def test_the_grid_phase_comes_from_the_deployment_key() -> None:
    """Every anonymizer holding the deployment's token key cuts a tile along the same grid
    (shards and restarts agree); another key gives another grid, and no key none in common."""
    from locpriv.core.cloak.tiled import grid_phase

    key, other = bytes(range(32)), bytes(range(1, 33))
    phases = [grid_phase(key, f"t{i}_0") for i in range(50)]
    assert all(0.05 <= p < 0.95 for p in phases)
    assert len(set(phases)) == 50  # tiles do not share a grid
    assert grid_phase(key, "t3_0") == grid_phase(key, "t3_0")
    assert grid_phase(other, "t3_0") != grid_phase(key, "t3_0")
