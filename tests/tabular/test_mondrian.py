"""Mondrian (strict and relaxed) releases, checked from the released strings alone, by an
independent validator and by pycanon, over many kinds of data."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular.generalisation.arx import read_hierarchy
from locpriv.tabular.generalisation.builders import masking_hierarchy
from locpriv.tabular.generalisation.hierarchy import KeyTable, LevelHierarchy
from locpriv.tabular.generalisation.mondrian import mondrian
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels

REPO = Path(__file__).resolve().parents[2]
ADULT = REPO.parent / "shared" / "data" / "adult.csv"
SHIPPED = REPO / "locpriv" / "data" / "hierarchies" / "adult"
RANGE = re.compile(r"^\[(-?[0-9.e+-]+|-?inf), (-?[0-9.e+-]+|-?inf)\]$")

# a, b under X; c, d under Y; e alone under Z; root *
TREE = LevelHierarchy.from_rows(
    [("a", "X", "*"), ("b", "X", "*"), ("c", "Y", "*"), ("d", "Y", "*"), ("e", "Z", "*")]
)


def _validate(
    rel: GeneralisedRelease,
    *,
    num: np.ndarray,
    cat: list[list[str]],
    hs: tuple[LevelHierarchy, ...],
    models: PrivacyModels,
    S: np.ndarray | None,
) -> list[int]:
    """Checks a release from its strings only; returns the class sizes."""
    n, s = num.shape
    assert len(rel.values) == s + len(hs) == len(rel.columns)
    assert not rel.suppressed.any() and (rel.labels >= 0).all()
    # truthfulness: the interval holds the value, the node is an ancestor of the leaf
    for j in range(s):
        for i in range(n):
            m = RANGE.match(rel.values[j][i])
            assert m, rel.values[j][i]
            assert float(m.group(1)) <= num[i, j] <= float(m.group(2))
    for j, h in enumerate(hs):
        anc = h.ancestors()
        pos = {lab: q for q, lab in enumerate(h.labels[0])}
        for i in range(n):
            leaf = pos[cat[j][i]]
            ancestors = {h.labels[lev][anc[lev, leaf]] for lev in range(len(h.labels))}
            assert rel.values[s + j][i] in ancestors
    # classes = equal released tuples, exactly the release's labels
    tuples = list(zip(*rel.values, strict=True))
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, tp in enumerate(tuples):
        groups.setdefault(tp, []).append(i)
    assert len(groups) == int(rel.labels.max()) + 1
    for tp, members in groups.items():
        assert len(set(rel.labels[members].tolist())) == 1
        for j in range(s):  # the range is the class's own, not wider
            lo, hi = (float(x) for x in tp[j][1:-1].split(", "))
            assert (lo, hi) == (num[members, j].min(), num[members, j].max())
        for j, h in enumerate(hs):  # the node is the lowest common ancestor, not higher
            anc = h.ancestors()[:, h.codes([cat[j][i] for i in members])]
            lev = next(lv for lv in range(anc.shape[0]) if len(set(anc[lv].tolist())) == 1)
            assert tp[s + j] == h.labels[lev][anc[lev, 0]]
        assert len(members) >= models.k
        if S is not None:
            for col in np.asarray(S).reshape(n, -1).T:
                assert len(set(col[members].tolist())) >= models.l
    # cover within [0, 1] and 0 exactly where the value is kept
    assert (
        rel.cover.shape == (n, s + len(hs))
        and (rel.cover >= 0).all()
        and (rel.cover <= 1 + 1e-12).all()
    )
    # pycanon, on the released strings
    df = pd.DataFrame({c: list(v) for c, v in zip(rel.columns, rel.values, strict=True)})
    qi = list(rel.columns)
    assert anonymity.k_anonymity(df, qi) >= models.k
    if S is not None and models.l > 1:
        df["_s"] = np.asarray(S).reshape(n, -1)[:, 0]
        assert anonymity.l_diversity(df, qi, ["_s"]) >= models.l
    return [len(m) for m in groups.values()]


def _data(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0, 100, (n, 2))
    if kind == "skewed":
        return np.column_stack([rng.lognormal(3, 2, n), rng.zipf(1.8, n).astype(float)])
    if kind == "sorted":
        return np.sort(rng.integers(0, 50, (n, 2)), axis=0).astype(float)
    if kind == "duplicates":
        return rng.integers(0, 3, (n, 2)).astype(float)
    if kind == "constant":
        return np.full((n, 2), 7.0)
    raise AssertionError(kind)


KINDS = ["uniform", "skewed", "sorted", "duplicates", "constant"]


@pytest.mark.parametrize("relaxed", [False, True], ids=["strict", "relaxed"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("n", "k"), [(1, 1), (3, 3), (5, 3), (40, 2), (200, 5), (301, 7)])
def test_numeric_releases_valid(relaxed: bool, kind: str, n: int, k: int) -> None:
    rng = np.random.default_rng(n * 31 + k)
    num = _data(kind, n, rng)
    keys = KeyTable(num, np.zeros((n, 0), dtype=np.int64), ())
    models = PrivacyModels(k=k)
    rel = mondrian(keys, ModelCheck(models), relaxed=relaxed, columns=["u", "v"])
    sizes = _validate(rel, num=num, cat=[], hs=(), models=models, S=None)
    assert rel.info["mode"] == ("relaxed" if relaxed else "strict")
    if kind == "uniform":
        # no ties: both modes cut every partition of 2k or more into halves of k or more
        assert max(sizes) < 2 * k
    if kind == "constant":
        assert sizes == [n]  # nothing to cut


@pytest.mark.parametrize("kind", ["uniform", "skewed", "sorted", "duplicates"])
@pytest.mark.parametrize(("k", "l"), [(2, 2), (4, 3), (6, 2)])
@pytest.mark.parametrize("relaxed", [False, True], ids=["strict", "relaxed"])
def test_mixed_keys_with_l_diversity(kind: str, k: int, l: int, relaxed: bool) -> None:  # noqa: E741
    rng = np.random.default_rng(k * 10 + l)
    n = 240
    num = _data(kind, n, rng)
    leaves = ["abcde"[i] for i in rng.choice(5, n, p=[0.4, 0.3, 0.15, 0.1, 0.05])]
    zips = [f"{z:05d}" for z in rng.integers(2100, 2200, n)]
    hz = masking_hierarchy(zips)
    hs = (TREE, hz)
    codes = np.column_stack([TREE.codes(leaves), hz.codes(zips)])
    S = rng.choice(4, n, p=[0.5, 0.2, 0.2, 0.1])
    models = PrivacyModels(k=k, l=l)
    rel = mondrian(KeyTable(num, codes, hs), ModelCheck(models, S), relaxed=relaxed)
    _validate(rel, num=num, cat=[leaves, zips], hs=hs, models=models, S=S)
    assert rel.columns == ("x0", "x1", "c0", "c1")


@settings(max_examples=80, deadline=None)
@given(
    vals=st.lists(
        st.tuples(st.integers(-5, 5), st.sampled_from("abcde"), st.integers(0, 2)),
        min_size=1,
        max_size=60,
    ),
    k=st.integers(1, 6),
    l=st.integers(1, 3),
    relaxed=st.booleans(),
)
def test_any_small_table(vals: list[tuple[int, str, int]], k: int, l: int, relaxed: bool) -> None:  # noqa: E741
    n = len(vals)
    num = np.array([[float(v[0])] for v in vals])
    leaves = [v[1] for v in vals]
    S = np.array([v[2] for v in vals])
    models = PrivacyModels(k=k, l=l)
    keys = KeyTable(num, TREE.codes(leaves)[:, None], (TREE,))
    feasible = n >= k and len(set(S.tolist())) >= l
    if not feasible:
        with pytest.raises(InfeasibleError, match="does not satisfy"):
            mondrian(keys, ModelCheck(models, S), relaxed=relaxed)
        return
    rel = mondrian(keys, ModelCheck(models, S), relaxed=relaxed)
    _validate(rel, num=num, cat=[leaves], hs=(TREE,), models=models, S=S)


def test_strict_median_cuts_exactly() -> None:
    num = np.arange(1.0, 9.0)[:, None]
    rel = mondrian(
        KeyTable(num, np.zeros((8, 0), dtype=np.int64), ()), ModelCheck(PrivacyModels(k=2))
    )
    assert list(rel.values[0]) == ["[1, 2]"] * 2 + ["[3, 4]"] * 2 + ["[5, 6]"] * 2 + ["[7, 8]"] * 2
    assert rel.labels.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert np.allclose(rel.cover[:, 0], 1 / 7)
    # ties: strict keeps equal values together, relaxed splits them to balance sizes
    num = np.array([[1.0], [2], [2], [2], [2], [2], [3], [4]])
    keys = KeyTable(num, np.zeros((8, 0), dtype=np.int64), ())
    strict = mondrian(keys, ModelCheck(PrivacyModels(k=2)))
    relaxed = mondrian(keys, ModelCheck(PrivacyModels(k=2)), relaxed=True)
    assert list(strict.values[0]) == ["[1, 2]"] * 6 + ["[3, 4]"] * 2
    assert list(relaxed.values[0]) == ["[1, 2]"] * 2 + ["[2, 2]"] * 4 + ["[3, 4]"] * 2


def test_strict_classes_are_disjoint_boxes() -> None:
    rng = np.random.default_rng(5)
    num = np.column_stack([rng.integers(0, 20, 150), rng.integers(0, 5, 150)]).astype(float)
    rel = mondrian(
        KeyTable(num, np.zeros((150, 0), dtype=np.int64), ()), ModelCheck(PrivacyModels(k=3))
    )
    boxes = {
        tuple(float(x) for x in re.findall(r"-?[0-9.]+", "".join(tp)))
        for tp in zip(*rel.values, strict=True)
    }
    bl = sorted(boxes)
    for a in range(len(bl)):
        for b in range(a + 1, len(bl)):
            (a0, a1, a2, a3), (b0, b1, b2, b3) = bl[a], bl[b]
            assert a1 < b0 or b1 < a0 or a3 < b2 or b3 < a2, (bl[a], bl[b])


def test_categorical_cuts_follow_the_hierarchy() -> None:
    leaves = [c for c in "abcd" for _ in range(4)]
    keys = KeyTable(np.zeros((16, 0)), TREE.codes(leaves)[:, None], (TREE,))
    for k, want in [(4, ["a", "b", "c", "d"]), (8, ["X", "Y"]), (16, ["*"]), (5, ["X", "Y"])]:
        rel = mondrian(keys, ModelCheck(PrivacyModels(k=k)))
        assert sorted(set(rel.values[0])) == want, k
    rel = mondrian(keys, ModelCheck(PrivacyModels(k=4)))
    assert (rel.cover == 0).all()
    rel = mondrian(keys, ModelCheck(PrivacyModels(k=16)))
    assert (rel.cover == 1).all()
    # l-diversity stops a cut that k allows: each leaf holds one sensitive value
    S = np.repeat([0, 1, 0, 1], 4)
    rel = mondrian(keys, ModelCheck(PrivacyModels(k=2, l=2), S))
    assert sorted(set(rel.values[0])) == ["X", "Y"]


def test_widest_normalised_dimension_is_cut_first() -> None:
    # column 0 spans 0..1 (width 1), column 1 spans 0..1000 but only in a tiny share of records
    n = 64
    num = np.column_stack([np.linspace(0, 1, n), np.r_[np.zeros(n - 1), 1000.0]])
    rel = mondrian(
        KeyTable(num, np.zeros((n, 0), dtype=np.int64), ()), ModelCheck(PrivacyModels(k=32))
    )
    assert sorted(set(rel.values[0])) == ["[0, 0.49206349206349204]", "[0.5079365079365079, 1]"]


def test_relaxed_numeric_classes_below_2k_and_deterministic() -> None:
    rng = np.random.default_rng(11)
    num = rng.normal(size=(5000, 3))
    keys = KeyTable(num, np.zeros((5000, 0), dtype=np.int64), ())
    for k in (2, 5, 10):
        rel = mondrian(keys, ModelCheck(PrivacyModels(k=k)), relaxed=True)
        sizes = np.bincount(rel.labels)
        assert sizes.min() >= k and sizes.max() < 2 * k
        strict = mondrian(keys, ModelCheck(PrivacyModels(k=k)))
        assert np.bincount(strict.labels).min() >= k
    again = mondrian(keys, ModelCheck(PrivacyModels(k=5)), relaxed=True)
    assert np.array_equal(
        again.labels, mondrian(keys, ModelCheck(PrivacyModels(k=5)), relaxed=True).labels
    )


def test_errors() -> None:
    keys = KeyTable(np.zeros((3, 1)), np.zeros((3, 0), dtype=np.int64), ())
    with pytest.raises(InfeasibleError, match="does not satisfy"):
        mondrian(keys, ModelCheck(PrivacyModels(k=4)))
    with pytest.raises(InfeasibleError, match="does not satisfy"):
        mondrian(keys, ModelCheck(PrivacyModels(k=1, l=2), np.zeros(3)))
    with pytest.raises(ConfigError, match="column names"):
        mondrian(keys, ModelCheck(PrivacyModels(k=1)), columns=["a", "b"])
    with pytest.raises(ConfigError, match="holds 4 records"):
        mondrian(keys, ModelCheck(PrivacyModels(k=1, l=1), np.zeros(4)))
    with pytest.raises(DataError, match="no records"):
        mondrian(
            KeyTable(np.zeros((0, 1)), np.zeros((0, 0), dtype=np.int64), ()),
            ModelCheck(PrivacyModels()),
        )
    bad = KeyTable(np.zeros((2, 0)), np.array([[7], [0]]), (TREE,))
    with pytest.raises(DataError, match="outside the hierarchy"):
        mondrian(bad, ModelCheck(PrivacyModels(k=1)))


@pytest.mark.skipif(not ADULT.exists(), reason="needs ../shared/data/adult.csv")
def test_adult_with_shipped_hierarchies() -> None:
    with ADULT.open() as fh:
        rows = list(csv.DictReader(fh))
    cats = ["workclass", "education", "marital-status", "race", "sex", "native-country"]
    hs = tuple(read_hierarchy(SHIPPED / f"{c}.csv") for c in cats)
    rows = [r for r in rows if all(r[c] != "?" for c in cats)][:8000]
    num = np.array([[float(r["age"]), float(r["hours-per-week"])] for r in rows])
    cat = [[r[c] for r in rows] for c in cats]
    codes = np.column_stack([h.codes(v) for h, v in zip(hs, cat, strict=True)])
    occ = sorted({r["occupation"] for r in rows})
    S = np.array([occ.index(r["occupation"]) for r in rows])
    models = PrivacyModels(k=5, l=3)
    rel = mondrian(KeyTable(num, codes, hs), ModelCheck(models, S), columns=["age", "hours", *cats])
    sizes = _validate(rel, num=num, cat=cat, hs=hs, models=models, S=S)
    assert np.mean(sizes) < 4 * models.k  # far from one big class


def test_key_table_from_columns(tmp_path: Path) -> None:
    from locpriv.tabular.generalisation.arx import write_hierarchy
    from locpriv.tabular.generalisation.keys import key_table

    path = tmp_path / "tree.csv"
    write_hierarchy(TREE, path)
    cols = {
        "zip": ["02139", "02142", "02139", "02199"] * 5,
        "age": [31, 35, 47, 52] * 5,
        "kind": list("abcd") * 5,
    }
    keys, names = key_table(cols, numeric=["age"], hierarchies={"kind": path})
    assert names == ("age", "zip", "kind")
    assert keys.hierarchies[0].labels[1] == ("0213*", "0214*", "0219*")  # generated masking
    rel = mondrian(keys, ModelCheck(PrivacyModels(k=5)), columns=names)
    assert rel.columns == names
    _validate(
        rel,
        num=np.asarray(cols["age"], dtype=float)[:, None],
        cat=[cols["zip"], cols["kind"]],
        hs=keys.hierarchies,
        models=PrivacyModels(k=5),
        S=None,
    )
    with pytest.raises(DataError, match=r"column 'kind'.*tree\.csv.*\['z'\]"):
        key_table({**cols, "kind": list("abcz") * 5}, numeric=["age"], hierarchies={"kind": path})
    with pytest.raises(DataError, match="'age': not a number"):
        key_table({**cols, "age": ["x"] * 20}, numeric=["age"])
    with pytest.raises(ConfigError, match="not key attributes"):
        key_table(cols, numeric=["height"])
    with pytest.raises(ConfigError, match="both numeric"):
        key_table(cols, numeric=["kind"], hierarchies={"kind": TREE})


@pytest.mark.parametrize("relaxed", [False, True], ids=["strict", "relaxed"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", [1, 2, 5])
def test_compiled_numeric_path_makes_the_same_cuts(relaxed: bool, kind: str, k: int) -> None:
    """k alone over numeric keys runs the numba loop; with a confidential column (l = 1) the
    same cuts go through the numpy loop: the releases must be identical."""
    rng = np.random.default_rng(k + 100)
    n = 997
    num = _data(kind, n, rng)
    keys = KeyTable(num, np.zeros((n, 0), dtype=np.int64), ())
    fast = mondrian(keys, ModelCheck(PrivacyModels(k=k)), relaxed=relaxed)
    slow = mondrian(keys, ModelCheck(PrivacyModels(k=k), np.zeros(n)), relaxed=relaxed)
    assert np.array_equal(fast.labels, slow.labels)
    assert fast.values == slow.values and np.array_equal(fast.cover, slow.cover)
    assert fast.info == slow.info


def test_number_labels_match_format_number() -> None:
    from locpriv.tabular.generalisation.builders import format_number
    from locpriv.tabular.generalisation.mondrian import _number_labels

    r = np.random.default_rng(0)
    x = np.concatenate(
        [
            r.normal(size=2000),
            r.integers(-(10**6), 10**6, 500).astype(float),
            r.lognormal(0, 20, 2000),
            [0.0, -0.0, 1e16, 2.0**53, 1e-300, 5e-324, 1e300, 0.1, 1 / 3, -2.5],
        ]
    )
    assert _number_labels(x[:, None])[:, 0].tolist() == [format_number(float(v)) for v in x]
    assert all(float(format_number(float(v))) == v for v in x)  # exact round trip


def test_generated_date_and_masking_hierarchies_through_mondrian() -> None:
    import datetime as dt

    from locpriv.tabular.generalisation.keys import key_table

    rng = np.random.default_rng(4)
    n = 300
    days = [dt.date(1990, 1, 1) + dt.timedelta(days=int(x)) for x in rng.integers(0, 12000, n)]
    zips = [f"{z:05d}" for z in rng.integers(10000, 10400, n)]
    cols: dict[str, list[object]] = {"born": list(days), "zip": list(zips)}
    keys, names = key_table(cols)
    assert names == ("born", "zip")
    models = PrivacyModels(k=4)
    rel = mondrian(keys, ModelCheck(models), columns=names)
    _validate(
        rel,
        num=np.zeros((n, 0)),
        cat=[[str(d) for d in days], zips],
        hs=keys.hierarchies,
        models=models,
        S=None,
    )
    levels = {lab[:4].isdigit() and len(lab) for lab in rel.values[0]}
    assert levels <= {10, 7, 5, 4, False}  # day, month, decade "1990s", year, root "*"
    assert any(len(lab) <= 7 for lab in rel.values[0])  # some dates generalised
