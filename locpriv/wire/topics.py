"""MQTT topic templates, in one place, under a configurable prefix.

All topics live under ``{prefix}/v1/``; the default prefix is ``locpriv``. Service request
topics may be subscribed through a shared subscription (``$share/{group}/...``) on brokers
that support it (mosquitto) so that several service processes split the load.

==========================  ====================================  =====  ========
topic                       payload                               QoS    retained
==========================  ====================================  =====  ========
``loc/{tile}/{user_id}``    LocationUpdate (user -> anonymizer)   0/1    no
                            or LocationLeave (tile change)
``p1/query/{tile}/{user}``  QueryRequest protocol=1               1      no
``p2/query/{tile}/{user}``  QueryRequest protocol=2               1      no
``p3/cloak/{tile}/{user}``  CloakRequest                          1      no
``config``                  DeploymentConfig (services -> all)    1      yes
``ds/query``                DSQuery (apps: P3's second hop, P4)   1      no
``svc/ds/query``            DSQuery (mediator -> DS only)         1      no
``reply/{client_id}``       replies: CloakReply, QueryAnswer,     1      no
                            ErrorReply, IssueAnswer
``svc/reply/{client_id}``   QueryAnswer/ErrorReply (DS ->         1      no
                            mediator only), with a ``mac``
``errors/{service}``        ErrorReply for unparseable requests   1      no
``peer/cell/{cell}``        PeerRequest (Protocol 4 discovery)    0      no
``peer/cell/{c}/r/{id}``    PeerReply (Protocol 4, per query;     1      no
                            ``{c}``: the request's cell)
``status/{service}``        "online"/"offline" (last will)        1      yes
``issue/{user}``            IssueRequest (device -> issuer)       1      no
``issuer/key``              IssuerKeys (issuer -> all)            1      yes
==========================  ====================================  =====  ========

Every topic that names a user ends with her id, the segment a broker ACL binds to the
authenticated username (mosquitto ``pattern write .../+/%u``); the services take the identity
from that segment (:meth:`Topics.user_of`), and a payload ``user_id`` must equal it. The segment
before it is the **tile** of the position (:mod:`locpriv.core.tiles`; ``t0_0`` when the
deployment has no tiles), which lets the broker route a tile's traffic to the shard owning it;
clients compute it from the retained ``config`` message (:meth:`Topics.config`).

Service topics (``svc/...``): the mediator's queries to DS and DS's answers travel on topics of
their own that the broker's ACL lets only the service accounts use (the anonymizer writes
``svc/ds/query`` and reads ``svc/reply/#``; DS reads the first and writes the second), so an
app flood of the public ``ds/query`` is a separate lane at DS, and no app reads or writes DS's
answers to the mediator. Those answers also carry a MAC (:class:`locpriv.protocols.seal.
AnswerMac`): the mediator relays only what DS produced for the query it sent.

Protocol 4: a requester's peers answer on ``peer/cell/{cell}/r/{random}`` (:meth:`Topics.
peer_reply`), under the cell its request is centred on, which it reads on its main connection
(no connection's client id is named by it, so knowing the topic lets nobody take a connection
over); DS answers it on a fresh ``reply/p4-<random>`` read on a connection of its own (DS alone
sees that topic). ``{cell}`` is ``g{side_m}_{row}_{col}`` from :mod:`locpriv.core.cells`
(docs/peer.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

DEFAULT_PREFIX: Final = "locpriv"
VERSION_SEGMENT: Final = "v1"
_SEGMENT = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
_TOPIC = re.compile(r"^[A-Za-z0-9_.:@-]+(?:/[A-Za-z0-9_.:@-]+)*$")
WORLD_TILE: Final = "t0_0"
"""The tile segment of a deployment without tiles (see :mod:`locpriv.core.tiles`)."""
_REQUEST_HEADS: Final = ("loc", "p1/query", "p2/query", "p3/cloak")
MAX_TOPIC_CHARS: Final = 512
"""Longest topic locpriv publishes on (characters, all ASCII)."""


def is_topic_name(topic: str) -> bool:
    """True for a topic locpriv may publish on: ``/``-separated levels of ``[A-Za-z0-9_.:@-]``.

    No wildcards, no ``$``, no empty level, no control or non-ASCII character, at most
    :data:`MAX_TOPIC_CHARS`: a broker can never reject such a name as a malformed packet.
    """
    return len(topic) <= MAX_TOPIC_CHARS and _TOPIC.fullmatch(topic) is not None


def _segment(value: str, what: str) -> str:
    if not _SEGMENT.fullmatch(value):
        raise ValueError(f"{what} {value!r} is not a valid topic segment")
    return value


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic names for one deployment; ``prefix`` may contain ``/`` but no wildcards."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not is_topic_name(self.prefix) or len(self.prefix) > 128:
            raise ValueError(
                f"invalid topic prefix {self.prefix!r}: levels of [A-Za-z0-9_.:@-] separated"
                " by '/', at most 128 characters"
            )

    @property
    def root(self) -> str:
        """``{prefix}/v1``."""
        return f"{self.prefix}/{VERSION_SEGMENT}"

    def location(self, user_id: str, *, tile: str = WORLD_TILE) -> str:
        """Where a user in ``tile`` publishes her location updates."""
        return f"{self.root}/loc/{_segment(tile, 'tile')}/{_segment(user_id, 'user id')}"

    @property
    def location_filter(self) -> str:
        """Subscription filter for every user's location updates, in every tile."""
        return f"{self.root}/loc/+/+"

    def p1_query(self, user_id: str, *, tile: str = WORLD_TILE) -> str:
        """Where ``user_id`` in ``tile`` sends Protocol 1 requests (mediator with cloaking)."""
        return f"{self.root}/p1/query/{_segment(tile, 'tile')}/{_segment(user_id, 'user id')}"

    def p2_query(self, user_id: str, *, tile: str = WORLD_TILE) -> str:
        """Where ``user_id`` in ``tile`` sends Protocol 2 requests (mediator without cloaking)."""
        return f"{self.root}/p2/query/{_segment(tile, 'tile')}/{_segment(user_id, 'user id')}"

    def p3_cloak(self, user_id: str, *, tile: str = WORLD_TILE) -> str:
        """Where ``user_id`` in ``tile`` sends Protocol 3 requests (the anonymizer returns a
        region only)."""
        return f"{self.root}/p3/cloak/{_segment(tile, 'tile')}/{_segment(user_id, 'user id')}"

    @property
    def p1_query_filter(self) -> str:
        """Subscription filter for every user's Protocol 1 requests."""
        return f"{self.root}/p1/query/+/+"

    @property
    def p2_query_filter(self) -> str:
        """Subscription filter for every user's Protocol 2 requests."""
        return f"{self.root}/p2/query/+/+"

    @property
    def p3_cloak_filter(self) -> str:
        """Subscription filter for every user's Protocol 3 requests."""
        return f"{self.root}/p3/cloak/+/+"

    def tile_filters(self, tile: str) -> list[str]:
        """The filters of one tile's location updates and P1-P3 requests (a shard's share)."""
        t = _segment(tile, "tile")
        return [f"{self.root}/{head}/{t}/+" for head in _REQUEST_HEADS]

    def _split(self, topic: str) -> tuple[str, str] | None:
        """``(tile, user)`` of a location or request topic, or None."""
        for head in _REQUEST_HEADS:
            prefix = f"{self.root}/{head}/"
            if topic.startswith(prefix):
                tile, sep, user = topic[len(prefix) :].partition("/")
                if sep and _SEGMENT.fullmatch(tile) and _SEGMENT.fullmatch(user):
                    return tile, user
                return None
        return None

    def user_of(self, topic: str) -> str | None:
        """The user a location or request topic belongs to (its last segment), or None when
        ``topic`` is not one of them. The broker's ACL binds that segment to the username."""
        parts = self._split(topic)
        return None if parts is None else parts[1]

    def tile_of(self, topic: str) -> str | None:
        """The tile segment of a location or request topic, or None."""
        parts = self._split(topic)
        return None if parts is None else parts[0]

    def fix_wanted(self, user_id: str) -> str:
        """Where the anonymizer asks ``user_id``'s device for a fresh location report
        (:class:`~locpriv.wire.messages.FixWanted`); the broker's ACL lets only that login read
        it and only the anonymizer write it."""
        return f"{self.root}/fix/{_segment(user_id, 'user id')}"

    @property
    def fix_wanted_filter(self) -> str:
        """Subscription filter for every device's fix requests."""
        return f"{self.root}/fix/+"

    @property
    def config(self) -> str:
        """Retained :class:`~locpriv.wire.messages.DeploymentConfig` published by the services:
        what clients need to compute their tile."""
        return f"{self.root}/config"

    @property
    def ds_query(self) -> str:
        """Queries for the location-based database server."""
        return f"{self.root}/ds/query"

    @property
    def svc_ds_query(self) -> str:
        """The mediator's (P1/P2) queries to DS: only the anonymizer account writes here, only
        DS reads (the service lane DS serves before the public ``ds/query``)."""
        return f"{self.root}/svc/ds/query"

    def svc_reply(self, client_id: str) -> str:
        """Where DS answers a mediator process: only the DS account writes here, only the
        anonymizer account reads."""
        return f"{self.root}/svc/reply/{_segment(client_id, 'client id')}"

    @property
    def svc_reply_prefix(self) -> str:
        """``{prefix}/v1/svc/reply/``: every service reply topic starts with it."""
        return f"{self.root}/svc/reply/"

    def is_svc_reply(self, topic: str) -> bool:
        """True when ``topic`` is ``{prefix}/v1/svc/reply/`` and one valid segment."""
        prefix = self.svc_reply_prefix
        return topic.startswith(prefix) and _SEGMENT.fullmatch(topic[len(prefix) :]) is not None

    def reply(self, client_id: str) -> str:
        """A client's private reply topic."""
        return f"{self.root}/reply/{_segment(client_id, 'client id')}"

    @property
    def reply_prefix(self) -> str:
        """``{prefix}/v1/reply/``: every reply topic starts with it."""
        return f"{self.root}/reply/"

    def is_reply(self, topic: str) -> bool:
        """True when ``topic`` is ``{prefix}/v1/reply/`` and one valid segment: the only
        topics a service or device answers on, whatever a request's ``reply_to`` asks."""
        prefix = self.reply_prefix
        return topic.startswith(prefix) and _SEGMENT.fullmatch(topic[len(prefix) :]) is not None

    def errors(self, service: str) -> str:
        """Where a service reports requests it could not even address a reply to."""
        return f"{self.root}/errors/{_segment(service, 'service')}"

    @property
    def errors_filter(self) -> str:
        """Subscription filter for every service's error topic."""
        return f"{self.root}/errors/+"

    def peer_cell(self, cell: str) -> str:
        """Protocol 4 discovery topic of one spatial cell."""
        return f"{self.root}/peer/cell/{_segment(cell, 'cell')}"

    def peer_reply(self, cell: str, reply_id: str) -> str:
        """A Protocol 4 requester's reply topic for one query, ``peer/cell/{cell}/r/{reply_id}``:
        ``cell`` is the cell of the request's (perturbed) point, ``reply_id`` fresh random.

        Two levels below the cell's discovery topic, so ``peer/cell/+`` does not match it
        (``peer/cell/#`` does: every login of the deployment may read it, docs/peer.md)."""
        return f"{self.peer_cell(cell)}/r/{_segment(reply_id, 'reply id')}"

    def peer_reply_cell(self, topic: str) -> str | None:
        """The cell of a :meth:`peer_reply` topic, or None when ``topic`` is not exactly
        ``{prefix}/v1/peer/cell/<one segment>/r/<one segment>``."""
        prefix = f"{self.root}/peer/cell/"
        if not topic.startswith(prefix):
            return None
        parts = topic[len(prefix) :].split("/")
        if len(parts) != 3 or parts[1] != "r":
            return None
        if not (_SEGMENT.fullmatch(parts[0]) and _SEGMENT.fullmatch(parts[2])):
            return None
        return parts[0]

    def issue(self, user_id: str) -> str:
        """Where ``user_id`` asks the issuer for a Protocol 4 token (blinded; the broker's ACL
        binds the last segment to the login)."""
        return f"{self.root}/issue/{_segment(user_id, 'user id')}"

    @property
    def issue_filter(self) -> str:
        """Subscription filter for every login's token requests (the issuer's)."""
        return f"{self.root}/issue/+"

    def issue_user(self, topic: str) -> str | None:
        """The login an ``issue/{user}`` topic belongs to, or None for any other topic."""
        prefix = f"{self.root}/issue/"
        if not topic.startswith(prefix):
            return None
        user = topic[len(prefix) :]
        return user if _SEGMENT.fullmatch(user) else None

    @property
    def issuer_keys(self) -> str:
        """Retained :class:`~locpriv.wire.messages.IssuerKeys` of the token issuer."""
        return f"{self.root}/issuer/key"

    def status(self, service: str) -> str:
        """Retained liveness of a service (``online``/``offline``, set by last will)."""
        return f"{self.root}/status/{_segment(service, 'service')}"


def shared(topic_filter: str, group: str) -> str:
    """A shared subscription (MQTT 5, and mosquitto for 3.1.1 too) splitting load in ``group``."""
    return f"$share/{_segment(group, 'group')}/{topic_filter}"


def matches(topic_filter: str, topic: str) -> bool:
    """True when ``topic`` matches the MQTT filter (``+`` one level, ``#`` the rest)."""
    if topic_filter.startswith("$share/"):
        topic_filter = topic_filter.split("/", 2)[2]
    f_parts = topic_filter.split("/")
    t_parts = topic.split("/")
    if topic.startswith("$") and f_parts[0] in ("+", "#"):
        return False
    for i, fp in enumerate(f_parts):
        if fp == "#":
            return True
        if i >= len(t_parts):
            return False
        if fp not in ("+", t_parts[i]):
            return False
    return len(f_parts) == len(t_parts)


__all__ = [
    "DEFAULT_PREFIX",
    "MAX_TOPIC_CHARS",
    "WORLD_TILE",
    "Topics",
    "is_topic_name",
    "matches",
    "shared",
]
