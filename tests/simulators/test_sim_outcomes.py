"""simulators.outcomes.error_key: the key a failed query is tallied under."""

from __future__ import annotations

from locpriv.errors import GroupInfeasible, RemoteError, RequestTimeout
from simulators.outcomes import error_key


def test_error_keys_name_the_code_and_the_groups_reason() -> None:
    local = GroupInfeasible("area_too_small: thin", reason_code="area_too_small")
    assert error_key(local) == "group_infeasible:area_too_small"
    # a GroupInfeasible that names no reason is tallied by its code, not as ":None"
    assert error_key(GroupInfeasible("no group")) == "group_infeasible"
    # an error reply keeps its raw wire code, also one this side does not know
    assert error_key(RemoteError("group_infeasible", "remote")) == "group_infeasible"
    assert error_key(RemoteError("from_the_future", "x")) == "from_the_future"
    assert error_key(RequestTimeout("late")) == "timeout"
