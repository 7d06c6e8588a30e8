"""The model repair (locpriv.tabular.models.repair) and the models applied by microaggregation
(Microaggregator, anonymize): every release satisfies the models by the independent validators
and by pycanon, over random, skewed and sorted data; infeasible models raise naming the field."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from locpriv.errors import ConfigError, InfeasibleError
from locpriv.tabular import Microaggregator, anonymize
from locpriv.tabular.models import ModelCheck, PrivacyModels
from locpriv.tabular.models.repair import repair
from locpriv.tabular.models.stratified import group_size, t_first
from locpriv.tabular.quality import validate

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def partitions(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Key values X, a partition of them (some records suppressed) and confidential codes:
    uniform, skewed (one value dominates) or correlated with the key (sorted along it)."""
    n = draw(st.integers(4, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    X = rng.normal(size=(n, draw(st.integers(1, 3))))
    g = draw(st.integers(1, max(1, n // 2)))
    lab = rng.integers(0, g, n)
    if draw(st.booleans()):
        lab[rng.random(n) < 0.1] = -1
    m = draw(st.integers(2, 8))
    kind = draw(st.sampled_from(["uniform", "skewed", "sorted"]))
    s = rng.integers(0, m, n)
    if kind == "skewed":
        s = np.where(rng.random(n) < 0.85, 0, s)
    elif kind == "sorted":  # confidential value follows the first key attribute
        s = np.sort(s)[np.argsort(np.argsort(X[:, 0]))]
    _, s = np.unique(s, return_inverse=True)
    return X, lab.astype(np.int64), s.astype(np.int64)


MODELS = st.one_of(
    st.builds(lambda t: PrivacyModels(k=2, t=t), st.floats(0.0, 0.6)),
    st.builds(lambda e: PrivacyModels(k=2, entropy_l=e), st.floats(1.0, 2.5)),
    st.builds(
        lambda c, rl: PrivacyModels(k=2, recursive=(c, rl)), st.floats(1.0, 4.0), st.integers(1, 3)
    ),
    st.builds(
        lambda t, e: PrivacyModels(k=3, l=2, entropy_l=e, t=t),
        st.floats(0.05, 0.5),
        st.floats(1.0, 2.0),
    ),
)


@SETTINGS
@given(partitions(), MODELS, st.booleans())
def test_repair_gives_valid_coarser_partitions(
    data: tuple[np.ndarray, np.ndarray, np.ndarray], md: PrivacyModels, ordered: bool
) -> None:
    X, lab, s = data
    check = ModelCheck(md, s, ordered=[ordered])
    kept = lab >= 0
    whole = check.violations(np.flatnonzero(kept))
    if not kept.any():
        return
    if whole:  # no partition can do it: a clear error naming the field
        with pytest.raises(InfeasibleError, match=whole[0]):
            repair(X, lab, check)
        return
    out = repair(X, lab, check)
    assert np.array_equal(out < 0, lab < 0)  # suppressed stay suppressed
    assert check.classes_ok(out).all()
    # a coarsening: every original class lies in one repaired class
    pairs = np.unique(np.column_stack([lab[kept], out[kept]]), axis=0)
    assert np.unique(pairs[:, 0]).size == pairs.shape[0]
    # the independent validator agrees (classes as key values, whole table = kept records)
    if kept.all():
        df = pd.DataFrame({"q": out, "r": 0, "s": s})
        bad = validate.table_models(
            df,
            ["q", "r"],
            ["s"],
            k=md.k,
            l=md.l,
            entropy_l=md.entropy_l,
            recursive=md.recursive,
            t=md.t,
            ordered=["s"] if ordered else [],
        )
        assert bad == []


def test_repair_keeps_a_valid_partition_and_t_zero_is_always_feasible() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    s = rng.integers(0, 3, 60)
    lab = np.repeat(np.arange(12), 5)
    check = ModelCheck(PrivacyModels(k=5), s)
    assert np.array_equal(repair(X, lab, check), lab)
    out = repair(X, lab, ModelCheck(PrivacyModels(k=2, t=0.0), s, ordered=[True]))
    assert ModelCheck(PrivacyModels(k=2, t=0.0), s, ordered=[True]).classes_ok(out).all()


@pytest.mark.parametrize(
    ("models", "field"),
    [
        (PrivacyModels(k=1, entropy_l=2.5), "entropy_l"),  # whole table: two values
        (PrivacyModels(k=1, recursive=(1.0, 2)), "recursive"),  # 50 < 1 · 50 fails
        (PrivacyModels(k=1, l=3), "l"),
        (PrivacyModels(k=200), "k"),
    ],
)
def test_infeasible_models_name_the_field(models: PrivacyModels, field: str) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 2))
    s = np.repeat([0, 1], 50)
    with pytest.raises(InfeasibleError, match=f"field {field}\\)"):
        repair(X, np.arange(100) // 4, ModelCheck(models, s))


def adult_like(n: int, seed: int) -> pd.DataFrame:
    """Keys correlated with a skewed confidential attribute (the case the models exist for)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, n)
    hours = rng.integers(1, 99, n)
    sex = rng.choice(["F", "M"], n)
    jobs = np.array(["clerk", "nurse", "farmer", "exec", "sales", "teacher"])
    job = jobs[np.minimum((age - 18) // 12 + rng.integers(0, 2, n), 5)]
    job = np.where(rng.random(n) < 0.3, "clerk", job)
    income = (age * 800 + hours * 300 + rng.integers(0, 5000, n)) // 1000 * 1000
    return pd.DataFrame({"age": age, "hours": hours, "sex": sex, "job": job, "income": income})


@pytest.mark.parametrize(
    "kw",
    [
        {"t": 0.25},
        {"entropy_l": 2.0},
        {"recursive": (3.0, 2)},
        {"t": 0.3, "entropy_l": 1.8, "p": 2},
    ],
)
def test_anonymize_releases_satisfy_the_models_read_back_from_file(
    tmp_path: Path, kw: dict[str, object]
) -> None:
    df = adult_like(400, 7)
    path = tmp_path / "in.csv"
    df.to_csv(path, index=False)
    df = pd.read_csv(path)
    args = dict(kw)
    p = int(args.pop("p", 1))  # type: ignore[call-overload]
    out, rep = anonymize(
        df,
        ["age", "hours", "sex"],
        ["job", "income"],
        k=4,
        p=p,
        seed=1,
        nominal=["sex"],
        warn=lambda _: None,
        **args,  # type: ignore[arg-type]
    )
    out.to_csv(tmp_path / "out.csv", index=False)
    back = pd.read_csv(tmp_path / "out.csv")
    qi = ["age", "hours", "sex"]
    bad = validate.table_models(
        back,
        qi,
        ["job", "income"],
        k=4,
        l=p,
        entropy_l=float(kw.get("entropy_l", 1.0)),  # type: ignore[arg-type]
        recursive=kw.get("recursive"),  # type: ignore[arg-type]
        ordered=["income"],
        t=kw.get("t"),  # type: ignore[arg-type]
    )
    assert bad == []
    # pycanon on the file: income is numeric (ordered EMD), job a string (equal distance)
    if "t" in kw:
        assert anonymity.t_closeness(back, qi, ["job", "income"]) <= float(kw["t"]) + 1e-12  # type: ignore[arg-type]
    if "entropy_l" in kw:
        assert anonymity.entropy_l_diversity(back, qi, ["job", "income"]) >= math.floor(
            float(kw["entropy_l"]) - 1e-9  # type: ignore[arg-type]
        )
    assert anonymity.k_anonymity(back, qi) >= 4
    # the report's figures are those of the file
    md = rep["models"]
    t_file = validate.table_t(back, qi, ["job", "income"], ordered=["income"])
    assert md["t_achieved"] == pytest.approx(t_file, abs=1e-12)
    ent = validate.table_entropy_l(back, qi, ["job", "income"])
    assert md["entropy_l_achieved"] == pytest.approx(ent, rel=1e-12)
    assert md["ordered"] == [False, True]


def test_estimator_applies_the_models_and_validates_them() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3))
    s = (X[:, 0] > 0.5).astype(np.int64) + (X[:, 1] > 1).astype(np.int64)
    est = Microaggregator(k=3, method="mdav", t=0.2, ordered=[True]).fit(X, s)
    assert ModelCheck(PrivacyModels(k=3, t=0.2), s, [True]).classes_ok(est.labels_).all()
    assert est.report_["models"]["merged_groups"] > 0
    with pytest.raises(ConfigError, match="t must"):
        Microaggregator(k=3, t=1.5).fit(X, s)
    with pytest.raises(ConfigError, match="recursive"):
        Microaggregator(k=3, recursive=3).fit(X, s)  # type: ignore[arg-type]
    with pytest.raises(InfeasibleError, match="entropy_l"):
        Microaggregator(k=3, entropy_l=5.0).fit(X, s)
    with pytest.raises(ConfigError, match="confidential"):
        Microaggregator(k=3, t=0.2).fit(X)


def test_anonymize_infeasible_entropy_names_the_field() -> None:
    df = adult_like(100, 2)
    with pytest.raises(InfeasibleError, match="entropy_l"):
        anonymize(df, ["age", "hours"], "sex", k=3, entropy_l=2.5, warn=lambda _: None)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(10, 300), st.integers(2, 8), st.floats(0.05, 0.5), st.booleans(), st.integers(0, 99)
)
def test_t_first_partitions_into_groups_of_at_least_k(
    n: int, k: int, t: float, ordered: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    s = np.unique(rng.integers(0, max(2, n // 3), n), return_inverse=True)[1]
    if k > n:
        return
    lab = t_first(X, s, k, t, ordered, seed=seed)
    assert lab.min() == 0 and np.bincount(lab).min() >= min(k, n)
    check = ModelCheck(PrivacyModels(k=k, t=t), s, [ordered])
    assert check.classes_ok(repair(X, lab, check)).all()


def test_t_first_meets_t_by_construction_on_distinct_ordered_values() -> None:
    """Soria-Comas et al.: with distinct ordered values, one record per stratum keeps a group
    within t of the table; the key-space neighbours of MDAV-like groups are far from it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    s = np.argsort(np.argsort(X[:, 0] + 0.3 * rng.normal(size=2000)))  # follows the key
    check = ModelCheck(PrivacyModels(k=5, t=0.1), s, [True])
    assert group_size(s, 5, 0.1, True) <= 6  # the bound n / (2(n-1)t + 1) = 4.98
    assert check.classes_ok(t_first(X, s, 5, 0.1, True)).mean() >= 0.95
    neighbours = Microaggregator(k=5, method="mdav").fit(X).labels_
    assert check.classes_ok(neighbours).mean() <= 0.05


def attacker_beliefs(released: pd.DataFrame, qi: list[str], s: str) -> tuple[float, float]:
    """An intruder who knows a target's keys reads her class in the released file and believes
    each confidential value with its share there. Returns the largest change of belief from the
    table's shares (the skewness / similarity gain t bounds) and the largest belief in one value
    (the confidence a homogeneity attack reaches)."""
    prior = released[s].value_counts(normalize=True)
    post = released.groupby(qi)[s].value_counts(normalize=True)
    gain = (post - prior.reindex(post.index.get_level_values(-1)).to_numpy()).abs().max()
    # values absent from a class: belief 0, change = the prior
    absent = 0.0
    for _, grp in released.groupby(qi):
        missing = prior.index.difference(grp[s].unique())
        absent = max(absent, float(prior[missing].max()) if len(missing) else 0.0)
    return max(float(gain), absent), float(post.max())


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("t", [0.1, 0.2, 0.35])
def test_intruder_gain_bounded_by_t_and_confidence_by_recursive_c(
    tmp_path: Path, seed: int, t: float
) -> None:
    """Attack the written file: under equal-distance t-closeness no class moves the intruder's
    belief in any value by more than t (the positive and negative differences each sum to the
    EMD); without the model the same data moves it far more. Under recursive (c, 2)-diversity
    the most frequent value of a class holds less than c/(c+1) of it."""
    df = adult_like(600, seed)
    qi = ["age", "hours", "sex"]
    kw = {"nominal": ["sex"], "warn": lambda _: None, "seed": seed}
    plain, _ = anonymize(df, qi, "job", 4, **kw)  # type: ignore[arg-type]
    closed, _ = anonymize(df, qi, "job", 4, t=t, **kw)  # type: ignore[arg-type]
    c = 1.5
    diverse, _ = anonymize(df, qi, "job", 4, recursive=(c, 2), **kw)  # type: ignore[arg-type]
    for frame, name in ((plain, "plain"), (closed, "closed"), (diverse, "diverse")):
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    gain_plain, conf_plain = attacker_beliefs(pd.read_csv(tmp_path / "plain.csv"), qi, "job")
    gain_t, _ = attacker_beliefs(pd.read_csv(tmp_path / "closed.csv"), qi, "job")
    _, conf_rec = attacker_beliefs(pd.read_csv(tmp_path / "diverse.csv"), qi, "job")
    assert gain_t <= t + 1e-12
    assert gain_plain > max(0.5, 2 * t)
    assert conf_rec < c / (c + 1)
    assert conf_plain == 1.0  # homogeneous classes exist without the models
