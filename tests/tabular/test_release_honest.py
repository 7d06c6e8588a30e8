"""Honest numbers and the pass-through audit: every report figure is recomputed here from the
written file (read back from CSV and Parquet), independently of the library's own encoders;
integer keys come back as integers with each group on one value, categorical dtypes stay
categorical, a string names one column; columns that single records out or give a key
attribute away are reported and warned about, on synthetic data and on Adult."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity

from locpriv.cli import main
from locpriv.errors import ConfigError, DataError
from locpriv.tabular import anonymize, generalise
from locpriv.tabular.io.estimators import Microaggregator
from locpriv.tabular.io.frame import (
    _loo_mode_accuracy,
    _loo_mode_baseline,
    _sorted_codes,
    audit_pass_through,
    models_achieved,
    release_classes,
    release_figures,
)
from locpriv.tabular.quality import validate
from locpriv.tabular.quality.validate import table_entropy_l, table_recursive_ratio, table_t
from tests.tabular._mdav_helpers import ADULT

EDU = ["primary", "secondary", "bachelor", "master"]


def _mixed(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "rid": np.arange(n),
            "age": rng.integers(18, 90, n),
            "kids": rng.integers(0, 5, n).astype(np.int32),
            "income": rng.lognormal(10, 0.5, n),
            "city": rng.choice(["north", "south", "east", "west", "centre"], n),
            "edu": pd.Categorical(rng.choice(EDU, n), categories=EDU, ordered=True),
            "job": pd.Categorical(rng.choice(["a", "b", "c", "d"], n)),
            "s": rng.choice(["flu", "cold", "none", "hiv"], n),
        }
    )


QI = ["age", "kids", "income", "city", "edu", "job"]
CATS: dict[str, Any] = {"ordinal": ["edu"], "nominal": ["city", "job"]}


def _il_from_file(
    orig: pd.DataFrame, written: pd.DataFrame, edu_order: list[str]
) -> tuple[float, float]:
    """SSE and SST of the written key values against the originals, rows matched by ``rid``,
    on the grouping's scale written out by hand: numerical and ordinal (rank of the category)
    z-scored with the original's mean and population sd, nominal one-hot / sqrt(2)."""
    w = written.set_index("rid").loc[orig["rid"]].reset_index()
    sse = sst = 0.0
    for c in ("age", "kids", "income"):
        x = orig[c].to_numpy(float)
        mu, sd = x.mean(), x.std()
        sse += float((((x - w[c].to_numpy(float)) / sd) ** 2).sum())
        sst += float((((x - mu) / sd) ** 2).sum())
    rank = {e: i for i, e in enumerate(edu_order)}
    x = orig["edu"].astype(str).map(rank).to_numpy(float)
    y = w["edu"].astype(str).map(rank).to_numpy(float)
    sse += float((((x - y) / x.std()) ** 2).sum())
    sst += float((((x - x.mean()) / x.std()) ** 2).sum())
    for c in ("city", "job"):
        a, b = orig[c].astype(str).to_numpy(), w[c].astype(str).to_numpy()
        sse += float((a != b).sum())  # one-hot / sqrt(2): a mismatch costs 1/2 + 1/2
        oh = pd.get_dummies(orig[c].astype(str)).to_numpy(float) / np.sqrt(2.0)
        sst += float(((oh - oh.mean(axis=0)) ** 2).sum())
    return sse, sst


@pytest.mark.parametrize("ext", ["csv", "parquet"])
@pytest.mark.parametrize(
    ("k", "p", "method"), [(3, 1, None), (5, 1, "best"), (4, 2, None), (4, 2, "partitioned")]
)
def test_report_figures_are_those_of_the_written_file(  # noqa: PLR0917
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ext: str, k: int, p: int, method: str | None
) -> None:
    df = _mixed()
    src, dst, rep = tmp_path / f"in.{ext}", tmp_path / f"out.{ext}", tmp_path / "r.json"
    if ext == "csv":
        df.to_csv(src, index=False)
    else:
        df.to_parquet(src, index=False, row_group_size=150)
    argv = ["anonymize", str(src), str(dst), "--qi", ",".join(QI), "--k", str(k), "--p", str(p)]
    argv += ["--sensitive", "s", "--ordinal", "edu", "--nominal", "city,job", "--report", str(rep)]
    argv += ["--method", method] if method else []
    argv += ["--block-size", "128"] if method == "partitioned" else []
    assert main(argv) == 0
    assert "'rid' (pass-through) is near-unique" in capsys.readouterr().err
    out = pd.read_csv(dst) if ext == "csv" else pd.read_parquet(dst)
    report = json.loads(rep.read_text())
    # a CSV does not carry the category order: the ordinal is ranked by sorted values then
    sse, sst = _il_from_file(df, out, EDU if ext == "parquet" else sorted(EDU))
    assert report["sse"] == pytest.approx(sse, rel=1e-9)
    assert report["sst"] == pytest.approx(sst, rel=1e-9)
    assert report["il_percent"] == pytest.approx(100 * sse / sst, rel=1e-9)
    assert report["il_basis"] == "written values"
    # the group means minimise the squared error: what is written can only lose more
    assert report["sse"] >= report["sse_partition"] * (1 - 1e-12)
    # classes, sizes, DM and p: those of the file (pandas and pycanon, not our validators)
    sizes = out.groupby(QI, observed=True).size()
    assert report["groups"] == len(sizes) and report["min_group_size"] == sizes.min()
    assert report["max_group_size"] == sizes.max() and report["dm"] == int((sizes**2).sum())
    assert (
        report["min_group_size"]
        == anonymity.k_anonymity(out.astype({"edu": str, "job": str}), QI)
        >= k
    )
    assert report["p_achieved"]["s"] == out.groupby(QI, observed=True)["s"].nunique().min() >= p
    # integers stay integers, every group on one rounded value; categories stay categories
    for c in ("age", "kids"):
        assert pd.api.types.is_integer_dtype(out[c].dtype)
    if ext == "parquet":
        assert out["kids"].dtype == np.int32
        assert out["edu"].dtype == df["edu"].dtype and out["job"].dtype == df["job"].dtype
    assert set(out["city"]) <= set(df["city"]) and set(out["edu"].astype(str)) <= set(EDU)


def test_integer_rounding_keeps_groups_whole_and_means_close() -> None:
    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {"a": rng.integers(0, 7, 500), "b": rng.integers(-50, 50, 500).astype(np.int16)}
    )
    for k in (2, 3, 7):
        out, rep = anonymize(df, ["a", "b"], k=k, seed=k)
        assert out.dtypes.to_dict() == df.dtypes.to_dict()
        assert out.groupby(["a", "b"]).size().min() >= k == rep["k"]
        assert rep["min_group_size"] >= k and rep["groups"] <= rep["partition_groups"]
        for c in ("a", "b"):  # rounding moves a group's value by at most 1/2
            assert abs(out[c].mean() - df[c].mean()) <= 0.5


def test_a_string_names_one_column() -> None:
    df = _mixed(200, seed=2)
    one, r1 = anonymize(df, "income", "s", k=3, p=2, seed=1, warn=lambda _: None)
    many, r2 = anonymize(df, ["income"], ["s"], k=3, p=2, seed=1, warn=lambda _: None)
    pd.testing.assert_frame_equal(one, many)
    assert list(r1["p_achieved"]) == ["s"] == list(r2["p_achieved"])
    cat, _ = anonymize(df, ["age", "city"], "s", 3, 2, seed=1, nominal="city", warn=lambda _: None)
    assert set(cat["city"]) <= set(df["city"])
    with pytest.raises(DataError, match="column 'occupation' not found"):
        anonymize(df, "age", sensitive="occupation", k=3)
    with pytest.raises(ConfigError, match="column names must be strings"):
        anonymize(df, ["age", 3], k=3)  # type: ignore[list-item]


def _audit_frame(n: int = 2000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    edu_num = rng.integers(1, 17, n)
    income = rng.lognormal(10, 0.5, n)
    names = {i: f"level-{i}" for i in range(1, 17)}
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "edu_num": edu_num,
            "income": income,
            "record_no": rng.permutation(n) + 10_000,  # an identifier
            "weight": rng.lognormal(11, 1, n),  # continuous: near-unique
            "education": pd.Series(edu_num).map(names),  # a function of a key attribute
            "income_k": (income / 1000).round(3),  # a rescaled key attribute
            "sex": rng.choice(["f", "m"], n),  # harmless
            "region": rng.choice(list("abcdefgh"), n),  # harmless
            "s": rng.choice(["x", "y", "z"], n),
            "note": [f"n{i}" for i in range(n)],  # a confidential near-unique column
        }
    )


def test_audit_flags_near_unique_and_key_predicting_columns() -> None:
    df = _audit_frame()
    said: list[str] = []
    out, report = anonymize(
        df, ["age", "edu_num", "income"], ["s", "note"], k=5, p=2, seed=0, warn=said.append
    )
    audit = {e["column"]: e for e in report["pass_through"]}
    assert set(audit) == set(df.columns) - {"age", "edu_num", "income"}
    flagged = {c for c, e in audit.items() if e["warnings"]}
    assert flagged == {"record_no", "weight", "education", "income_k", "note"}
    assert audit["record_no"]["rare_share"] == 1.0 and audit["record_no"]["unique_share"] == 1.0
    assert audit["note"]["role"] == "confidential" and audit["s"]["role"] == "confidential"
    assert audit["education"]["predicts"]["edu_num"]["accuracy"] == 1.0
    assert audit["education"]["predicts"]["edu_num"]["baseline"] < 0.1
    assert audit["income_k"]["predicts"]["income"]["rank_correlation"] > 0.999
    # a near-unique column predicts nothing by itself (leave-one-out)
    assert audit["record_no"]["predicts"]["age"]["accuracy_at_most"] == 0.0
    assert audit["sex"]["warnings"] == [] and audit["region"]["warnings"] == []
    assert len(said) == sum(len(e["warnings"]) for e in audit.values())
    assert any("--drop education" in line for line in said)
    # --drop (drop=) removes them in one step: nothing left to warn of but the confidential one
    said.clear()
    gone = ["record_no", "weight", "education", "income_k"]
    out, report = anonymize(
        df, ["age", "edu_num", "income"], ["s", "note"], k=5, p=2, drop=gone, warn=said.append
    )
    assert not set(gone) & set(out.columns) and report["dropped"] == gone
    assert [e["column"] for e in report["pass_through"] if e["warnings"]] == ["note"]
    with pytest.raises(DataError, match="column 'nope' to drop not found"):
        anonymize(df, "age", k=5, drop="nope")
    with pytest.raises(ConfigError, match="column 'age' to drop is a key"):
        anonymize(df, ["age", "income"], k=5, drop="age")
    # the generalisation front checks --drop the same way (frame.check_drop)
    with pytest.raises(DataError, match="column 'nope' to drop not found"):
        generalise(df, ["age"], k=5, method="mondrian", drop="nope")
    with pytest.raises(ConfigError, match="column 's' to drop is a key or confidential"):
        generalise(df, ["age"], ["s"], k=5, method="mondrian", drop="s")


def test_leave_one_out_accuracy_against_a_plain_count() -> None:
    """The vectorised leave-one-out guess against a loop over the records."""
    rng = np.random.default_rng(8)
    for _ in range(100):
        n = int(rng.integers(1, 40))
        c = rng.integers(0, int(rng.integers(1, 6)), n)
        q = rng.integers(0, int(rng.integers(1, 5)), n)
        hits = 0
        for i in range(n):
            others = [int(q[j]) for j in range(n) if j != i and c[j] == c[i]]
            counts = pd.Series(others, dtype=np.int64).value_counts()
            top = counts[counts == counts.max()] if len(counts) else counts
            hits += int(len(top) == 1 and top.index[0] == q[i])
        assert _loo_mode_accuracy(c, q) == pytest.approx(hits / n)
        assert _loo_mode_baseline(q) == pytest.approx(_loo_mode_accuracy(np.zeros(n, np.int64), q))


def test_audit_ranks_equal_pandas_sorted_factorisation() -> None:
    """The audit's dense ranks (one argsort for floats and integers without NaN) against
    pandas' sorted factorisation, on ties, -0.0 and 0.0, NaN, nullable and other dtypes."""
    rng = np.random.default_rng(4)
    cols = [
        pd.Series(rng.normal(size=500)),
        pd.Series(rng.integers(-5, 5, 500)),
        pd.Series(rng.integers(0, 7, 500).astype(np.int32)),
        pd.Series(np.round(rng.normal(size=500), 1)),
        pd.Series([0.0, -0.0, 1.5, -0.0, 2.0, 1.5]),
        pd.Series([0.0, np.nan, -1.0, np.nan, 3.0]),
        pd.Series([3, None, 1, 3], dtype="Int64"),
        pd.Series(["b", "a", None, "b"]),
        pd.Series(np.zeros(0)),
    ]
    for s in cols:
        want = pd.factorize(s, sort=True, use_na_sentinel=False)[0]
        assert _sorted_codes(s).tolist() == want.tolist()


def test_audit_reads_streamed_columns_one_at_a_time() -> None:
    df = _audit_frame(500)
    keys = df[["age", "edu_num"]]
    read: list[str] = []

    def column(name: str) -> pd.Series:
        read.append(name)
        return df[name]

    audit = audit_pass_through(keys, ["age", "edu_num"], {"education": "pass-through"}, 5, column)
    assert read == ["education"] and audit[0]["warnings"]


def test_release_classes_are_the_files_classes() -> None:
    df = pd.DataFrame({"a": [1, 1, 2, 2, 1], "b": ["x", "x", "y", "y", "z"]})
    assert release_classes(df, ["a", "b"]).tolist() == [0, 0, 1, 1, 2]
    assert release_classes(df, "a").tolist() == [0, 0, 1, 1, 0]


@pytest.mark.parametrize("alike", [False, True])
def test_release_figures_reuse_the_groupings_only_where_classes_are_its_groups(
    alike: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release's figures taken from the estimator's report (classes = its groups) equal
    those measured afresh; where two groups are released alike (one class), they are measured
    on the classes, and the models' validators given the classes equal their own grouping."""
    rng = np.random.default_rng(3)
    n = 300
    Z = rng.normal(size=(n, 2))
    S = rng.integers(0, 4, (n, 2))
    est = Microaggregator(k=3, p=2).fit_scaled(Z, S, names=["s", "t"])
    labels = est.labels_
    rep = est.labels_.copy()
    if alike:  # groups 1 and 2 written with the same values: one class of the release
        rep[rep == 2] = 1
    keys = pd.DataFrame({"a": rep.astype(float), "b": (rep % 5).astype(float)})
    classes = release_classes(keys, ["a", "b"])
    written = Z + 0.25
    kw: dict[str, Any] = {"k": 3, "written_Z": written}
    fresh = release_figures(keys, Z, S, ["s", "t"], **kw)
    reused = release_figures(
        keys, Z, S, ["s", "t"], classes=classes, grouping=(labels, est.report_), **kw
    )
    assert reused == fresh
    assert fresh["groups"] == int(labels.max()) + 1 - int(alike)
    if not alike:
        assert fresh["truta_il"] == est.report_["truta_il"] and fresh["sst"] == est.sst_
    got = models_achieved(keys, S, ["s", "t"], [True, False], (2.0, 2), classes=classes)
    frame = keys.assign(s=S[:, 0], t=S[:, 1])
    assert got["entropy_l_achieved"] == table_entropy_l(frame, ["a", "b"], ["s", "t"])
    assert got["t_achieved"] == table_t(frame, ["a", "b"], ["s", "t"], ["s"])
    assert got["recursive_ratio"] == table_recursive_ratio(frame, ["a", "b"], ["s", "t"], 2)
    assert models_achieved(keys, S, ["s", "t"], [True, False], (2.0, 2)) == got
    # the validators' tables in chunks of a few classes (rows sorted by class) give the same
    monkeypatch.setattr(validate, "CHUNK_CELLS", 24)
    assert models_achieved(keys, S, ["s", "t"], [True, False], (2.0, 2), classes=classes) == got


@pytest.mark.skipif(not ADULT.exists(), reason=f"{ADULT} not found")
def test_adult_audit_finds_fnlwgt_and_education(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst, rep = tmp_path / "adult.csv", tmp_path / "out.csv", tmp_path / "r.json"
    pd.read_csv(ADULT).head(8000).to_csv(src, index=False)
    argv = ["anonymize", str(src), str(dst), "--qi", "age,education-num,hours-per-week"]
    argv += ["--sensitive", "occupation", "--k", "5", "--report", str(rep)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    audit = {e["column"]: e for e in json.loads(rep.read_text())["pass_through"]}
    assert "column 'fnlwgt' (pass-through) is near-unique" in err
    assert audit["fnlwgt"]["rare_share"] > 0.9
    assert "column 'education' (pass-through) predicts key attribute 'education-num'" in err
    assert audit["education"]["predicts"]["education-num"]["accuracy"] == 1.0
    for quiet in ("sex", "race", "income", "workclass"):
        assert audit[quiet]["warnings"] == [], audit[quiet]
    assert main([*argv, "--drop", "fnlwgt,education"]) == 0
    err = capsys.readouterr().err
    assert "fnlwgt" not in err and "'education'" not in err
    out = pd.read_csv(dst)
    assert "fnlwgt" not in out.columns and "education" not in out.columns
    assert pd.api.types.is_integer_dtype(out["age"].dtype)  # no more "age 49.2"


def test_interval_bounds_are_exact() -> None:
    """``--release intervals`` writes bounds that hold every original value of the class (a
    6-digit ``%g`` would cut 29881.73 to 29881.7)."""
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"x": rng.normal(50_000, 15_000, 120).round(2), "y": rng.integers(0, 9, 120)})
    df["rid"] = np.arange(120)
    out, rep = anonymize(df, ["x", "y"], k=4, release="intervals", warn=lambda _: None)
    back = out.set_index("rid").loc[df["rid"]]
    lo_hi = back["x"].str.strip("[]").str.split(", ", expand=True).astype(float)
    assert (
        (lo_hi[0].to_numpy() <= df["x"].to_numpy()) & (df["x"].to_numpy() <= lo_hi[1].to_numpy())
    ).all()
    assert rep["il_basis"].startswith("group means")
