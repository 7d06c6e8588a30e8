"""EnhancedPKClustering (Truta, Campan & Meyer 2007): the line-by-line transcription against
hand-worked examples, and the numba kernel against the transcription."""

from __future__ import annotations

import numpy as np
import pytest

from locpriv.errors import InfeasibleError
from locpriv.tabular import conditions, enhanced_pk_clustering, is_p_sensitive
from locpriv.tabular.checks import as_codes
from locpriv.tabular.generalisation.hierarchy import KeyTable, LevelHierarchy
from locpriv.tabular.psensitive.enhanced_pk import enhanced_pk_keys, plan
from locpriv.tabular.traces.enhanced_pk import enhanced_pk_trace

ABCD = LevelHierarchy.from_rows(
    [("a", "X", "*"), ("b", "X", "*"), ("c", "Y", "*"), ("d", "Y", "*")]
)


def _numeric(X: np.ndarray) -> KeyTable:
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    return KeyTable(numeric=X, leaves=np.zeros((len(X), 0), dtype=np.int64), hierarchies=())


def test_worked_example_nine_records() -> None:
    """n = 9, k = 3, p = 2, one key attribute (range 21), one confidential attribute.

    Values a (rows 0 1 3 6 8), b (2 4 7), c (5): cf_1 = 5, maxClusters = min((9-5)/1, 9/2) = 4,
    iValue = 1, so U = pSEC_2 = {c} + {b}. Split, rarest first, into empty clusters (every
    tuple ties; lowest row): c0 = {5}, c1 = {2}, c2 = {4}, c3 = {7}; all clusters have
    iValue = 1 tuple, so it stops. pSEC_1 = a gives each cluster one tuple, best pair first; all
    Div are equal, the IL increase is 2 |dx| / 21: |dx| = 1 for c1-row1, c2-row3, c3-row6,
    c3-row8 (first cluster wins: c1 <- 1), then c2 <- 3, then c3 <- 6 (lower row), c0 <- 8.
    All are 2-sensitive; T = {0}. k step: sizes 2, u = 0, v = 0 + (1 + 8) // 3 = 3, so c3 is
    dissolved: T = {0, 6, 7}. c0 (x 12..22) takes 6 (x = 20 and 21 tie at IL 3 * 10/21: lower
    row), c1 (x 2..3) takes 0 (x = 1), c2 (x 10..11) takes 7.
    """
    X = [1, 2, 3, 10, 11, 12, 20, 21, 22]
    s = [0, 0, 1, 0, 1, 2, 0, 1, 0]
    want = [1, 1, 1, 2, 2, 0, 0, 2, 0]
    trace = enhanced_pk_trace(_numeric(X), s, 3, 2)
    assert (trace.max_clusters, trace.i_value) == (4, 1)
    assert (trace.dissolved_for_p, trace.dissolved_for_k) == (0, 1)
    assert trace.labels.tolist() == want
    assert enhanced_pk_clustering(np.array(X, dtype=float)[:, None], s, 3, 2).tolist() == want


def test_paper_fig1_condition2_overestimates() -> None:
    """The paper's Fig. 1: Condition 2 allows 2 clusters, but only one 2-sensitive group exists.

    SEC^1 (A; equal frequencies, lower value first) = {0, 1}, {2, 3}; maxClusters = 2,
    iValue = 1. Split: c0 = {2}, c1 = {3}; pSEC_1 then gives c0 row 0 and c1 row 1 (all Div 2;
    IL increase 2/11 for both pairs: the first cluster first). Neither is 2-sensitive in B, no
    tuple is free, so c1 is dissolved; c0 takes row 1 (IL lower than row 3's) and is
    2-sensitive; row 3 joins it in the last step: one cluster.
    """
    S = [(1, "a", "alpha"), (1, "b", "beta"), (2, "a", "beta"), (2, "b", "alpha")]
    S_codes = np.array([[a, ord(b), len(c)] for a, b, c in S])
    X = np.array([[0.0], [10.0], [1.0], [11.0]])
    trace = enhanced_pk_trace(_numeric(X), S_codes, 2, 2)
    assert (trace.max_clusters, trace.i_value, trace.dissolved_for_p) == (2, 1, 1)
    assert trace.labels.tolist() == [0, 0, 0, 0]
    assert enhanced_pk_clustering(X, S_codes, 2, 2).tolist() == [0, 0, 0, 0]


def test_hardest_attribute_first_and_plan() -> None:
    rng = np.random.default_rng(3)
    n = 120
    easy = rng.integers(0, 8, n)  # balanced: many clusters possible
    hard = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 4, n))  # one dominant value
    S = np.column_stack([easy, hard])
    order, M, iv, rows, starts = plan(as_codes(S, n), 3)
    assert order.tolist() == [1, 0]
    trace = enhanced_pk_trace(_numeric(rng.random(n)), S, 4, 3)
    assert trace.attribute_order == (1, 0)
    # the kernel's plan and the line-by-line transcription agree on maxClusters and iValue
    assert (M, iv) == (trace.max_clusters, trace.i_value)
    # maxClusters is Condition 2 with i = 1..p (no n // k): locpriv's conditions() stops at
    # i = p - 1 and takes n // k, so with k = 1 it differs only by the n // p term
    assert min(conditions(S, 1, 3).max_clusters, n // 3) == M
    assert 1 <= iv <= 3
    # SEC^1: the hard attribute's values by decreasing frequency, rows ascending within
    sizes = np.diff(starts)
    assert (np.diff(sizes) <= 0).all() and sizes.sum() == n
    for j in range(sizes.size):
        part = rows[starts[j] : starts[j + 1]]
        assert (np.diff(part) > 0).all() and len(set(hard[part])) == 1


def _random_problem(rng: np.random.Generator) -> tuple[KeyTable, np.ndarray, int, int]:
    n = int(rng.integers(5, 70))
    d = int(rng.integers(1, 3))
    r = int(rng.integers(1, 4))
    k = int(rng.integers(2, 6))
    p = int(rng.integers(1, k + 1))
    X = np.round(rng.normal(size=(n, d)) * rng.choice([1.0, 3.0, 100.0]))  # many ties
    if rng.random() < 0.5:
        S = np.minimum(rng.geometric(0.4, size=(n, r)) - 1, 6)
    else:
        S = rng.integers(0, 5, size=(n, r))
    if rng.random() < 0.5:
        return KeyTable(numeric=X, leaves=rng.integers(0, 4, (n, 1)), hierarchies=(ABCD,)), S, k, p
    return _numeric(X), S, k, p


def test_kernel_equals_the_transcription_on_random_inputs() -> None:
    rng = np.random.default_rng(2007)
    compared = 0
    for _ in range(160):
        keys, S, k, p = _random_problem(rng)
        try:
            want = enhanced_pk_trace(keys, S, k, p).labels
        except InfeasibleError:
            with pytest.raises(InfeasibleError):
                enhanced_pk_keys(keys, S, k, p)
            continue
        got = enhanced_pk_keys(keys, S, k, p)
        assert np.array_equal(got, want)
        assert is_p_sensitive(got, S, k, p)
        assert np.bincount(got).min() >= k
        compared += 1
    assert compared > 120


@pytest.mark.parametrize(("seed", "two"), [(0, True), (1, True), (8, False)])
def test_kernel_equals_the_transcription_in_crowded_rounds(seed: int, two: bool) -> None:
    """The pSEC rounds with more clusters (about 60) than the kernel keeps tuples for (32), all
    wanting the same few tuples (a near-constant key: ties everywhere), so clusters sort the
    tuples left again (these seeds do, dozens of times). Two attributes: the 3-valued one is
    the hardest, iValue = 1, two rounds; one attribute (seed 8): iValue = 2, one round."""
    rng = np.random.default_rng(seed)
    n = 200
    X = np.zeros((n, 1))
    X[rng.integers(0, n, 20), 0] = 1.0
    s1 = np.minimum(rng.geometric(0.3, size=n) - 1, 5)
    S = np.column_stack([s1, rng.integers(0, 3, n)]) if two else s1
    trace = enhanced_pk_trace(_numeric(X), S, 3, 3)
    assert trace.max_clusters > 32 and trace.i_value < 3
    assert np.array_equal(enhanced_pk_clustering(X, S, 3, 3), trace.labels)


def test_many_clusters_dissolved_for_k() -> None:
    """Uniform values: Split makes n / p clusters of p; the k step keeps n // k of them."""
    rng = np.random.default_rng(1)
    X = rng.random((300, 2))
    s = rng.integers(0, 10, 300)
    trace = enhanced_pk_trace(_numeric(X), s, 5, 3)
    assert trace.max_clusters == 100
    assert trace.dissolved_for_k == 40
    assert np.array_equal(enhanced_pk_clustering(X, s, 5, 3), trace.labels)
    assert np.bincount(trace.labels).min() == 5 and trace.labels.max() + 1 == 60
