"""A hostile client: seeded malformed and mutated payloads for every request topic.

:func:`fuzz_cases` yields what an attacker (or a broken app) publishes: valid requests mutated
field by field (deleted, extra, retyped, out of range, huge numbers, odd characters, a
``user_id`` other than the topic's), deep
nesting, number bombs, invalid UTF-8, control characters and non-characters in ``reply_to``,
``reply_to`` pointing at other services' topics, plain garbage, and - when the services cut
the plane into tiles (``tile_of``) - topics whose tile segment is a neighbour's, a far one's or
no tile at all. Each :class:`FuzzCase` says
on which reply topic an answer must arrive (``expect_reply``: the services answer every request
whose ``reply_to`` is a valid reply topic, else on their error topic).

Used by the standing test (``tests/integration/test_fuzz_services.py``, a few thousand cases)
and the soak script (``benchmarks/soak_fuzz.py``, 100,000 cases).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from locpriv.core.tiles import parse_tile, tile_id
from locpriv.protocols.dispatch import salvage_reply
from locpriv.wire.topics import WORLD_TILE, Topics, matches

__all__ = ["FuzzCase", "TileOf", "fuzz_cases", "stray_topics"]

TileOf = Callable[[float, float], "str | None"]
"""The services' tile of a position (lon, lat degrees), None where none is."""

LAT0, LON0 = 41.3874, 2.1686
"""Around the default projection origin (Barcelona), degrees."""


@dataclass(frozen=True, slots=True)
class FuzzCase:
    """One publish: ``payload`` on ``topic``; ``expect_reply`` is the reply topic an answer
    (or error) must reach, or None when it goes to an error topic or nowhere."""

    topic: str
    payload: bytes
    expect_reply: str | None


def _valid(
    kind: str, topics: Topics, reply_to: str, cid: str, rng: random.Random
) -> dict[str, Any]:
    lat = LAT0 + rng.uniform(-0.01, 0.01)
    lon = LON0 + rng.uniform(-0.01, 0.01)
    profile = {"k": rng.randint(2, 5), "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 0.5}
    query = {"kind": "nearest", "category": rng.choice(["cafe", "atm", "pharmacy"]), "n": 2}
    if kind == "loc":
        return {
            "type": "location_update",
            "user_id": f"f{rng.randrange(50)}",
            "lat": lat,
            "lon": lon,
            "t": 1.7e9,
        }
    if kind == "p3":
        return {
            "type": "cloak_request",
            "correlation_id": cid,
            "reply_to": reply_to,
            "user_id": f"f{rng.randrange(50)}",
            "lat": lat,
            "lon": lon,
            "profile": profile,
        }
    if kind in ("p1", "p2"):
        body: dict[str, Any] = {
            "type": "query_request",
            "correlation_id": cid,
            "reply_to": reply_to,
            "user_id": f"f{rng.randrange(50)}",
            "protocol": int(kind[1]),
            "lat": lat,
            "lon": lon,
            "query": query,
        }
        if kind == "p1":
            body["profile"] = profile
        return body
    return {
        "type": "ds_query",
        "correlation_id": cid,
        "reply_to": reply_to,
        "query": query,
        "location": {"kind": "point", "lat": lat, "lon": lon},
    }


_ODD = [
    "\x00",
    "\x01",
    "\x1f",
    "\x7f",
    "\x85",
    "\u2028",
    "\ufeff",
    "\ufffe",
    "\uffff",
    "\U0010ffff",
    "\ud800",
    "\udfff",
    "/",
    "+",
    "#",
    "$",
    " ",
    "é",
    "😀",
    "\\",
    '"',
    "..",
    "",
]


def _odd_string(rng: random.Random) -> str:
    return "".join(rng.choice(_ODD) for _ in range(rng.randint(1, 4))) + "x" * rng.randint(0, 3)


def _mutations(topics: Topics) -> list[Callable[[dict[str, Any], random.Random], Any]]:
    others = [
        topics.location("alice"),
        topics.ds_query,
        topics.p1_query("alice"),
        topics.p3_cloak("alice"),
        topics.status("anonymizer"),
        topics.status("ds"),
        topics.errors("ds"),
        "x/y",
        f"{topics.reply_prefix}a/b",
        f"$SYS/{topics.reply_prefix}x",
        "#",
    ]

    def drop(b: dict[str, Any], r: random.Random) -> Any:
        b.pop(r.choice(list(b)), None)
        return b

    def extra(b: dict[str, Any], r: random.Random) -> Any:
        b[r.choice(["x", "k" * r.randint(100, 400), _odd_string(r)])] = r.choice([1, "a", None])
        return b

    def retype(b: dict[str, Any], r: random.Random) -> Any:
        key = r.choice(list(b))
        b[key] = r.choice([None, True, "1", 1.5, [], {}, -1, 10**30, "x" * 5000])
        return b

    def bomb(b: dict[str, Any], r: random.Random) -> Any:
        key = r.choice(list(b))
        return (
            json.dumps(b)
            .replace(json.dumps(key), json.dumps(key), 1)
            .replace(f'"{key}": {json.dumps(b[key])}', f'"{key}": {"9" * r.randint(300, 5000)}', 1)
        )

    def deep(b: dict[str, Any], r: random.Random) -> Any:
        depth = r.randint(100, 4000)
        return json.dumps(b)[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"

    def odd_reply(b: dict[str, Any], r: random.Random) -> Any:
        b["reply_to"] = topics.reply_prefix + _odd_string(r)
        return b

    def foreign_reply(b: dict[str, Any], r: random.Random) -> Any:
        b["reply_to"] = r.choice(others)
        return b

    def odd_value(b: dict[str, Any], r: random.Random) -> Any:
        b[r.choice(list(b))] = _odd_string(r)
        return b

    def non_finite(b: dict[str, Any], r: random.Random) -> Any:
        key = r.choice([k for k in ("lat", "lon", "t") if k in b] or list(b))
        return json.dumps(b).replace(
            f'"{key}": {json.dumps(b[key])}',
            f'"{key}": {r.choice(["NaN", "Infinity", "1e999", "-1e400"])}',
            1,
        )

    def impersonate(b: dict[str, Any], r: random.Random) -> Any:
        b["user_id"] = r.choice(["alice", "f0", "f1", "x" * 128])
        return b

    def version(b: dict[str, Any], r: random.Random) -> Any:
        b["v"] = r.choice([0, 2, 99, -1, "1", 1.0])
        return b

    def truncate(b: dict[str, Any], r: random.Random) -> Any:
        text = json.dumps(b)
        return text[: r.randrange(len(text))]

    def garbage(b: dict[str, Any], r: random.Random) -> Any:
        return bytes(r.getrandbits(8) for _ in range(r.randint(0, 300)))

    def oversize(b: dict[str, Any], r: random.Random) -> Any:
        b["pad"] = "p" * r.randint(70_000, 200_000)
        return b

    return [
        drop,
        extra,
        retype,
        bomb,
        deep,
        odd_reply,
        foreign_reply,
        odd_value,
        non_finite,
        impersonate,
        version,
        truncate,
        garbage,
        oversize,
    ]


def _wrong_tile(tile: str, rng: random.Random) -> str:
    """A tile segment other than ``tile``: a neighbour, a far tile, or one that names no tile
    (every one a legal MQTT topic level: no ``+``, ``#`` or NUL)."""
    ix, iy = parse_tile(tile) or (0, 0)
    return rng.choice(
        [
            tile_id(ix + 1, iy),
            tile_id(ix, iy - 1),
            tile_id(ix + 10**6, iy - 10**6),
            "t" + "9" * 40 + "_0",
            "t1",
            "T0_0",
            "t0.5_0",
            "t0_0_0",
            "t-0_0",
            "tile",
            "é",
            "",
        ]
    )


def _encode(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def _reply_of(payload: bytes, topics: Topics) -> str | None:
    """The reply topic a service must answer on: the payload's ``reply_to`` when it can be
    read (also from a broken payload: docs/protocol.md, "Errors") and is a valid reply topic,
    exactly what the services salvage from a rejected message."""
    return salvage_reply(payload, topics)[0]


def fuzz_cases(
    topics: Topics,
    n: int,
    *,
    seed: int = 0,
    valid_share: float = 0.2,
    tile_of: TileOf | None = None,
    wrong_tile_share: float = 0.1,
) -> Iterator[FuzzCase]:
    """``n`` seeded cases over every request topic; ``valid_share`` of them unmutated. Every
    case has its own reply topic ``reply/fz<i>`` so that answers can be counted per case.
    With ``tile_of`` (services with tiles) requests travel on their position's tile topic, and
    ``wrong_tile_share`` of them on a wrong or malformed tile segment instead."""
    rng = random.Random(seed)
    mutations = _mutations(topics)
    routes: dict[str, Callable[[str, str], str]] = {
        "loc": lambda user, tile: topics.location(user, tile=tile),
        "p1": lambda user, tile: topics.p1_query(user, tile=tile),
        "p2": lambda user, tile: topics.p2_query(user, tile=tile),
        "p3": lambda user, tile: topics.p3_cloak(user, tile=tile),
        "ds": lambda _user, _tile: topics.ds_query,
    }
    for i in range(n):
        kind = rng.choice(list(routes))
        reply_to = topics.reply(f"fz{i}")
        body = _valid(kind, topics, reply_to, f"c{i}", rng)
        tile, wrong = WORLD_TILE, None
        if tile_of is not None and "lat" in body:
            tile = tile_of(body["lon"], body["lat"]) or WORLD_TILE
            if rng.random() < wrong_tile_share:
                wrong = _wrong_tile(tile, rng)
        # published on the sender's own topic (all a broker ACL allows), whatever the payload says
        topic = routes[kind](body.get("user_id", f"f{rng.randrange(50)}"), tile)
        if wrong is not None:  # raw: Topics refuses to build a malformed segment
            topic = topic.replace(f"/{tile}/", f"/{wrong}/", 1)
        if rng.random() >= valid_share:
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                body = rng.choice(mutations)(body, rng)
                if not isinstance(body, dict):
                    break
        payload = _encode(body)
        yield FuzzCase(topic, payload, _reply_of(payload, topics))


def stray_topics(topics: Topics, seen: Mapping[str, int], sent: Mapping[str, int]) -> list[str]:
    """Topics the services published on outside their namespaces: every topic an observer of
    ``{root}/#`` saw more often (``seen``) than the test itself published there (``sent``),
    except replies, error topics, status, the retained deployment configuration, the
    mediator's DS hop (``ds/query``, and the service lane ``svc/ds/query``, ``svc/reply/+``)
    and the anonymizer's fix requests to a session's members (``fix/+``)."""
    return sorted(
        topic
        for topic, n in seen.items()
        if n > sent.get(topic, 0)
        and not (
            topic.startswith((topics.reply_prefix, topics.svc_reply_prefix))
            or matches(topics.errors_filter, topic)
            or matches(f"{topics.root}/status/+", topic)
            or matches(topics.fix_wanted_filter, topic)
            or topic in (topics.ds_query, topics.svc_ds_query, topics.config)
        )
    )
