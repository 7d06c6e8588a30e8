"""The parties of ``repeated_cloaks_attack`` (stays that end together): who shares whose
draws."""

from __future__ import annotations

import numpy as np
import pytest

from simulators.attacks import party_leads


@pytest.mark.parametrize(("users", "askers", "size"), [(20, 4, 3), (23, 5, 5), (11, 9, 3)])
def test_askers_are_alone_and_the_rest_come_in_parties(users: int, askers: int, size: int) -> None:
    lead = party_leads(users, askers, size)
    assert lead.shape == (users,)
    assert np.array_equal(lead[:askers], np.arange(askers))
    rest = lead[askers:]
    leads, counts = np.unique(rest, return_counts=True)
    # each party is led by its first member, holds `size` consecutive users (the last fewer)
    assert np.array_equal(lead[leads], leads)
    assert np.all(counts[:-1] == size) and 0 < counts[-1] <= size
    assert np.all(np.diff(rest) >= 0) and np.all(rest <= np.arange(askers, users))


def test_parties_of_one_are_everyone_alone() -> None:
    assert np.array_equal(party_leads(12, 3, 1), np.arange(12))
