"""``locpriv anonymize`` through real CSV and Parquet files (main() in-process and a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity

from locpriv.cli import main

ADULT = Path(__file__).resolve().parents[3] / "shared" / "data" / "adult.csv"


@pytest.fixture
def table(tmp_path: Path) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 200
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 90, n),
            "income": rng.normal(50_000, 15_000, n).round(2),
            "zip": rng.integers(10_000, 10_100, n),
            "disease": rng.choice(["flu", "hiv", "cold", "cancer", "none"], n),
            "city": rng.choice(["x", "y", "z"], n),
            "edu": rng.choice(["low", "mid", "high"], n),
        }
    )


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_anonymize_file_round_trip(
    table: pd.DataFrame, tmp_path: Path, ext: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst, rep = tmp_path / f"in.{ext}", tmp_path / f"out.{ext}", tmp_path / "report.json"
    if ext == "csv":
        table.to_csv(src, index=False)
    else:
        table.to_parquet(src, index=False)
    argv = ["anonymize", str(src), str(dst), "--qi", "age,income,zip", "--sensitive", "disease"]
    code, err = _run([*argv, "--k", "4", "--p", "3", "--report", str(rep)], capsys)
    assert code == 0, err
    out = pd.read_csv(dst) if ext == "csv" else pd.read_parquet(dst)
    qi = ["age", "income", "zip"]
    assert anonymity.k_anonymity(out, qi) >= 4
    assert anonymity.l_diversity(out, qi, ["disease"]) >= 3
    # rows come back shuffled; unnamed columns pass through with their rows
    assert out["id"].tolist() != table["id"].tolist()
    back = out.sort_values("id").reset_index(drop=True)
    for col in ("id", "disease", "city", "edu"):
        assert back[col].tolist() == table[col].tolist()
    assert back["age"].dtype == table["age"].dtype  # integer keys stay integers
    assert back["zip"].dtype == table["zip"].dtype
    report = json.loads(rep.read_text())
    assert report["order"]["shuffled"] is True and report["order"]["seed"] is None
    for key in (
        "method", "k", "p", "n", "groups", "min_group_size", "max_group_size",
        "il_percent", "sse", "sst", "dm", "avg", "p_achieved", "seconds",
    ):  # fmt: skip
        assert key in report
    assert report["n"] == 200 and report["k"] == 4 and report["p"] == 3
    assert report["p_achieved"]["disease"] >= 3
    assert report["method"] in ("k-increase", "mdav-seed", "sec-pk")  # the default's race
    assert report["il_percent"] == pytest.approx(100 * report["sse"] / report["sst"])
    assert not list(tmp_path.glob(".*.tmp"))


def test_categorical_and_method_options(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    table.to_csv(src, index=False)
    argv = ["anonymize", str(src), str(dst), "--qi", "age,city,edu", "--sensitive", "disease"]
    argv += ["--k", "3", "--p", "2", "--method", "random-seed", "--seed", "3"]
    code, err = _run([*argv, "--nominal", "city", "--ordinal", "edu"], capsys)
    assert code == 0, err
    out = pd.read_csv(dst)
    assert set(out["city"]) <= {"x", "y", "z"}
    assert out.groupby(["age", "city", "edu"]).size().min() >= 3


def test_k_anonymity_only_default_is_mdav(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst, rep = tmp_path / "in.csv", tmp_path / "out.csv", tmp_path / "r.json"
    table.to_csv(src, index=False)
    code, err = _run(
        ["anonymize", str(src), str(dst), "--qi", "age,income", "--k", "5", "--report", str(rep)],
        capsys,
    )
    assert code == 0, err
    assert json.loads(rep.read_text())["method"] == "mdav"  # best: only when named
    assert pd.read_csv(dst).groupby(["age", "income"]).size().min() >= 5


def _bad_cases(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame, list[str], str]]:
    nan = table.copy()
    nan.loc[7, "income"] = np.nan
    one = table.assign(disease="flu")
    base = ["--qi", "age,income", "--sensitive", "disease"]
    return [
        ("missing-column", table, ["--qi", "age,salary", "--k", "3"], "'salary'"),
        ("non-numeric", table, ["--qi", "age,city", "--k", "3"], "'city'"),
        ("nan", nan, ["--qi", "age,income", "--k", "3"], "'income'"),
        ("n-lt-k", table.head(5), ["--qi", "age,income", "--k", "6"], "k=6"),
        ("p-gt-k", table, [*base, "--k", "2", "--p", "3"], "p=3"),
        ("few-distinct", one, [*base, "--k", "3", "--p", "2"], "'disease'"),
        ("bad-k", table, ["--qi", "age,income", "--k", "0"], "--k"),
    ]


@pytest.mark.parametrize("case", range(7))
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_bad_input_exits_2_with_one_line_and_no_output(
    table: pd.DataFrame, tmp_path: Path, case: int, ext: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name, df, args, needle = _bad_cases(table)[case]
    src, dst, rep = tmp_path / f"in.{ext}", tmp_path / f"out.{ext}", tmp_path / "r.json"
    if ext == "csv":
        df.to_csv(src, index=False)
    else:
        df.to_parquet(src, index=False)
    code, err = _run(["anonymize", str(src), str(dst), *args, "--report", str(rep)], capsys)
    assert code == 2, name
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("locpriv anonymize: error: ")
    assert needle in lines[0], (name, lines[0])
    assert not dst.exists() and not rep.exists()
    assert list(tmp_path.iterdir()) == [src]


def test_subprocess_entry_point(table: pd.DataFrame, tmp_path: Path) -> None:
    src, dst = tmp_path / "in.csv", tmp_path / "out.parquet"
    table.drop(columns=["id"]).to_csv(src, index=False)  # no column for the audit to warn of
    cmd = [sys.executable, "-m", "locpriv", "anonymize", str(src), str(dst)]
    ok = subprocess.run(
        [
            *cmd,
            "--qi",
            "age,income",
            "--sensitive",
            "disease",
            "--k",
            "3",
            "--p",
            "2",
            "--drop",
            "zip",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""  # stderr is not a TTY: no progress bar; nothing to warn of
    assert pd.read_parquet(dst).groupby(["age", "income"]).size().min() >= 3
    assert "zip" not in pd.read_parquet(dst).columns
    bad = subprocess.run(
        [*cmd, "--qi", "age,nope", "--k", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == "locpriv anonymize: error: column 'nope' not found in the input"


def test_adult_with_question_marks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not ADULT.exists():
        pytest.skip(f"Adult data not found at {ADULT}")
    df = pd.read_csv(ADULT).head(2000)
    src, dst = tmp_path / "adult.csv", tmp_path / "out.csv"
    df.to_csv(src, index=False)
    qi = "age,fnlwgt,education-num,hours-per-week"
    # '?' (missing occupation) is kept as one more confidential category
    code, err = _run(
        [
            *("anonymize", str(src), str(dst), "--qi", qi),
            *("--sensitive", "occupation,marital-status", "--k", "5", "--p", "2"),
            *("--method", "mdav-seed"),
        ],
        capsys,
    )
    assert code == 0, err
    out = pd.read_csv(dst)
    cols = qi.split(",")
    assert anonymity.k_anonymity(out, cols) >= 5
    assert anonymity.l_diversity(out, cols, ["occupation"]) >= 2
    assert anonymity.l_diversity(out, cols, ["marital-status"]) >= 2
