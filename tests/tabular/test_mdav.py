"""Fixed-size MDAV: published figures, the documented tie-breaks, invariants, equality with a
plain numpy reference implementation (tests/tabular/_mdav_helpers.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.errors import DataError, InfeasibleError
from locpriv.tabular.microagg._kernels.mdav_blocks import mdav_blocks
from locpriv.tabular.microagg._kernels.mdav_sweep import mdav_kernel
from locpriv.tabular.microagg.mdav import effective_dimension, mdav
from locpriv.tabular.quality.metrics import il_percent
from tests.tabular._mdav_helpers import load_census, mdav_reference, needs_census


def _assert_all_kernels_match(X: np.ndarray, k: int, msg: str = "") -> np.ndarray:
    """The public function and both kernels (blocks of 128 and of 4 records) equal the
    reference; returns the reference labels."""
    ref = mdav_reference(X, k)
    Xf = np.ascontiguousarray(X, dtype=np.float64)
    stats = np.zeros(8, dtype=np.int64)
    no_s = np.zeros((Xf.shape[0], 0), dtype=np.int64)
    got = {
        "mdav": mdav(X, k),
        "sweep": mdav_kernel(Xf, k, stats, no_s, 0),
        "blocks": mdav_blocks(Xf, k, 128, stats, no_s, 0),
        "small_blocks": mdav_blocks(Xf, k, 4, stats, no_s, 0),
    }
    for name, labels in got.items():
        np.testing.assert_array_equal(labels, ref, err_msg=f"{msg} {name}")
    return ref


# IL = 100 SSE/SST of MDAV on Census (13 columns, z-scored), as tabulated in the literature.
CENSUS_IL = {3: 5.6922, 4: 7.4947, 5: 9.0884, 10: 14.1559}


@needs_census
@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("k", sorted(CENSUS_IL))
def test_census_information_loss(k: int, ddof: int) -> None:
    # ddof=0 and ddof=1 scale every column by the same factor: same partition, same IL
    X = load_census(ddof)
    labels = mdav(X, k)
    assert il_percent(X, labels) == pytest.approx(CENSUS_IL[k], abs=5e-4)
    _assert_all_kernels_match(X, k)


def test_pinned_edge_case_k2() -> None:
    X = np.array([[2.0, 1], [3, 2], [3, 2], [20, 19], [21, 20]])
    labels = mdav(X, 2)
    groups = {frozenset((np.flatnonzero(labels == g) + 1).tolist()) for g in np.unique(labels)}
    assert groups == {frozenset({1, 2, 3}), frozenset({4, 5})}
    assert labels.tolist() == [1, 1, 1, 0, 0]  # creation order: r's group first


def test_ties_lowest_index_wins() -> None:
    # all records identical: every distance ties, so groups are consecutive runs of indices
    labels = mdav(np.zeros((7, 2)), 2)
    assert labels.tolist() == [0, 0, 1, 1, 2, 2, 2]


def test_k1_and_k_equal_n() -> None:
    X = np.random.default_rng(1).normal(size=(9, 3))
    assert sorted(mdav(X, 1).tolist()) == list(range(9))
    assert mdav(X, 9).tolist() == [0] * 9


@pytest.mark.parametrize(
    ("X", "k", "exc", "word"),
    [
        (np.zeros((4, 2)), 0, InfeasibleError, "k"),
        (np.zeros((4, 2)), 5, InfeasibleError, "k"),
        (np.zeros((4, 2)), 2.0, InfeasibleError, "k"),
        (np.zeros((4, 2)), True, InfeasibleError, "k"),
        (np.zeros(4), 2, DataError, "X"),
        (np.zeros((0, 2)), 1, DataError, "X"),
        (np.array([[0.0, np.nan], [1, 1]]), 1, DataError, "X"),
        (np.array([["a", "b"]]), 1, DataError, "X"),
    ],
)
def test_invalid_input(X: np.ndarray, k: object, exc: type[Exception], word: str) -> None:
    with pytest.raises(exc, match=word):
        mdav(X, k)  # type: ignore[arg-type]


def _check_sizes(labels: np.ndarray, n: int, k: int) -> None:
    assert labels.shape == (n,)
    g = labels.max() + 1
    sizes = np.bincount(labels)
    assert len(sizes) == g and g == max(1, n // k)  # labels 0..g-1, every one used
    # all groups have k records except the last one created, with k..2k-1
    assert (sizes[:-1] == k).all()
    assert k <= sizes[-1] <= 2 * k - 1


@st.composite
def datasets(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    n = draw(st.integers(1, 80))
    d = draw(st.integers(1, 4))
    k = draw(st.integers(1, max(1, min(n, 7))))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(["normal", "grid", "duplicates", "clusters"]))
    rng = np.random.default_rng(seed)
    if kind == "normal":
        X = rng.normal(size=(n, d))
    elif kind == "grid":  # many exact distance ties
        X = rng.integers(0, 3, size=(n, d)).astype(np.float64)
    elif kind == "duplicates":
        base = rng.normal(size=(max(1, n // 3), d))
        X = base[rng.integers(0, len(base), n)]
    else:  # tight clusters far apart: the pivot of the centroid search moves often
        X = rng.normal(size=(3, d))[rng.integers(0, 3, n)] * 5 + rng.normal(size=(n, d)) * 0.1
    return X, k


@settings(max_examples=400, deadline=None)
@given(datasets())
def test_matches_reference_and_group_sizes(data: tuple[np.ndarray, int]) -> None:
    X, k = data
    _check_sizes(_assert_all_kernels_match(X, k), len(X), k)


@pytest.mark.parametrize(("n", "d", "k"), [(2000, 13, 3), (3000, 2, 5), (1500, 5, 4)])
def test_matches_reference_larger(n: int, d: int, k: int) -> None:
    X = np.random.default_rng(n + d + k).uniform(size=(n, d))
    _assert_all_kernels_match(X, k)


def _stress_cases() -> list[tuple[str, np.ndarray, int]]:
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(6, 6)) * 10
    return [
        # thousands of exact distance ties: the pruning must keep every tied candidate
        ("grid3", rng.integers(0, 5, size=(1500, 3)).astype(np.float64), 3),
        ("binary13", rng.integers(0, 2, size=(2000, 13)).astype(np.float64), 4),
        ("duplicates", np.repeat(rng.normal(size=(300, 5)), 7, axis=0), 5),
        # the pruning slack is relative: large offsets, tiny and mixed scales
        ("offset", 1e6 + rng.normal(size=(2000, 4)) * 1e-3, 3),
        ("tiny", rng.normal(size=(2000, 3)) * 1e-150, 2),
        ("anisotropic", rng.normal(size=(3000, 5)) * np.array([1e4, 1, 1e-3, 10, 1]), 3),
        ("clustered", np.concatenate([rng.normal(size=(500, 6)) * 0.01 + c for c in centres]), 3),
        ("one_column", rng.normal(size=(3000, 1)), 3),
        ("k1", rng.normal(size=(500, 3)), 1),
        # regression: a pivot move left the outer list of the centroid search empty
        (
            "k1_clusters",
            rng.normal(size=(3, 2))[rng.integers(0, 3, 300)] * 5 + rng.normal(size=(300, 2)) * 0.1,
            1,
        ),
        ("constant", np.ones((200, 3)), 3),
    ]


@pytest.mark.parametrize(
    ("name", "X", "k"), _stress_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_matches_reference_stress(name: str, X: np.ndarray, k: int) -> None:
    _assert_all_kernels_match(X, k, name)


def test_effective_dimension_picks_the_kernel() -> None:
    rng = np.random.default_rng(0)
    assert effective_dimension(rng.normal(size=(5000, 13))) == 13
    latent = rng.normal(size=(5000, 3)) @ rng.normal(size=(3, 13))
    assert effective_dimension(latent + 1e-3 * rng.normal(size=(5000, 13))) == 3
    assert effective_dimension(np.ones((10, 4))) == 0
