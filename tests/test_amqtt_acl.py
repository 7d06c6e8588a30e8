"""deploy/acl's rules for amqtt (locpriv.service.amqtt_acl.allowed): who publishes and receives
what, by login and client id. The real broker runs them in tests/integration/test_deploy_amqtt.py.
"""

from __future__ import annotations

import pytest

from locpriv.service.amqtt_acl import allowed
from locpriv.wire.topics import Topics

T = Topics()


def _ok(user: str | None, topic: str, *, write: bool, cid: str = "c-alice") -> bool:
    return allowed(T, username=user, client_id=cid, topic=topic, write=write)


@pytest.mark.parametrize(
    ("user", "topic", "write", "expected"),
    [
        ("alice", T.location("alice", tile="t1_2"), True, True),
        ("alice", T.location("bob", tile="t1_2"), True, False),
        ("alice", T.p1_query("alice"), True, True),
        ("alice", T.p3_cloak("bob"), True, False),
        ("alice", T.issue("alice"), True, True),
        ("alice", T.issue("bob"), True, False),
        ("alice", T.ds_query, True, True),
        ("alice", T.ds_query, False, False),
        ("alice", T.svc_ds_query, True, False),
        ("alice", T.svc_reply("x"), True, False),
        ("alice", T.svc_reply("c-alice"), False, False),
        ("alice", T.reply("c-alice"), False, True),
        ("alice", T.reply("c-bob"), False, False),
        ("alice", T.location("alice"), False, False),
        ("alice", T.config, False, True),
        ("alice", T.config, True, False),
        ("alice", T.status("ds"), False, True),
        ("alice", T.status("ds"), True, False),
        ("alice", T.peer_cell("g100_1_2"), False, True),
        ("alice", T.peer_reply("g100_1_2", "x"), False, True),
        ("alice", T.peer_reply("g100_1_2", "x"), True, True),
        ("alice", T.reply("c-bob"), True, False),  # only services answer on reply topics
        ("alice", T.reply("c-alice"), True, False),
        ("locpriv-ds", T.reply("c-alice"), True, True),
        ("locpriv-issuer", T.reply("c-alice"), True, True),
        ("locpriv-anonymizer", T.reply("c-alice"), True, True),
        ("alice", "$SYS/broker/clients", False, False),
        ("locpriv-ds", T.ds_query, False, True),
        ("locpriv-ds", T.svc_ds_query, False, True),
        ("locpriv-ds", T.svc_reply("locpriv-anonymizer-x"), True, True),
        ("locpriv-ds", T.location("alice"), False, False),
        ("locpriv-issuer", T.issue("alice"), False, True),
        ("locpriv-issuer", T.location("alice"), False, False),
        ("locpriv-anonymizer", T.location("alice"), False, True),
        ("locpriv-anonymizer", T.svc_ds_query, True, True),
        ("locpriv-anonymizer", T.svc_reply("locpriv-anonymizer-x"), False, True),
        ("alice", T.fix_wanted("alice"), False, True),  # her own fix requests only
        ("alice", T.fix_wanted("bob"), False, False),
        ("alice", T.fix_wanted("alice"), True, False),  # only the anonymizer asks
        ("alice", T.fix_wanted("bob"), True, False),
        ("locpriv-anonymizer", T.fix_wanted("alice"), True, True),
        ("locpriv-ds", T.fix_wanted("alice"), True, False),
        ("locpriv-ds", T.fix_wanted("alice"), False, False),
        (None, T.config, False, False),  # anonymous: nothing
        ("", T.config, False, False),
        ("a/b", f"{T.root}/loc/t0_0/a/b", True, False),
    ],
)
def test_rules(user: str | None, topic: str, write: bool, expected: bool) -> None:
    assert _ok(user, topic, write=write) is expected


def test_a_client_id_with_wildcards_matches_no_reply_topic() -> None:
    assert not _ok("alice", T.reply("c-bob"), write=False, cid="+")
    assert not _ok("alice", T.reply("c-bob"), write=False, cid="#")
