"""Full-domain searches (lattice, Samarati, optimal, Incognito as a release): validity of every
release, checked from the released strings and by pycanon; optimality and minimal height against
exhaustive search; the Adult hierarchies on the real Adult table."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from locpriv.errors import ConfigError, InfeasibleError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.generalisation.incognito import incognito_release
from locpriv.tabular.generalisation.lattice import Lattice, max_suppressed, models_monotone
from locpriv.tabular.generalisation.optimal import best_node, optimal
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.generalisation.samarati import minimal_height, samarati
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels
from locpriv.tabular.quality.loss import LOSSES, loss_of_release
from tests.tabular._gen_helpers import random_hierarchy

ROOT = Path(__file__).resolve().parents[2]
ADULT_H = ROOT / "notebooks" / "data" / "adult_hierarchies"
ADULT = Path("/work/shared/data/adult.csv")
ADULT_QI = ("age", "workclass", "marital-status", "race", "sex", "native-country")


def check_release(  # noqa: PLR0917 - the release and what it was asked to satisfy
    rel: GeneralisedRelease,
    leaves: npt.NDArray[np.int64],
    hierarchies: tuple[LevelHierarchy, ...],
    S: npt.NDArray[np.int64] | None,
    k: int,
    l: int,  # noqa: E741
    max_sup: int,
) -> None:
    """Validity recomputed from the released strings alone, and by pycanon."""
    n, q = leaves.shape
    sup = np.asarray(rel.suppressed)
    assert int(sup.sum()) <= max_sup
    assert ((rel.labels == -1) == sup).all()
    for j, h in enumerate(hierarchies):  # every value is true: an ancestor of the original
        anc = h.ancestors()
        for i in range(n):
            v = rel.values[j][i]
            if sup[i]:
                assert v == "*"
            else:
                assert any(
                    h.labels[lev][anc[lev][leaves[i, j]]] == v for lev in range(h.height + 1)
                )
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i in range(n):
        if not sup[i]:
            groups[tuple(rel.values[j][i] for j in range(q))].append(i)
    # classes are exactly the sets of equal released keys
    assert len(groups) == len(set(rel.labels[~sup].tolist()))
    for rows in groups.values():
        assert len(rows) >= k
        assert len(set(rel.labels[rows].tolist())) == 1
        if S is not None:
            for col in S.T:
                assert len(set(col[rows].tolist())) >= l
    if (~sup).sum() == 0:
        return
    df = pd.DataFrame({rel.columns[j]: list(rel.values[j]) for j in range(q)})
    df["_one"] = "x"  # a constant column: pycanon's groupby warns on a single key column
    cols = [*rel.columns, "_one"]
    sens = [f"S{c}" for c in range(S.shape[1])] if S is not None else []
    for c, name in enumerate(sens):
        df[name] = S[:, c]  # type: ignore[index]
    kept = df[~sup].reset_index(drop=True)  # tuple suppression removes the records
    assert anonymity.k_anonymity(kept, cols) >= k
    if sens:
        assert anonymity.l_diversity(kept, cols, sens) >= l


def exhaustive(lat: Lattice, loss: str, k: int) -> tuple[float, int]:
    """Minimum loss over every acceptable node (each node evaluated, the loss from its
    release) and the minimal acceptable height."""
    best, height = float("inf"), 10**9
    for row in lat.nodes:
        node = tuple(int(x) for x in row)
        rel = lat.release(node)
        val = loss_of_release(loss, rel, k, lat.leaves, lat.hierarchies)
        # the search's pruning bound never exceeds the loss, acceptable node or not
        assert lat.lower_bound(node, loss) <= val + 1e-9 * max(1.0, val)
        if lat.evaluate(node).acceptable:
            best = min(best, val)
            height = min(height, sum(node))
    return best, height


@st.composite
def problems(draw: st.DrawFn) -> dict[str, object]:
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    q = draw(st.integers(1, 3))
    hs = tuple(
        random_hierarchy(rng, draw(st.integers(2, 6)), draw(st.integers(1, 3))) for _ in range(q)
    )
    n = draw(st.integers(4, 40))
    shape = draw(st.sampled_from(["uniform", "skewed", "sorted"]))
    leaves = np.column_stack([rng.integers(0, len(h.labels[0]), n) for h in hs])
    if shape == "skewed":  # most records on one value
        mask = rng.random((n, q)) < 0.7
        leaves[mask] = 0
    if shape == "sorted":
        leaves = leaves[np.lexsort(leaves.T[::-1])]
    S = rng.integers(0, draw(st.integers(1, 4)), size=(n, draw(st.integers(1, 2))))
    return {
        "hs": hs,
        "leaves": leaves.astype(np.int64),
        "S": S.astype(np.int64),
        "k": draw(st.integers(1, 5)),
        "l": draw(st.integers(1, 3)),
        "max_sup": draw(st.sampled_from([0, 1, 3, 0.1, 0.3])),
        "loss": draw(st.sampled_from(LOSSES)),
    }


def _check_of(p: dict[str, object]) -> ModelCheck:
    ell = int(p["l"])  # type: ignore[call-overload]
    S = p["S"] if ell > 1 else None
    return ModelCheck(PrivacyModels(k=int(p["k"]), l=ell), S)  # type: ignore[call-overload, arg-type]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_optimal_and_samarati_against_exhaustive(p: dict[str, object]) -> None:
    hs, leaves, S = p["hs"], p["leaves"], p["S"]
    k, ell, loss, ms = int(p["k"]), int(p["l"]), str(p["loss"]), p["max_sup"]  # type: ignore[call-overload]
    assert isinstance(hs, tuple) and isinstance(leaves, np.ndarray) and isinstance(S, np.ndarray)
    assert isinstance(ms, int | float)
    check = _check_of(p)
    ref = Lattice(leaves, hs, check, ms, monotone=False)
    max_sup = ref.max_sup
    if not ref.evaluate(ref.top).acceptable:
        with pytest.raises(InfeasibleError, match="even with every key"):
            optimal(leaves, hs, check, ms, loss=loss)
        with pytest.raises(InfeasibleError):
            samarati(leaves, hs, check, ms, loss=loss)
        return
    best, height = exhaustive(ref, loss, k)
    rel = optimal(leaves, hs, check, ms, loss=loss)
    assert rel.info["loss_value"] == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert loss_of_release(loss, rel, k, leaves, hs) == pytest.approx(best, rel=1e-9, abs=1e-12)
    check_release(rel, leaves, hs, S if ell > 1 else None, k, ell, max_sup)
    # without predictive tagging (the path for non-monotone models): the same optimum
    _, val, _ = best_node(Lattice(leaves, hs, check, ms, monotone=False), loss)
    assert val == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert rel.levels is not None and sum(rel.levels) >= height
    sam = samarati(leaves, hs, check, ms, loss=loss)
    assert sam.levels is not None and sum(sam.levels) == height == sam.info["height"]
    check_release(sam, leaves, hs, S if ell > 1 else None, k, ell, max_sup)
    at_height = [
        ref.loss(tuple(int(x) for x in r), loss)
        for r in ref.nodes
        if r.sum() == height and ref.evaluate(tuple(int(x) for x in r)).acceptable
    ]
    assert sam.info["loss_value"] == pytest.approx(min(at_height), rel=1e-9, abs=1e-12)
    assert rel.info["loss_value"] <= sam.info["loss_value"] + 1e-9 * max(1.0, best)  # type: ignore[operator]


class _EvenClasses(ModelCheck):
    """A class check that is NOT upward closed (a class passes iff its size is even): tagging
    would be unsound, so the searches must check every node they use."""

    def classes_ok(self, labels: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        lab = np.asarray(labels, dtype=np.int64)
        keep = lab >= 0
        g = int(lab.max()) + 1 if keep.any() else 0
        out: npt.NDArray[np.bool_] = np.bincount(lab[keep], minlength=g) % 2 == 0
        return out


@settings(max_examples=60, deadline=None)
@given(problems())
def test_optimal_without_tagging_on_a_non_monotone_check(p: dict[str, object]) -> None:
    hs, leaves, loss, ms = p["hs"], p["leaves"], str(p["loss"]), p["max_sup"]
    assert isinstance(hs, tuple) and isinstance(leaves, np.ndarray) and isinstance(ms, int | float)
    check = _EvenClasses(PrivacyModels(k=1))
    ref = Lattice(leaves, hs, check, ms, monotone=False)
    if not ref.evaluate(ref.top).acceptable:
        return
    best, height = exhaustive(ref, loss, 1)
    _, val, _ = best_node(Lattice(leaves, hs, check, ms, monotone=False), loss)
    assert val == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert minimal_height(Lattice(leaves, hs, check, ms, monotone=False)) == height


def test_monotonicity_rules() -> None:
    assert models_monotone(PrivacyModels(k=5, l=3), 100)
    assert models_monotone(PrivacyModels(k=5, entropy_l=2.0), 0)
    assert not models_monotone(PrivacyModels(k=5, entropy_l=2.0), 1)
    assert not models_monotone(PrivacyModels(k=5, t=0.2), 10)
    assert not models_monotone(PrivacyModels(k=5, recursive=(3.0, 2)), 10)
    assert max_suppressed(0.05, 1000) == 50 and max_suppressed(7, 10) == 7
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError):
            max_suppressed(bad, 10)


def test_tagging_saves_checks_and_agrees() -> None:
    rng = np.random.default_rng(11)
    hs = tuple(random_hierarchy(rng, 8, 4) for _ in range(4))
    leaves = np.column_stack([rng.integers(0, 8, 3000) for _ in hs])
    check = ModelCheck(PrivacyModels(k=20))
    tagged = Lattice(leaves, hs, check, 30)
    tagged.classify()
    plain = Lattice(leaves, hs, check, 30, monotone=False)
    plain.classify()
    assert (tagged.status == plain.status).all()
    assert tagged.evaluations < plain.evaluations == plain.size
    assert tagged.evaluations + tagged.tagged == tagged.size


def test_samarati_seed_example() -> None:
    """Ciriani et al., Fig. 1/7: Race × ZIP, k = 2, MaxSup = 2: height 1, GT[1,0] and GT[0,1]."""
    race = LevelHierarchy.from_rows([("asian", "person"), ("black", "person"), ("white", "person")])
    zips = LevelHierarchy.from_rows(
        [(z, z[:4] + "*", z[:3] + "**") for z in ("94138", "94139", "94141", "94142")]
    )
    rows = [
        ("asian", "94142"), ("asian", "94141"), ("asian", "94139"), ("asian", "94139"),
        ("asian", "94139"), ("black", "94138"), ("black", "94139"), ("black", "94138"),
        ("black", "94139"), ("white", "94139"), ("white", "94138"),
    ]  # fmt: skip
    leaves = np.column_stack([race.codes(r for r, _ in rows), zips.codes(z for _, z in rows)])
    check = ModelCheck(PrivacyModels(k=2))
    lat = Lattice(leaves, (race, zips), check, 2)
    assert not lat.evaluate((0, 0)).acceptable
    assert lat.evaluate((1, 0)).acceptable and lat.evaluate((0, 1)).acceptable
    rel = samarati(leaves, (race, zips), check, 2, loss="dm", columns=("race", "zip"))
    assert rel.info["height"] == 1 and rel.levels in ((1, 0), (0, 1))
    check_release(rel, leaves, (race, zips), None, 2, 1, 2)


def test_infeasible_and_bad_input() -> None:
    h = LevelHierarchy.from_rows([("a", "*"), ("b", "*")])
    leaves = np.array([[0], [1], [0]])
    with pytest.raises(InfeasibleError, match="MaxSup = 0"):
        optimal(leaves, (h,), ModelCheck(PrivacyModels(k=4)), 0)
    with pytest.raises(InfeasibleError):
        samarati(leaves, (h,), ModelCheck(PrivacyModels(k=2, l=3), np.array([0, 1, 1])), 1)
    # suppressing every record is allowed when MaxSup says so
    rel = optimal(leaves, (h,), ModelCheck(PrivacyModels(k=4)), 1.0)
    assert rel.suppressed.all() and rel.values == (("*", "*", "*"),)
    with pytest.raises(ConfigError):
        optimal(leaves, (h,), ModelCheck(PrivacyModels(k=2)), 0, loss="nope")
    tall = LevelHierarchy.from_rows([("a", *("x",) * 40, "*"), ("b", *("x",) * 40, "*")])
    with pytest.raises(ConfigError, match="nodes, above"):  # 42^4 nodes
        optimal(np.zeros((3, 4), dtype=np.int64), (tall,) * 4, ModelCheck(PrivacyModels()), 0)
    with pytest.raises(Exception, match="leaf codes"):
        optimal(np.array([[5]]), (h,), ModelCheck(PrivacyModels(k=1)), 0)


def test_order_of_records_does_not_matter() -> None:
    rng = np.random.default_rng(5)
    hs = tuple(random_hierarchy(rng, 6, 3) for _ in range(3))
    leaves = np.column_stack([rng.integers(0, 6, 400) for _ in hs])
    S = rng.integers(0, 4, 400)
    perm = rng.permutation(400)
    for ms in (0, 0.02):
        a = optimal(leaves, hs, ModelCheck(PrivacyModels(k=4, l=2), S), ms, loss="entropy")
        b = optimal(
            leaves[perm], hs, ModelCheck(PrivacyModels(k=4, l=2), S[perm]), ms, loss="entropy"
        )
        assert a.levels == b.levels
        assert a.suppressed[perm].tolist() == b.suppressed.tolist()


def test_incognito_as_release() -> None:
    rng = np.random.default_rng(8)
    hs = tuple(random_hierarchy(rng, 5, 3) for _ in range(3))
    leaves = np.column_stack([rng.integers(0, 5, 300) for _ in hs])
    S = rng.integers(0, 3, 300)
    rel = incognito_release(leaves, hs, S, 5, 2, columns=("a", "b", "c"))
    check_release(rel, leaves, hs, S[:, None], 5, 2, 0)
    assert not rel.suppressed.any() and rel.columns == ("a", "b", "c")
    # the optimal DM without suppression is Incognito's choice (least DM of the minimal nodes)
    opt = optimal(leaves, hs, ModelCheck(PrivacyModels(k=5, l=2), S), 0, loss="dm")
    assert opt.info["loss_value"] == loss_of_release("dm", rel, 5)


# --- Adult ------------------------------------------------------------------------------


def adult() -> tuple[npt.NDArray[np.int64], tuple[LevelHierarchy, ...], npt.NDArray[np.int64]]:
    """Adult's six key attributes with ARX's hierarchies (records with a missing key dropped)
    and the income as confidential attribute."""
    hs = []
    for col in ADULT_QI:
        with open(ADULT_H / f"{col}.csv", newline="") as f:
            hs.append(LevelHierarchy.from_rows(csv.reader(f, delimiter=";")))
    df = pd.read_csv(ADULT, dtype=str, skipinitialspace=True)
    df = df[~df[list(ADULT_QI)].isin(["?"]).any(axis=1)]
    leaves = np.column_stack([h.codes(df[c]) for h, c in zip(hs, ADULT_QI, strict=True)])
    income = np.unique(df["income"].to_numpy(), return_inverse=True)[1].astype(np.int64)
    return leaves, tuple(hs), income


@pytest.mark.skipif(not ADULT.exists(), reason="Adult not present")
def test_adult_releases_are_valid_and_optimal_beats_samarati() -> None:
    leaves, hs, income = adult()
    assert leaves.shape == (30169, 6)  # 32561 less those missing one of these six keys
    for models, ms in ((PrivacyModels(k=5), 0.01), (PrivacyModels(k=10, l=2), 0.05)):
        S = income if models.l > 1 else None
        check = ModelCheck(models, S)
        max_sup = max_suppressed(ms, len(leaves))
        for loss in ("gil", "dm"):
            opt = optimal(leaves, hs, check, ms, loss=loss, columns=ADULT_QI)
            sam = samarati(leaves, hs, check, ms, loss=loss, columns=ADULT_QI)
            for rel in (opt, sam):
                check_release(
                    rel, leaves, hs, None if S is None else S[:, None], models.k, models.l, max_sup
                )
            assert opt.info["loss_value"] <= sam.info["loss_value"]  # type: ignore[operator]
            assert opt.levels is not None and sam.levels is not None
            assert sum(sam.levels) <= sum(opt.levels)
    assert Counter(opt.values[4]).keys() <= {"Male", "Female", "*"}
