"""Topic templates and MQTT filter matching."""

from __future__ import annotations

import pytest

from locpriv.wire.topics import Topics, matches, shared


def test_templates_use_prefix() -> None:
    t = Topics("city/bcn")
    assert t.location("u-1") == "city/bcn/v1/loc/u-1"
    assert matches(t.location_filter, t.location("u-1"))
    assert t.reply("c1") == "city/bcn/v1/reply/c1"
    assert t.peer_cell("g12_34") == "city/bcn/v1/peer/cell/g12_34"
    assert matches(t.errors_filter, t.errors("anonymizer"))
    assert len({t.p1_query, t.p2_query, t.p3_cloak, t.ds_query}) == 4


@pytest.mark.parametrize("bad", ["", "a/#", "+", "$SYS", "a/"])
def test_bad_prefix(bad: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        Topics(bad)


@pytest.mark.parametrize("bad", ["a/b", "+", "#", "", "x" * 200])
def test_segments_cannot_inject_levels(bad: str) -> None:
    with pytest.raises(ValueError, match="segment"):
        Topics().location(bad)


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
