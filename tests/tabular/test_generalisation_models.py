"""Every generalisation method under every privacy model, on data the methods were not tuned on.

Methods: Samarati, the optimal full-domain search (every loss), Incognito (k and distinct l
only: it takes ``k, p`` and has no MaxSup) and Mondrian (strict and relaxed). Models: k,
distinct l, entropy l, recursive (c, l), t-closeness (ordered and equal-distance EMD) and their
combination. Data (hypothesis): random, skewed and constant confidential attributes, rows sorted
by key or by confidential value, many duplicate rows, tiny n, numeric and categorical keys.

Every release is checked from its released strings alone: each value contains the original
(an ancestor label, or an interval ``[lo, hi]`` holding the number); classes are the sets of
identical released keys (suppressed rows excluded) and equal ``labels``; suppression stays
within MaxSup; the models hold by :mod:`locpriv.tabular.quality.validate`'s table validators
and by pycanon (where pycanon is right: its recursive (c, l) is not used, its entropy l is
truncated to an integer, its t-closeness divides by m - 1). t-closeness compares a class with
the whole released table, suppressed rows' confidential values included (they are released).
Optimal is checked exact against exhaustive search, the non-monotone models with suppression
included; Samarati's height minimal and its node the least loss of that height.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from locpriv.errors import InfeasibleError
from locpriv.tabular.generalisation.hierarchy import KeyTable, LevelHierarchy
from locpriv.tabular.generalisation.incognito import incognito_release
from locpriv.tabular.generalisation.lattice import Lattice, max_suppressed
from locpriv.tabular.generalisation.mondrian import mondrian
from locpriv.tabular.generalisation.optimal import optimal
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.generalisation.samarati import samarati
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels
from locpriv.tabular.quality import validate
from locpriv.tabular.quality.loss import LOSSES
from tests.tabular._gen_helpers import random_hierarchy

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

MODELS: dict[str, PrivacyModels] = {
    "k": PrivacyModels(k=3),
    "distinct_l": PrivacyModels(k=2, l=2),
    "entropy_l": PrivacyModels(k=2, entropy_l=1.7),
    "recursive": PrivacyModels(k=2, recursive=(3.0, 2)),
    "t": PrivacyModels(k=2, t=0.3),
    "k_l_t": PrivacyModels(k=3, l=2, t=0.4),
    "all": PrivacyModels(k=2, l=2, entropy_l=1.5, recursive=(3.0, 2), t=0.45),
}
ORDERINGS = {"equal": (False, False), "ordered": (True, True), "mixed": (True, False)}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@dataclass(frozen=True)
class Data:
    """n records: categorical leaf codes with hierarchies, numeric keys, two confidential code
    columns (``S``; codes may leave gaps)."""

    leaves: IntArray
    hierarchies: tuple[LevelHierarchy, ...]
    numeric: FloatArray
    S: IntArray

    @property
    def n(self) -> int:
        return int(self.S.shape[0])


@st.composite
def datasets(draw: st.DrawFn, max_n: int = 40, max_q: int = 3) -> Data:
    """Random tables in the shapes releases meet: tiny n, duplicates, sorted rows, skewed or
    constant confidential attributes, codes with gaps."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    tiny = draw(st.integers(0, 9)) == 0  # one case in ten: n of 1 to 6
    n = draw(st.integers(1, 6)) if tiny else draw(st.integers(8, max_n))
    q = draw(st.integers(1, max_q))
    hs = tuple(
        random_hierarchy(rng, draw(st.integers(1, 6)), draw(st.integers(1, 3))) for _ in range(q)
    )
    shape = draw(st.sampled_from(["random", "duplicates", "sorted_keys", "sorted_sensitive"]))
    leaves = np.column_stack([rng.integers(0, len(h.labels[0]), n) for h in hs]).astype(np.int64)
    numeric = np.column_stack(
        [rng.integers(0, draw(st.integers(1, 50)), n), np.round(rng.normal(40, 12, n), 1)]
    ).astype(np.float64)
    degenerate = draw(st.integers(0, 9)) == 0  # one case in ten: a constant attribute
    m1 = 1 if degenerate else draw(st.integers(2, 6))
    a = rng.integers(0, m1, n) * draw(st.sampled_from([1, 3]))  # * 3: codes with gaps
    skew = 1.0 if degenerate else draw(st.sampled_from([0.0, 0.3, 0.6, 0.8]))
    b = np.where(rng.random(n) < skew, 0, rng.integers(0, draw(st.integers(2, 7)), n))
    S = np.column_stack([a, b]).astype(np.int64)
    if shape == "duplicates":  # few distinct rows, each repeated
        pick = rng.integers(0, max(1, n // 4), n)
        leaves, numeric, S = leaves[pick], numeric[pick], S[pick]
    elif shape == "sorted_keys":
        order = np.lexsort(leaves.T[::-1])
        leaves, numeric, S = leaves[order], numeric[order], S[order]
    elif shape == "sorted_sensitive":
        order = np.lexsort((S[:, 0], S[:, 1]))
        leaves, numeric, S = leaves[order], numeric[order], S[order]
    return Data(leaves, hs, numeric, S)


# --- the independent check of a release -------------------------------------------------------


def _true_categorical(h: LevelHierarchy, leaf: int, value: str) -> bool:
    anc = h.ancestors()
    return any(h.labels[lev][anc[lev][leaf]] == value for lev in range(h.height + 1))


_INTERVAL = re.compile(r"^\[(\S+), (\S+)\]$")


def _true_numeric(x: float, value: str) -> bool:
    got = _INTERVAL.match(value)
    assert got is not None, value
    return float(got.group(1)) <= x <= float(got.group(2))


def sensitive_frame(S: IntArray, ordered: tuple[bool, bool]) -> pd.DataFrame:
    """The confidential columns as released: an ordered attribute as numbers (pycanon then uses
    the ordered distance), a nominal one as strings (equal distance)."""
    cols: dict[str, object] = {}
    for j, name in enumerate(("s0", "s1")):
        col = S[:, j]
        cols[name] = col * 10 + 5 if ordered[j] else np.array([f"c{x}" for x in col], dtype=object)
    return pd.DataFrame(cols)


def emd_against_released(
    frame: pd.DataFrame, kept: npt.NDArray[np.bool_], keys: list[str], name: str, ordered: bool
) -> float:
    """Largest EMD between a kept class's distribution of ``name`` and the whole released
    table's (all rows: suppressed rows publish their confidential values too), by pandas."""
    values = sorted(frame[name].unique().tolist())
    m = len(values)
    q = frame[name].value_counts(normalize=True).reindex(values, fill_value=0.0).to_numpy()
    worst = 0.0
    for _, grp in frame[kept].groupby(keys, sort=False):
        p = grp[name].value_counts(normalize=True).reindex(values, fill_value=0.0).to_numpy()
        if ordered:
            emd = float(np.abs(np.cumsum(p - q)).sum() / (m - 1)) if m > 1 else 0.0
        else:
            emd = float(0.5 * np.abs(p - q).sum())
        worst = max(worst, emd)
    return worst


def check_release(  # noqa: PLR0917 - the release and what it was asked to satisfy
    rel: GeneralisedRelease,
    data: Data,
    models: PrivacyModels,
    ordered: tuple[bool, bool],
    max_sup: int,
    numeric_cols: int = 0,
) -> None:
    """Validity from the released strings: true values, classes, MaxSup, every model by the
    table validators and by pycanon. ``numeric_cols``: how many leading released columns are
    intervals of ``data.numeric`` (Mondrian); the rest are ``data.leaves``' hierarchies."""
    n = data.n
    d = len(rel.columns)
    sup = np.asarray(rel.suppressed, dtype=bool)
    assert len(sup) == n and all(len(col) == n for col in rel.values)
    assert int(sup.sum()) <= max_sup
    assert ((np.asarray(rel.labels) == -1) == sup).all()
    for j in range(d):
        for i in range(n):
            v = rel.values[j][i]
            if sup[i]:
                assert v == "*"
            elif j < numeric_cols:
                assert _true_numeric(float(data.numeric[i, j]), v), (i, j, v)
            else:
                jj = j - numeric_cols
                assert _true_categorical(data.hierarchies[jj], int(data.leaves[i, jj]), v)
    # classes: identical released keys, suppressed rows excluded, exactly the labels
    groups: dict[tuple[str, ...], set[int]] = defaultdict(set)
    for i in np.flatnonzero(~sup):
        groups[tuple(rel.values[j][i] for j in range(d))].add(int(rel.labels[i]))
    assert all(len(labs) == 1 for labs in groups.values())
    assert len(groups) == len(set(np.asarray(rel.labels)[~sup].tolist()))
    event(f"suppressed: {'none' if not sup.any() else 'some'}")
    if sup.all():
        return
    keys = [f"key{j}" for j in range(d)]
    frame = sensitive_frame(data.S, ordered)
    for j, key in enumerate(keys):
        frame[key] = list(rel.values[j])
    kept = frame[~sup].reset_index(drop=True)
    names = ["s0", "s1"]
    ordered_names = [s for s, o in zip(names, ordered, strict=True) if o]
    # the table validators, on the kept rows (t apart: its reference is the whole release)
    bad = validate.table_models(
        kept,
        keys,
        names,
        k=models.k,
        l=models.l,
        entropy_l=models.entropy_l,
        recursive=models.recursive,
    )
    assert bad == [], bad
    if models.t is not None:
        for s, o in zip(names, ordered, strict=True):
            assert emd_against_released(frame, ~sup, keys, s, o) <= models.t + 1e-9, s
        if not sup.any():
            worst = validate.table_t(kept, keys, names, ordered=ordered_names)
            assert max(worst.values()) <= models.t + 1e-9
    # pycanon on the kept rows (documented differences in docs/tabular.md)
    qi = [*keys, "_one"] if d == 1 else keys  # pycanon groups by a list: one column warns
    if d == 1:
        kept["_one"] = "x"
    assert anonymity.k_anonymity(kept, qi) >= models.k
    if models.l > 1:
        assert anonymity.l_diversity(kept, qi, names) >= models.l
    if models.entropy_l > 1:
        for s in names:  # pycanon truncates exp(H) to an integer
            assert anonymity.entropy_l_diversity(kept, qi, [s]) >= math.floor(models.entropy_l)
    if models.t is not None and not sup.any():
        for s in names:
            if kept[s].nunique() > 1:  # pycanon divides by m - 1
                assert anonymity.t_closeness(kept, qi, [s]) <= models.t + 1e-9


def make_check(data: Data, models: PrivacyModels, ordered: tuple[bool, bool]) -> ModelCheck:
    if not models.needs_confidential:  # k alone: no confidential attributes (Mondrian's fast path)
        return ModelCheck(models)
    return ModelCheck(models, data.S, ordered)


# --- full-domain searches ---------------------------------------------------------------------


def exhaustive(lat: Lattice, loss: str) -> tuple[float, int]:
    """Least loss over every acceptable node (``inf`` when none is), and the least acceptable
    height (each node evaluated, no tagging)."""
    best, height = math.inf, sum(lat.heights) + 1
    for row in lat.nodes:
        node = tuple(int(x) for x in row)
        if lat.evaluate(node).acceptable:
            best = min(best, lat.loss(node, loss))
            height = min(height, sum(node))
    return best, height


def _lattice(data: Data, check: ModelCheck, max_sup: int) -> Lattice:
    return Lattice(data.leaves, data.hierarchies, check, max_sup, monotone=False)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("ordering", list(ORDERINGS))
@SETTINGS
@given(data=datasets(), sup_share=st.sampled_from([0.0, 0.1, 0.3]))
def test_samarati_valid_and_minimal(
    model: str, ordering: str, data: Data, sup_share: float
) -> None:
    models, ordered = MODELS[model], ORDERINGS[ordering]
    check = make_check(data, models, ordered)
    max_sup = max_suppressed(sup_share, data.n)
    best, height = exhaustive(_lattice(data, check, max_sup), "gil")
    if math.isinf(best):
        event("infeasible")
        with pytest.raises(InfeasibleError, match="field"):
            samarati(data.leaves, data.hierarchies, check, sup_share)
        return
    rel = samarati(data.leaves, data.hierarchies, check, sup_share, loss="gil")
    check_release(rel, data, models, ordered, max_sup)
    assert rel.info["height"] == height
    assert rel.levels is not None and sum(rel.levels) == height
    # the least loss of that height, among its acceptable nodes
    ref = _lattice(data, check, max_sup)
    at_height = [
        (ref.loss(node, "gil"), node)
        for node in ref.nodes_at(height)
        if ref.evaluate(node).acceptable
    ]
    assert (rel.info["loss_value"], rel.levels) == min(at_height)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("loss", sorted(LOSSES))
@SETTINGS
@given(
    data=datasets(),
    sup_share=st.sampled_from([0.0, 0.1, 0.3]),
    ordering=st.sampled_from(list(ORDERINGS)),
)
def test_optimal_valid_and_exact(
    model: str, loss: str, data: Data, sup_share: float, ordering: str
) -> None:
    models, ordered = MODELS[model], ORDERINGS[ordering]
    check = make_check(data, models, ordered)
    max_sup = max_suppressed(sup_share, data.n)
    best, _ = exhaustive(_lattice(data, check, max_sup), loss)
    if math.isinf(best):
        event("infeasible")
        with pytest.raises(InfeasibleError, match="field"):
            optimal(data.leaves, data.hierarchies, check, sup_share, loss=loss)
        return
    rel = optimal(data.leaves, data.hierarchies, check, sup_share, loss=loss)
    check_release(rel, data, models, ordered, max_sup)
    assert rel.info["loss_value"] == pytest.approx(best, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("model", ["k", "distinct_l"])
@SETTINGS
@given(data=datasets())
def test_incognito_valid_for_k_and_distinct_l(model: str, data: Data) -> None:
    """Incognito takes k and p (= distinct l) and no MaxSup: the other models are not its."""
    models = MODELS[model]
    check = make_check(data, models, (False, False))
    best, _ = exhaustive(_lattice(data, check, 0), "dm")
    if math.isinf(best):
        with pytest.raises(InfeasibleError):
            incognito_release(data.leaves, data.hierarchies, data.S, models.k, models.l)
        return
    rel = incognito_release(data.leaves, data.hierarchies, data.S, models.k, models.l)
    check_release(rel, data, models, (False, False), 0)


# --- Mondrian ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("relaxed", [False, True], ids=["strict", "relaxed"])
@SETTINGS
@given(
    data=datasets(max_n=60),
    kinds=st.sampled_from(["numeric", "categorical", "both"]),
    ordering=st.sampled_from(list(ORDERINGS)),
)
def test_mondrian_valid(model: str, relaxed: bool, data: Data, kinds: str, ordering: str) -> None:
    models, ordered = MODELS[model], ORDERINGS[ordering]
    check = make_check(data, models, ordered)
    num = data.numeric if kinds != "categorical" else np.zeros((data.n, 0))
    cat = kinds != "numeric"
    keys = KeyTable(
        num,
        data.leaves if cat else np.zeros((data.n, 0), dtype=np.int64),
        data.hierarchies if cat else (),
    )
    if check.violations(np.arange(data.n)):
        event("infeasible")
        with pytest.raises(InfeasibleError, match="field"):
            mondrian(keys, check, relaxed=relaxed)
        return
    rel = mondrian(keys, check, relaxed=relaxed)
    view = Data(data.leaves, data.hierarchies, num, data.S)
    check_release(rel, view, models, ordered, 0, numeric_cols=num.shape[1])


# --- worked cases -----------------------------------------------------------------------------


def test_infeasible_names_the_field() -> None:
    """One confidential value everywhere: no class can be 2-diverse, whatever the method."""
    h = random_hierarchy(np.random.default_rng(0), 4, 2)
    leaves = np.arange(8, dtype=np.int64).reshape(-1, 1) % 4
    S = np.zeros((8, 2), dtype=np.int64)
    for name, models in [
        ("l", PrivacyModels(k=2, l=2)),
        ("entropy_l", PrivacyModels(k=2, entropy_l=1.5)),
        ("recursive", PrivacyModels(k=2, recursive=(2.0, 2))),
        ("k", PrivacyModels(k=9)),
    ]:
        check = ModelCheck(models, S)
        for run in (
            lambda c=check: samarati(leaves, (h,), c, 0),
            lambda c=check: optimal(leaves, (h,), c, 0.5),
            lambda c=check: mondrian(KeyTable(np.zeros((8, 0)), leaves, (h,)), c),
        ):
            with pytest.raises(InfeasibleError, match=rf"field {name}\b"):
                run()


def test_public_names_shadow_no_module() -> None:
    """The exported names are the functions and classes, and every module of the packages
    stays reachable as a module (``import a.b.c as m`` takes the attribute when there is one)."""
    import importlib
    import pkgutil
    import types

    import locpriv.tabular as tab
    import locpriv.tabular.generalisation as gen
    import locpriv.tabular.models as mod

    for pkg in (tab, gen, mod):
        for name in pkg.__all__:
            assert not isinstance(getattr(pkg, name), types.ModuleType), (pkg.__name__, name)
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
            assert isinstance(getattr(pkg, info.name), types.ModuleType), (pkg.__name__, info.name)
    assert tab.samarati is samarati and tab.optimal is optimal and tab.mondrian is mondrian
    assert tab.PrivacyModels is PrivacyModels and tab.GeneralisedRelease is GeneralisedRelease
    assert gen.LevelHierarchy is LevelHierarchy and gen.KeyTable is KeyTable


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("k", "l", "sup"), [(2, 1, 0), (4, 1, 6), (3, 2, 0), (3, 2, 10)])
def test_samarati_on_larger_lattices_equals_exhaustive(seed: int, k: int, l: int, sup: int) -> None:  # noqa: E741
    """Five keys (up to 1024 nodes), monotone models: the downward scan with chain tagging
    returns the exhaustive search's minimal height and its least-loss node."""
    rng = np.random.default_rng(seed)
    hs = tuple(
        random_hierarchy(rng, int(rng.integers(3, 9)), int(rng.integers(2, 4))) for _ in range(5)
    )
    n = 300
    leaves = np.column_stack([rng.integers(0, len(h.labels[0]), n) for h in hs]).astype(np.int64)
    S = rng.integers(0, 4, (n, 1))
    check = ModelCheck(PrivacyModels(k=k, l=l), S if l > 1 else None)
    rel = samarati(leaves, hs, check, sup, loss="gil")
    ref = Lattice(leaves, hs, check, sup, monotone=False)
    ok = [
        (sum(nd), ref.loss(nd, "gil"), nd)
        for nd in map(tuple, ref.nodes.tolist())
        if ref.evaluate(nd).acceptable
    ]
    height, loss, node = min(ok)
    assert (rel.info["height"], rel.info["loss_value"], rel.levels) == (height, loss, node)
    assert rel.info["nodes_checked"] < ref.size
