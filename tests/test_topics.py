"""Topic templates and MQTT filter matching."""

from __future__ import annotations

import pytest

from locpriv.wire.topics import Topics, matches, shared


def test_templates_use_prefix() -> None:
    t = Topics("city/bcn")
    assert t.location("u-1") == "city/bcn/v1/loc/t0_0/u-1"
    assert t.location("u-1", tile="t-3_4") == "city/bcn/v1/loc/t-3_4/u-1"
    assert t.config == "city/bcn/v1/config"
    assert matches(t.location_filter, t.location("u-1"))
    assert t.reply("c1") == "city/bcn/v1/reply/c1"
    assert t.peer_cell("g12_34") == "city/bcn/v1/peer/cell/g12_34"
    assert matches(t.errors_filter, t.errors("anonymizer"))
    assert len({t.p1_query("a"), t.p2_query("a"), t.p3_cloak("a"), t.ds_query}) == 4
    assert t.p3_cloak("alice", tile="t1_2") == "city/bcn/v1/p3/cloak/t1_2/alice"
    for filt, topic in [
        (t.p1_query_filter, t.p1_query("u-1")),
        (t.p2_query_filter, t.p2_query("u-1")),
        (t.p3_cloak_filter, t.p3_cloak("u-1")),
    ]:
        assert matches(filt, topic) and not matches(filt, t.p3_cloak("u-1") + "x/y")


def test_user_of_reads_the_user_segment_of_user_topics_only() -> None:
    t = Topics("city/bcn")
    for make in (t.location, t.p1_query, t.p2_query, t.p3_cloak):
        topic = make("al", tile="t5_-6")
        assert t.user_of(topic) == "al"
        assert t.tile_of(topic) == "t5_-6"
    for other in (
        t.ds_query,
        t.reply("al"),
        t.status("al"),
        t.config,
        "city/bcn/v1/p3/cloak/al",  # no tile
        "city/bcn/v1/p3/cloak/t0_0/a/b",  # a level too many
        "x",
    ):
        assert t.user_of(other) is None and t.tile_of(other) is None


def test_tile_filters_match_their_tile_only() -> None:
    t = Topics()
    filters = t.tile_filters("t1_1")
    topics = [t.location("u"), t.p1_query("u"), t.p2_query("u"), t.p3_cloak("u")]
    for flt, topic in zip(filters, topics, strict=True):
        assert not matches(flt, topic)  # t0_0
        assert matches(flt, topic.replace("/t0_0/", "/t1_1/"))
    assert len(set(filters)) == 4


@pytest.mark.parametrize("bad", ["", "a/#", "+", "$SYS", "a/"])
def test_bad_prefix(bad: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        Topics(bad)


@pytest.mark.parametrize("bad", ["a/b", "+", "#", "", "x" * 200])
def test_segments_cannot_inject_levels(bad: str) -> None:
    with pytest.raises(ValueError, match="segment"):
        Topics().location(bad)
    with pytest.raises(ValueError, match="segment"):
        Topics().p3_cloak(bad)
    with pytest.raises(ValueError, match="segment"):
        Topics().p3_cloak("alice", tile=bad)


@pytest.mark.parametrize(
    ("flt", "topic", "ok"),
    [
        ("a/+/c", "a/b/c", True),
        ("a/+/c", "a/b/d", False),
        ("a/#", "a", True),
        ("a/#", "a/b/c", True),
        ("#", "$SYS/x", False),
        ("a/b", "a/b/c", False),
        ("a/b/c", "a/b", False),
        (shared("a/+", "svc"), "a/x", True),
    ],
)
def test_matches(flt: str, topic: str, ok: bool) -> None:
    assert matches(flt, topic) is ok
