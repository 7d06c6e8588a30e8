"""The privacy models (locpriv.tabular.models) against the independent validators of a released
table (locpriv.tabular.quality.validate), against pycanon, and against examples worked by hand from
the papers (Machanavajjhala et al. 2007; Li, Li & Venkatasubramanian 2007)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from locpriv.errors import ConfigError
from locpriv.tabular.models import ModelCheck, PrivacyModels, closeness, counts, diversity
from locpriv.tabular.quality import validate

QI = ["q", "r"]  # two key columns (pycanon groups by a list; one column warns in pandas)
SLOW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tables(draw: st.DrawFn, min_values: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Class labels 0..g-1 (every class used) and two confidential code columns, one of them
    skewed (one value dominates) or sorted by class, as releases meet them."""
    n = draw(st.integers(2, 60))
    g = draw(st.integers(1, max(1, n // 2)))
    lab = np.array(draw(st.lists(st.integers(0, g - 1), min_size=n, max_size=n)))
    _, lab = np.unique(lab, return_inverse=True)
    m1 = draw(st.integers(min_values, 6))
    m2 = draw(st.integers(max(min_values, 2), 9))
    a = np.array(draw(st.lists(st.integers(0, m1 - 1), min_size=n, max_size=n)))
    skew = draw(st.floats(0.0, 0.95))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    b = np.where(rng.random(n) < skew, 0, rng.integers(0, m2, n))
    if draw(st.booleans()):  # sensitive values sorted along the classes
        b = np.sort(b)[np.argsort(np.argsort(lab, kind="stable"))]
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    return lab.astype(np.int64), np.column_stack([a, b]).astype(np.int64)


def frame_of(lab: np.ndarray, S: np.ndarray) -> pd.DataFrame:
    """The released table: the class as its key value, ``a`` nominal (strings), ``b`` numeric."""
    return pd.DataFrame(
        {
            "q": lab,
            "r": 0,
            "a": np.array([f"v{int(x)}" for x in S[:, 0]], dtype=object),
            "b": S[:, 1] * 10 + 5,  # numeric: an order-preserving map of the codes
        }
    )


def per_class(lab: np.ndarray, S: np.ndarray, ordered: tuple[bool, bool]) -> dict[str, object]:
    """The models' per-class measures from locpriv.tabular.models (max/min over classes)."""
    g = int(lab.max()) + 1
    ent, emd, cells_all = [], [], []
    for j in range(S.shape[1]):
        m = int(S[:, j].max()) + 1
        cells = counts.pair_counts(lab, S[:, j], g, m)
        cells_all.append(cells)
        ent.append(float(np.exp(diversity.entropy(cells).min())))
        q = closeness.table_distribution(S[:, j], m)
        f = closeness.emd_ordered if ordered[j] else closeness.emd_equal
        emd.append(float(f(cells, q).max()))
    return {"entropy": ent, "emd": emd, "cells": cells_all}


@SLOW
@given(tables())
def test_measures_agree_with_validators_and_pycanon(data: tuple[np.ndarray, np.ndarray]) -> None:
    lab, S = data
    df = frame_of(lab, S)
    ours = per_class(lab, S, (False, True))
    ent = validate.table_entropy_l(df, QI, ["a", "b"])
    t = validate.table_t(df, QI, ["a", "b"], ordered=["b"])
    assert ours["entropy"] == pytest.approx([ent["a"], ent["b"]], rel=1e-12)
    assert ours["emd"] == pytest.approx([t["a"], t["b"]], abs=1e-12)
    # pycanon: numeric columns get the ordered distance, strings the equal one (as here)
    for j, name in enumerate(["a", "b"]):
        if int(S[:, j].max()) >= 1:  # pycanon divides by m-1
            assert anonymity.t_closeness(df, QI, [name]) == pytest.approx(ours["emd"][j], abs=1e-12)
        # pycanon truncates exp(H) to an integer
        got = anonymity.entropy_l_diversity(df, QI, [name])
        assert got in {math.floor(ours["entropy"][j] - 1e-9), math.floor(ours["entropy"][j] + 1e-9)}
    assert anonymity.l_diversity(df, QI, ["a", "b"]) == min(
        validate.table_p(df, QI, ["a", "b"]).values()
    )
    assert anonymity.k_anonymity(df, QI) == validate.table_k(df, QI)


def paper_recursive_ratio(df: pd.DataFrame, s: str, l: int) -> float:  # noqa: E741
    """Definition 4.2 of Machanavajjhala et al. by pandas, class by class: max r_1 / tail."""
    worst = 0.0
    for _, grp in df.groupby("q"):
        r = sorted(grp[s].value_counts().tolist(), reverse=True)
        tail = sum(r[l - 1 :])
        worst = max(worst, r[0] / tail if tail else math.inf)
    return worst


@SLOW
@given(tables(), st.integers(1, 4), st.floats(0.5, 4.0))
def test_models_decide_as_validators(
    data: tuple[np.ndarray, np.ndarray], rl: int, c: float
) -> None:
    lab, S = data
    df = frame_of(lab, S)
    ratio = validate.table_recursive_ratio(df, QI, ["a", "b"], rl)
    for s in ("a", "b"):
        assert ratio[s] == pytest.approx(paper_recursive_ratio(df, s, rl), rel=1e-12)
    ours = per_class(lab, S, (False, True))
    for j, s in enumerate(("a", "b")):
        top, tail = diversity.recursive_parts(ours["cells"][j], rl)  # type: ignore[index]
        mine = max(float(a) / b if b else math.inf for a, b in zip(top, tail, strict=True))
        assert mine == pytest.approx(ratio[s], rel=1e-12)
    for md in (
        PrivacyModels(k=2, l=2),
        PrivacyModels(entropy_l=c if c >= 1 else 1.0),
        PrivacyModels(recursive=(c, rl)),
        PrivacyModels(t=min(1.0, c / 8)),
        PrivacyModels(k=3, l=2, entropy_l=1.5, recursive=(c, rl), t=0.3),
    ):
        check = ModelCheck(md, S, ordered=[False, True])
        ok = check.classes_ok(lab)
        bad = validate.table_models(
            df,
            QI,
            ["a", "b"],
            k=md.k,
            l=md.l,
            entropy_l=md.entropy_l,
            recursive=md.recursive,
            t=md.t,
            ordered=["b"],
        )
        assert bool(ok.all()) == (bad == []), (md, bad)
        # rows_ok decides one class as classes_ok does
        for cl in range(min(int(lab.max()) + 1, 5)):
            assert check.rows_ok(np.flatnonzero(lab == cl)) == bool(ok[cl])


def test_li_et_al_salary_example() -> None:
    """Li et al. 2007, Section 4: salaries 3k..11k, P1 = {3k, 4k, 5k}, P2 = {6k, 8k, 11k}
    against the uniform table: ordered EMD 0.375 and 0.167."""
    salary = np.arange(3, 12)
    df = pd.DataFrame(
        {"q": [0, 0, 0, 1, 1, 1, 2, 2, 2], "r": 0, "s": [3, 4, 5, 6, 8, 11, 7, 9, 10]}
    )
    codes = np.searchsorted(salary, df["s"].to_numpy())
    check = ModelCheck(PrivacyModels(k=1, t=0.375), codes, ordered=[True])
    assert check.rows_ok([0, 1, 2]) and check.rows_ok([3, 4, 5])
    assert not ModelCheck(PrivacyModels(k=1, t=0.374), codes, ordered=[True]).rows_ok([0, 1, 2])
    assert ModelCheck(PrivacyModels(k=1, t=1 / 6), codes, ordered=[True]).rows_ok([3, 4, 5])
    cells = counts.pair_counts(df["q"].to_numpy(), codes, 3, 9)
    emd = closeness.emd_ordered(cells, closeness.table_distribution(codes, 9))
    assert emd[:2] == pytest.approx([0.375, 1 / 6], abs=1e-15)
    assert validate.table_t(df.iloc[:6].assign(q=[0, 0, 0, 0, 0, 0]), QI, ["s"], ["s"])[
        "s"
    ] == pytest.approx(0.0)
    # equal distance: {a, a, b} against a, b, c evenly: ½ (1/3 + 0 + 1/3)
    nominal = np.array([0, 0, 1, 1, 2, 2])
    c2 = counts.pair_counts(np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 2, 2]), 2, 3)
    assert closeness.emd_equal(c2, closeness.table_distribution(nominal, 3))[0] == pytest.approx(
        1 / 3
    )


def test_machanavajjhala_definitions_by_hand() -> None:
    """Entropy: four values evenly is entropy 4-diverse, not more; recursive (c, l) on counts
    (5, 3, 2, 1): tail for l = 3 is 2 + 1 = 3, so c = 2 passes (5 < 6), c = 5/3 does not."""
    even = np.array([0, 1, 2, 3])
    assert ModelCheck(PrivacyModels(k=1, entropy_l=4.0), even).rows_ok([0, 1, 2, 3])
    assert not ModelCheck(PrivacyModels(k=1, entropy_l=4.0001), even).rows_ok([0, 1, 2, 3])
    skewed = np.array([0] * 5 + [1] * 3 + [2] * 2 + [3])
    rows = np.arange(11)
    assert ModelCheck(PrivacyModels(k=1, recursive=(2.0, 3)), skewed).rows_ok(rows)
    assert not ModelCheck(PrivacyModels(k=1, recursive=(5 / 3, 3)), skewed).rows_ok(rows)
    # fewer than l values: the tail is empty, no c suffices
    assert not ModelCheck(PrivacyModels(k=1, recursive=(100.0, 5)), skewed).rows_ok(rows)
    # entropy of (5, 3, 2, 1)/11
    p = np.array([5, 3, 2, 1]) / 11
    h = float(-(p * np.log(p)).sum())
    assert ModelCheck(PrivacyModels(k=1, entropy_l=math.exp(h)), skewed).rows_ok(rows)


def test_pycanon_recursive_differs_from_the_paper() -> None:
    """pycanon's recursive_c_l_diversity sorts the counts ascending, so it divides the SMALLEST
    count by the largest ones: on one class with counts (4, 1, 1) and l = 3 it reports c = 1,
    whereas Definition 4.2 needs 4 < c · 1, i.e. c > 4. Our validator follows the paper."""
    df = pd.DataFrame({"q": [0] * 6, "r": 0, "s": ["x"] * 4 + ["y", "z"]})
    c, rl = anonymity.recursive_c_l_diversity(df, QI, ["s"])
    assert (c, rl) == (1, 3)
    assert validate.table_recursive_ratio(df, QI, ["s"], 3)["s"] == 4.0
    codes = np.array([0] * 4 + [1, 2])
    assert not ModelCheck(PrivacyModels(k=1, recursive=(4.0, 3)), codes).rows_ok(range(6))
    assert ModelCheck(PrivacyModels(k=1, recursive=(4.01, 3)), codes).rows_ok(range(6))


def test_suppressed_records_are_ignored_and_t_uses_the_whole_table() -> None:
    S = np.array([0, 0, 1, 1, 0, 1])
    lab = np.array([0, 0, -1, -1, 1, 1])
    check = ModelCheck(PrivacyModels(k=2, t=0.5), S)
    # class 0 = {0, 0}: EMD = ½(|1 - ½| + ½) = ½ against the whole table's (½, ½)
    assert check.classes_ok(lab).tolist() == [True, True]
    assert ModelCheck(PrivacyModels(k=2, t=0.49), S).classes_ok(lab).tolist() == [False, True]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"entropy_l": 0.5}, "entropy_l"),
        ({"entropy_l": float("nan")}, "entropy_l"),
        ({"entropy_l": True}, "entropy_l"),
        ({"recursive": (0.0, 2)}, "recursive: c"),
        ({"recursive": (-1.0, 2)}, "recursive: c"),
        ({"recursive": (2.0, 0)}, "recursive: l"),
        ({"recursive": (2.0, 2.5)}, "recursive: l"),
        ({"recursive": 3}, "recursive"),
        ({"t": -0.1}, "t must"),
        ({"t": 1.5}, "t must"),
        ({"t": float("inf")}, "t must"),
        ({"l": 0}, "l must"),
        ({"k": 0}, "k must"),
    ],
)
def test_parameters_validated_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        PrivacyModels(**kwargs)  # type: ignore[arg-type]


def test_confidential_attributes_required() -> None:
    with pytest.raises(ConfigError, match="confidential"):
        ModelCheck(PrivacyModels(t=0.2))
    with pytest.raises(ConfigError, match="confidential"):
        ModelCheck(PrivacyModels(entropy_l=2.0), np.zeros((5, 0)))
    with pytest.raises(ConfigError, match="ordered"):
        ModelCheck(PrivacyModels(t=0.2), np.zeros((5, 2)), ordered=[True])


@SLOW
@given(tables())
def test_sparse_and_dense_cells_agree(data: tuple[np.ndarray, np.ndarray]) -> None:
    """pair_counts takes a sort (np.unique) where the dense table would be large: both paths
    give the same cells, hence the same decisions."""
    lab, S = data
    g = int(lab.max()) + 1
    for col in S.T:
        m = int(col.max()) + 1
        dense = counts.pair_counts(lab, col, g, m)
        old = counts.DENSE_CELLS_PER_RECORD
        try:
            counts.DENSE_CELLS_PER_RECORD = -(10**9)  # force the sparse path
            sparse = counts.pair_counts(lab, col, g, m)
        finally:
            counts.DENSE_CELLS_PER_RECORD = old
        for a, b in zip(
            (dense.cls, dense.val, dense.cnt, dense.size),
            (sparse.cls, sparse.val, sparse.cnt, sparse.size),
            strict=True,
        ):
            assert np.array_equal(a, b)


def test_large_domain_takes_the_sparse_path_and_agrees_with_validators() -> None:
    """Many classes × many values (a numeric confidential column): the sparse cells, checked
    against the dense validator on the same table."""
    rng = np.random.default_rng(4)
    n = 6000
    lab = rng.integers(0, 2000, n)
    _, lab = np.unique(lab, return_inverse=True)
    s = np.unique(rng.integers(0, 3000, n), return_inverse=True)[1]
    g, m = int(lab.max()) + 1, int(s.max()) + 1
    assert g * m > counts.DENSE_CELLS_PER_RECORD * n + 4096
    cells = counts.pair_counts(lab, s, g, m)
    q = closeness.table_distribution(s, m)
    df = pd.DataFrame({"q": lab, "r": 0, "s": s})
    t = validate.table_t(df, QI, ["s"], ordered=["s"])["s"]
    assert float(closeness.emd_ordered(cells, q).max()) == pytest.approx(t, abs=1e-12)
    t_eq = validate.table_t(df, QI, ["s"])["s"]
    assert float(closeness.emd_equal(cells, q).max()) == pytest.approx(t_eq, abs=1e-12)
    ent = validate.table_entropy_l(df, QI, ["s"])["s"]
    assert float(np.exp(diversity.entropy(cells).min())) == pytest.approx(ent, rel=1e-12)
