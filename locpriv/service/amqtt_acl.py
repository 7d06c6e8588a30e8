"""deploy/acl for amqtt 0.12: which login may publish or receive what, as a broker plugin.

amqtt's own ``TopicAccessControlListPlugin`` lists topics per user name and has no ``%u``/``%c``,
so it cannot say "alice publishes on ``loc/+/alice`` only". :class:`LoginACLPlugin` holds the
same rules as the mosquitto ACL (deploy/acl) for the password-file deployment
(deploy/amqtt-broker-auth.yaml), decided by :func:`allowed` (pure):

* every login (apps, and the services): publish on ``loc|p1/query|p2/query|p3/cloak/+/<own
  user name>``, ``issue/<own user name>``, ``ds/query``, ``peer/cell/#``; receive
  ``config``, ``reply/<own client id>``, ``fix/<own user name>``, ``peer/cell/#``,
  ``status/+``;
* ``ds_user``: also receives ``ds/query`` and ``svc/ds/query``, publishes on ``reply/+``,
  ``svc/reply/+``, ``errors/ds`` and ``status/ds``;
* ``issuer_user``: also receives ``issue/+``, publishes on ``reply/+``;
* ``anonymizer_user`` (a standalone anonymizer; the in-broker one needs no login): receives
  locations, requests, ``svc/reply/+``, ``status/+``; publishes ``reply/+``, ``fix/+``,
  ``svc/ds/query``, ``errors/anonymizer``, ``config``, ``status/+``.

Only the services publish on ``reply/+``: Protocol 4's peer replies travel on
``peer/cell/<cell>/r/<id>`` (docs/peer.md).

Subscriptions are all granted (as mosquitto acknowledges a denied one) and every delivery is
checked (amqtt's ``RECEIVE``), so a ``#`` subscription gets only what its login may read.
Anonymous sessions get nothing. amqtt hands retained messages to a new subscription without
asking the plugin: only the services' retained ``config`` and ``status/*`` exist, both public.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amqtt.contexts import Action
from amqtt.plugins.base import BaseTopicPlugin

from locpriv.service.amqtt_compat import guard_subscription_walk
from locpriv.service.identity import ANONYMIZER, DS
from locpriv.wire.topics import Topics, matches

__all__ = ["ISSUER", "LoginACLPlugin", "allowed"]

ISSUER = "locpriv-issuer"
"""Login of the P4 token issuer service."""

_APP_WRITE = (
    "loc/+/{u}",
    "p1/query/+/{u}",
    "p2/query/+/{u}",
    "p3/cloak/+/{u}",
    "issue/{u}",
    "ds/query",
    "peer/cell/#",
)
_APP_READ = ("config", "reply/{c}", "fix/{u}", "peer/cell/#", "status/+")
_SERVICE_READ = {
    "ds": ("ds/query", "svc/ds/query", "status/ds"),
    "issuer": ("issue/+",),
    "anonymizer": (
        "loc/+/+",
        "p1/query/+/+",
        "p2/query/+/+",
        "p3/cloak/+/+",
        "svc/reply/+",
        "status/+",
    ),
}
_SERVICE_WRITE = {
    "ds": ("reply/+", "svc/reply/+", "errors/ds", "status/ds"),
    "issuer": ("reply/+",),
    "anonymizer": (
        "reply/+",
        "fix/+",
        "svc/ds/query",
        "errors/anonymizer",
        "config",
        "status/+",
    ),
}


def _segment_ok(value: str) -> bool:
    return bool(value) and not any(ch in value for ch in "/+#")


def allowed(
    topics: Topics,
    *,
    username: str | None,
    client_id: str,
    topic: str,
    write: bool,
    roles: dict[str, str] | None = None,
) -> bool:
    """May login ``username`` (connected as ``client_id``) publish (``write``) or receive
    ``topic``? ``roles`` maps service logins to ``ds``, ``issuer``, ``anonymizer``."""
    if not username or not _segment_ok(username) or topic.startswith("$"):
        return False
    roles = roles if roles is not None else {DS: "ds", ISSUER: "issuer", ANONYMIZER: "anonymizer"}
    patterns = list(_APP_WRITE if write else _APP_READ)
    role = roles.get(username)
    if role is not None:
        patterns += (_SERVICE_WRITE if write else _SERVICE_READ)[role]
    cid = client_id if _segment_ok(client_id) else "\x00"  # an odd id matches no reply topic
    root = topics.root
    return any(matches(f"{root}/{p.format(u=username, c=cid)}", topic) for p in patterns)


class LoginACLPlugin(BaseTopicPlugin):  # type: ignore[misc]
    """amqtt topic plugin enforcing :func:`allowed` on every publish and delivery."""

    @dataclass
    class Config:
        """Options: the topic prefix and the services' logins."""

        prefix: str = "locpriv"
        ds_user: str = DS
        issuer_user: str = ISSUER
        anonymizer_user: str = ANONYMIZER

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        # the shipped amqtt -c deployment loads this plugin: fix the broker's defects here too
        guard_subscription_walk(getattr(context, "_broker_instance", None))
        opts: LoginACLPlugin.Config = self.config
        self.topics = Topics(opts.prefix)
        self.roles = {
            opts.ds_user: "ds",
            opts.issuer_user: "issuer",
            opts.anonymizer_user: "anonymizer",
        }

    async def topic_filtering(
        self, *, session: Any = None, topic: str | None = None, action: Any = None
    ) -> bool:
        """True when the session's login may do ``action`` on ``topic``."""
        if action == Action.SUBSCRIBE:
            return True  # every delivery is checked (RECEIVE)
        if session is None or not topic or action not in (Action.PUBLISH, Action.RECEIVE):
            return False
        return allowed(
            self.topics,
            username=getattr(session, "username", None),
            client_id=str(getattr(session, "client_id", "") or ""),
            topic=topic,
            write=action == Action.PUBLISH,
            roles=self.roles,
        )
