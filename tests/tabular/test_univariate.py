"""Optimal univariate microaggregation against exhaustive search."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.errors import DataError, InfeasibleError
from locpriv.tabular.microagg.univariate import optimal_univariate, optimal_univariate_sse
from locpriv.tabular.quality.metrics import sse


def _group_sse(vals: list[float]) -> float:
    m = sum(vals) / len(vals)
    return sum((v - m) ** 2 for v in vals)


def _best_contiguous(v: list[float], k: int) -> float:
    """Exhaustive: every split of the sorted values into runs of k..2k-1 records."""
    v = sorted(v)
    n = len(v)

    @cache
    def best(i: int) -> float:  # the values v[i:]
        if i == n:
            return 0.0
        return min(
            (_group_sse(v[i : i + s]) + best(i + s) for s in range(k, 2 * k) if i + s <= n),
            default=np.inf,
        )

    return best(0)


def _set_partitions(n: int) -> Iterator[list[int]]:
    """All partitions of range(n) as restricted growth strings."""
    a = [0] * n

    def rec(i: int, top: int) -> Iterator[list[int]]:
        if i == n:
            yield a
            return
        for b in range(top + 2):
            a[i] = b
            yield from rec(i + 1, max(top, b))

    if n:
        yield from rec(1, 0)


def _best_any_partition(v: list[float], k: int) -> float:
    """Exhaustive over every partition into groups of at least k records (any shape)."""
    best = np.inf
    for labels in _set_partitions(len(v)):
        groups: dict[int, list[float]] = {}
        for lab, x in zip(labels, v, strict=True):
            groups.setdefault(lab, []).append(x)
        if min(len(g) for g in groups.values()) >= k:
            best = min(best, sum(_group_sse(g) for g in groups.values()))
    return best


values = st.lists(
    st.one_of(st.integers(-20, 20).map(float), st.floats(-1e3, 1e3, allow_nan=False)),
    min_size=1,
    max_size=40,
)


def _check(v: list[float], k: int, expected: float) -> None:
    labels = optimal_univariate(np.array(v), k)
    sizes = np.bincount(labels)
    assert (sizes >= k).all() and (sizes <= 2 * k - 1).all()
    assert labels.min() == 0 and len(sizes) == labels.max() + 1
    got = sse(np.array(v)[:, None], labels)
    scale = 1.0 + sum(x * x for x in v)
    assert got == pytest.approx(expected, abs=1e-9 * scale)
    assert optimal_univariate_sse(v, k) == pytest.approx(expected, abs=1e-9 * scale)
    # groups are runs of the sorted values, labelled in increasing order
    order = np.argsort(v, kind="stable")
    assert (np.diff(labels[order]) >= 0).all()


@settings(max_examples=300, deadline=None)
@given(values, st.integers(1, 6))
def test_equals_exhaustive_contiguous(v: list[float], k: int) -> None:
    k = min(k, len(v))
    _check(v, k, _best_contiguous(v, k))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-10, 10).map(float), min_size=1, max_size=9), st.integers(1, 4))
def test_equals_exhaustive_any_partition(v: list[float], k: int) -> None:
    k = min(k, len(v))
    _check(v, k, _best_any_partition(v, k))


def test_example_and_ties() -> None:
    assert optimal_univariate([1.0, 2, 3, 10, 11, 12, 13], 3).tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert optimal_univariate(np.zeros(5), 2).tolist() == [0, 0, 0, 1, 1]
    assert optimal_univariate(np.arange(6.0)[:, None], 3).tolist() == [0, 0, 0, 1, 1, 1]


def test_large_input_is_fast_and_valid() -> None:
    x = np.random.default_rng(0).lognormal(size=200_000)
    labels = optimal_univariate(x, 5)
    sizes = np.bincount(labels)
    assert sizes.min() >= 5 and sizes.max() <= 9


@pytest.mark.parametrize(
    ("x", "k", "exc"),
    [
        (np.zeros((3, 2)), 1, DataError),
        (np.array([]), 1, DataError),
        (np.array([1.0, np.inf]), 1, DataError),
        (np.zeros(3), 4, InfeasibleError),
        (np.zeros(3), 0, InfeasibleError),
    ],
)
def test_invalid_input(x: np.ndarray, k: int, exc: type[Exception]) -> None:
    with pytest.raises(exc):
        optimal_univariate(x, k)
