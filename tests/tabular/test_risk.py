"""Disclosure-risk measures (locpriv.tabular.risk.measures, linkage, assess) on worked examples
whose expected values are derived by hand in each test, and against anonymeter's attacks."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locpriv.errors import ConfigError
from locpriv.tabular.io.frame import anonymize
from locpriv.tabular.risk import linkage
from locpriv.tabular.risk import measures as risk
from locpriv.tabular.risk.assess import RiskExceeded, assess, check_bounds, parse_bounds

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult.csv"

# Truta, Campan & Meyer (SDM 2007), Table 1: masked microdata, 3-anonymous on (Age, ZipCode),
# confidential Diagnosis and Income. The paper: the first QI-cluster (3 tuples) has a single
# diagnosis (AIDS), so an intruder who knows a target is in it learns AIDS.
TRUTA_TABLE_1 = pd.DataFrame(
    {
        "Age": [20, 20, 20, 30, 30, 30, 30],
        "ZipCode": [41099] * 7,
        "Diagnosis": ["AIDS"] * 3 + ["Diabetes"] * 2 + ["Tuberculosis"] * 2,
        "Income": [60_000, 60_000, 40_000, 50_000, 40_000, 50_000, 40_000],
    }
)


def test_reidentification_on_truta_table_1() -> None:
    labels = TRUTA_TABLE_1.groupby(["Age", "ZipCode"]).ngroup().to_numpy()
    r = risk.reidentification(labels)
    # classes of 3 and 4 records, n = 7
    assert r["prosecutor_max"] == pytest.approx(1 / 3)  # 1 / min f_c
    assert r["prosecutor_mean"] == pytest.approx(2 / 7)  # (3 * 1/3 + 4 * 1/4) / 7 = classes / n
    assert r["records_at_max_risk"] == pytest.approx(3 / 7)  # the 3 records of the small class
    assert r["marketer"] == pytest.approx(2 / 7)  # population = the release: classes / n
    assert r["journalist_max"] == r["prosecutor_max"]


def test_journalist_and_marketer_against_a_population() -> None:
    # release classes of sizes 2, 3, 5 (n = 10); population classes F = 4, 3, 20
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 2])
    big_f = np.array([4, 4, 3, 3, 3, 20, 20, 20, 20, 20])
    r = risk.reidentification(labels, big_f)
    assert r["prosecutor_max"] == pytest.approx(1 / 2)
    assert r["prosecutor_mean"] == pytest.approx(3 / 10)
    assert r["journalist_max"] == pytest.approx(1 / 3)  # 1 / min F_c
    # journalist mean = (2/4 + 3/3 + 5/20) / 10 = 1.75 / 10; marketer = sum f_c/F_c / n, the same
    assert r["journalist_mean"] == pytest.approx(0.175)
    assert r["marketer"] == pytest.approx(0.175)
    # a population class smaller than the release's is impossible: raised to f_c
    low = risk.reidentification(labels, np.ones(10))
    assert low["journalist_max"] == pytest.approx(1 / 2)
    assert low["marketer"] == pytest.approx(3 / 10)


def test_inference_on_truta_table_1() -> None:
    labels = TRUTA_TABLE_1.groupby(["Age", "ZipCode"]).ngroup().to_numpy()
    d = risk.inference(labels, TRUTA_TABLE_1["Diagnosis"].to_numpy())
    # cluster 1: AIDS x3 (majority right 3 times); cluster 2: Diabetes x2, Tuberculosis x2 (2)
    assert d["majority"] == pytest.approx(5 / 7)
    assert d["baseline"] == pytest.approx(3 / 7)  # AIDS is the most frequent value overall
    assert d["gain"] == pytest.approx(2 / 7)
    assert d["homogeneous_records"] == pytest.approx(3 / 7)  # the paper's AIDS disclosure
    # random member: (3^2/3 + (2^2 + 2^2)/4) / 7 = (3 + 2) / 7
    assert d["random_member"] == pytest.approx(5 / 7)
    inc = risk.inference(labels, TRUTA_TABLE_1["Income"].to_numpy())
    # cluster 1: 60k x2, 40k x1 -> 2; cluster 2: 50k x2, 40k x2 -> 2; baseline 40k x3
    assert inc["majority"] == pytest.approx(4 / 7)
    assert inc["baseline"] == pytest.approx(3 / 7)
    assert inc["homogeneous_records"] == 0.0


def test_dbrl_ties_split_and_a_wrong_nearest_group() -> None:
    # original x = 0, 4, 5 | 6, 20, 21 released as the group means 3 | 15.667 (k = 3)
    x = pd.DataFrame({"x": [0.0, 4, 5, 6, 20, 21]})
    y = pd.DataFrame({"x": [3.0, 3, 3, 47 / 3, 47 / 3, 47 / 3]})
    X, Y = linkage.encode_pair(x, y, ["x"])
    p = linkage.dbrl(X, Y, np.arange(6))
    # record 6 is nearer to 3 (distance 3) than to its own 15.667 (9.67): not linked; every
    # other record's nearest value is its own group's, shared by 3 records: 1/3 each
    assert p.tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0, 1 / 3, 1 / 3])
    assert p.mean() == pytest.approx(5 / 18)


def test_dbrl_a_known_pass_through_attribute_breaks_the_ties() -> None:
    orig = pd.DataFrame({"x": [1.0, 2, 3, 10, 11, 12], "h": [5, 6, 7, 5, 6, 7]})
    rel = pd.DataFrame({"x": [2.0, 2, 2, 11, 11, 11], "h": [5, 6, 7, 5, 6, 7]})
    X, Y = linkage.encode_pair(orig, rel, ["x"])
    assert linkage.dbrl(X, Y, np.arange(6)).mean() == pytest.approx(1 / 3)  # 3-way ties
    X, Y = linkage.encode_pair(orig, rel, ["x", "h"])
    # within a group the x distance is the same for all 3 released rows (|x - mean| / sd_x)
    # and h differs by >= 1/sd_h = 1.22 except for the own row: every record is linked
    assert linkage.dbrl(X, Y, np.arange(6)).mean() == pytest.approx(1.0)
    # a non-numerical attribute known exactly does the same
    orig["c"], rel["c"] = list("abcabc"), list("abcabc")
    X, Y = linkage.encode_pair(orig, rel, ["x", "c"])
    assert linkage.dbrl(X, Y, np.arange(6)).mean() == pytest.approx(1.0)


def test_interval_disclosure_rank_based() -> None:
    x = np.arange(1.0, 11.0)  # 1..10
    y = x + 1  # released 2..11, ranks as x
    # p = 10 %: ranks must differ by < 1, the interval is the released value only: x != y -> 0
    assert risk.interval_disclosure_rank(x, y, (10,)) == 0.0
    # p = 20 %: ranks r-1..r+1 -> [y_r - 1, y_r + 1] holds x_r = y_r - 1 except for r = 0
    # ([2, 3] does not hold 1): 9/10; p = 30 %: r-2..r+2, the same 9/10
    assert risk.interval_disclosure_rank(x, y, (20,)) == pytest.approx(0.9)
    assert risk.interval_disclosure_rank(x, y, (10, 20, 30)) == pytest.approx(0.6)
    assert risk.interval_disclosure_rank(x, x) == 1.0  # an unmasked column: always inside


def test_interval_disclosure_as_sdcmicro_computes_it() -> None:
    Y = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0], [10.0, 20.0]])
    # sample sd: column 1 sqrt(4 * 25 / 3) = 5.7735 -> 0.05 sd = 0.2887; column 2 10 -> 0.5
    X = np.array([[0.1, 0.4], [1.0, 0.4], [11.0, 1.0], [10.2, 30.0]])
    # outside per row: 0, 1, 2, 1; sdcMicro counts rows with 0 or 1 outside -> 3/4
    assert risk.interval_disclosure_sdcmicro(X, Y) == pytest.approx(0.75)
    # per attribute: column 1 inside for rows 0 and 3 -> 1/2
    assert risk.interval_share_sd(X[:, 0], Y[:, 0]) == pytest.approx(0.5)


def test_attribute_loss() -> None:
    assert risk.attribute_loss([1.0, 2, 3], [2.0, 2, 2], "numerical") == pytest.approx(100.0)
    assert risk.attribute_loss([1.0, 3], [2.0, 2], "numerical") == pytest.approx(100.0)
    assert risk.attribute_loss([0.0, 0, 4, 4], [0.0, 0, 4, 4], "numerical") == 0.0
    assert risk.attribute_loss(["a", "b", "a", "c"], ["a", "a", "a", "a"], "nominal") == 50.0


def test_assess_on_a_release_and_its_gate() -> None:
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": rng.normal(50_000, 15_000, n),
            "uid": rng.permutation(n) * 7 + 3,  # a near-unique pass-through column
            "disease": rng.choice(["flu", "hiv", "cold"], n),
        }
    )
    warned: list[str] = []
    out, _ = anonymize(df, ["age", "income"], ["disease"], 5, 1, "mdav", 0, warn=warned.append)
    assert any("'uid'" in w and "near-unique" in w for w in warned), warned
    # the rows are shuffled (the default): assess follows the permutation the frame carries
    assert not out["uid"].equals(df["uid"])
    res = assess(df, out, ["age", "income"], ["disease"])
    # rows reordered after the release still carry its permutation (pandas copies attrs): it
    # no longer matches the rows, so nothing is linked on wrong rows
    moved = assess(df, out.iloc[::-1].reset_index(drop=True), ["age", "income"], ["disease"])
    assert moved["measures"]["linkage"] is None and "linkage" not in moved
    assert any("do not match the permutation" in note for note in moved["notes"])
    m = res["measures"]
    sizes = out.groupby(["age", "income"]).size()
    assert m["prosecutor"] == pytest.approx(1 / sizes.min())
    assert m["prosecutor_mean"] == pytest.approx(len(sizes) / n)
    assert m["linkage"] <= m["prosecutor_mean"] + 1e-12  # ties: at most 1/|class| each
    # uid is unique but numerical: standardised, its neighbours (7 apart, 0.012 sd) may lie in
    # a nearer group, so most, not all, records are linked through it
    assert res["linkage"]["passthrough"]["uid"] > 0.9
    assert res["linkage"]["passthrough"]["disease"] < 0.9
    assert m["linkage_passthrough"] == res["linkage"]["passthrough"]["uid"]
    assert 0 <= m["interval"] <= 1 and 0 <= m["inference"] <= 1
    assert set(res["il_per_attribute"]) == {"age", "income"}
    check_bounds(m, parse_bounds("prosecutor=0.2"))
    with pytest.raises(RiskExceeded, match=r"linkage_passthrough = 0\.9\d* > 0\.5"):
        check_bounds(m, parse_bounds("prosecutor=0.2,linkage_passthrough=0.5"))
    with pytest.raises(ConfigError, match="not MEASURE=VALUE"):
        parse_bounds("prosecuter=0.2")


def _require_anonymeter() -> None:
    try:
        import anonymeter  # noqa: F401
    except ImportError:
        message = "anonymeter not installed (pip install --no-deps anonymeter==1.1.0 polars)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.parametrize("qi", [["age"], ["age", "education-num", "hours-per-week"]])
def test_agrees_with_anonymeter_attacks(qi: list[str]) -> None:
    """Our DBRL on the keys and our nearest-record inference, on Adult samples released at
    k = 5 in random order, fall inside the 95 % interval of anonymeter's linkability attack
    (keys on one side, the near-unique fnlwgt on the other: a link is found exactly when the
    nearest record on the keys is the target's own) and of its inference attack on
    occupation. With one key attribute the nearest record does not depend on the distance
    (anonymeter's range-scaled L1 and our standardised L2 order it alike)."""
    _require_anonymeter()
    from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator

    if not ADULT.exists():
        pytest.skip(f"{ADULT} not found")
    for seed in (1, 2):
        # every original record is attacked (n_attacks = len(ori)), so anonymeter's rate is no
        # sample of targets; its tie-breaks and nearest-neighbour search are its own, and
        # numpy's global state is seeded for them
        np.random.seed(seed)  # noqa: NPY002 - anonymeter draws from numpy's global state
        df = pd.read_csv(ADULT).sample(2000, random_state=seed).reset_index(drop=True)
        ori, control = df.iloc[:1000].reset_index(drop=True), df.iloc[1000:]
        # the release's own random order (seeded): assess links through its permutation
        syn, _ = anonymize(ori, qi, ["occupation"], 5, 1, "mdav", seed, warn=lambda _: None)
        res = assess(ori, syn, qi, ["occupation"])
        assert res["measures"]["linkage"] is not None
        cols = [*qi, "fnlwgt", "occupation"]
        le = LinkabilityEvaluator(
            ori[cols],
            syn[cols],
            aux_cols=(qi, ["fnlwgt"]),
            n_attacks=len(ori),
            control=control[cols].reset_index(drop=True),
            n_neighbors=1,
        )
        le.evaluate(n_jobs=1)
        rate = le.results().attack_rate
        assert abs(res["measures"]["linkage"] - rate.value) <= rate.error, (seed, rate)
        ie = InferenceEvaluator(
            ori[cols],
            syn[cols],
            aux_cols=qi,
            secret="occupation",
            n_attacks=len(ori),
            control=control[cols].reset_index(drop=True),
        )
        ie.evaluate(n_jobs=1)
        rate = ie.results().attack_rate
        ours = res["inference"]["occupation"]["nearest_record"]
        assert abs(ours - rate.value) <= rate.error, (seed, rate)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dbrl_over_class_vectors_equals_dbrl_over_records(seed: int) -> None:
    """assess searches one vector per class (every member carries it); the result is the
    record-level DBRL's, ties (duplicate key values across classes included) split alike."""
    rng = np.random.default_rng(seed)
    n = 200
    df = pd.DataFrame({"a": rng.integers(0, 6, n), "b": rng.integers(0, 4, n)})
    df["s"] = rng.choice(list("xyz"), n)
    # in the input's order (keep_order): row i of the release is record i
    out, _ = anonymize(df, ["a", "b"], [], 3, 1, "mdav", 0, keep_order=True, warn=lambda _: None)
    out = out.astype({"a": float, "b": float})
    out.loc[:5, ["a", "b"]] = out.loc[6, ["a", "b"]].to_numpy()  # merge classes: ties
    X, Y = linkage.encode_pair(df, out, ["a", "b"])
    labels = out.groupby(["a", "b"]).ngroup().to_numpy()
    near = linkage.nearest_classes(X, Y, labels)
    by_class = linkage.dbrl_by_class(near, labels, np.bincount(labels))
    assert by_class == pytest.approx(linkage.dbrl(X, Y, np.arange(n)))
    # nearest-record inference = the share of the tied nearest records holding the value
    inf = linkage.nearest_inference(near, labels, df["s"], df["s"])
    d1 = np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(axis=2))
    tied = d1 <= d1.min(axis=1, keepdims=True) + 1e-9
    expected = [(df["s"].to_numpy()[t] == v).mean() for t, v in zip(tied, df["s"], strict=True)]
    assert inf == pytest.approx(expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_dbrl_with_a_column_through_classes_equals_dbrl(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    df = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.integers(0, 5, n).astype(float),
            "h": rng.integers(0, 8, n),  # repeated values: ties across and within classes
            "c": rng.choice(list("pq"), n),
        }
    )
    out, _ = anonymize(df, ["a", "b"], [], 4, 1, "mdav", 0, keep_order=True, warn=lambda _: None)
    labels = out.groupby(["a", "b"]).ngroup().to_numpy()
    X, Y = linkage.encode_pair(df, out, ["a", "b"])
    for col in ("h", "c"):
        Xc, Yc = linkage.encode_pair(df, out, [col])
        fast = linkage.dbrl_with_column(
            X, Y, x_col=Xc[:, 0], y_col=Yc[:, 0], labels=labels, truth=np.arange(n)
        )
        Xj, Yj = linkage.encode_pair(df, out, ["a", "b", col])
        assert fast == pytest.approx(linkage.dbrl(Xj, Yj, np.arange(n)))
