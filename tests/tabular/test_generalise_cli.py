"""``locpriv anonymize --method incognito|samarati|optimal|mondrian[-relaxed]`` through real files.

Every method this build has runs end to end (CSV in, CSV and JSON report out) on a mixed table
with ARX-format hierarchy files written to disk; the released file is read back and checked
independently of the report: k (pycanon and a groupby), distinct l, every released value holds
the record's original one (an ancestor in the hierarchy or a range containing it), suppressed
records are all ``*``, pass-through columns are the original record's, the rows are shuffled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity

from locpriv.cli import main
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.io.generalised import GEN_METHODS, generalise
from locpriv.tabular.risk.assess import assess_generalised
from tests.tabular._gen_helpers import hierarchies, hierarchy_args, people, write_inputs

AVAILABLE = list(GEN_METHODS)
KEYS = ["age", "sex", "city"]

# the report keys the fronts share (microaggregation and generalisation alike)
COMMON = {
    "method",
    "k",
    "p",
    "n",
    "groups",
    "min_group_size",
    "max_group_size",
    "group_sizes",
    "dm",
    "avg",
    "p_achieved",
    "seconds",
    "stages",
    "release",
    "order",
    "dropped",
    "pass_through",
    "risk",
    "il_percent",
    "il_basis",
}


HIERARCHIES = hierarchies((5, 10, 20))


@pytest.fixture
def table() -> pd.DataFrame:
    return people()


@pytest.fixture
def files(table: pd.DataFrame, tmp_path: Path) -> dict[str, Path]:
    return write_inputs(tmp_path, table, HIERARCHIES)


def _hier_args(files: dict[str, Path], cols: list[str] = KEYS) -> list[str]:
    return hierarchy_args(files, cols)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def _covers(col: str, released: str, original: object) -> bool:
    """Whether the released value of ``col`` holds the original one (read from the files'
    hierarchy rows, or a numeric range)."""
    if released == "*":
        return True
    for row in HIERARCHIES[col]:
        if row[0] == str(original):
            return released in row
    return False


def _anonymize(
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    method: str,
    *extra: str,
) -> tuple[int, str, pd.DataFrame | None, dict[str, Any] | None]:
    dst, rep = tmp_path / f"out-{method}.csv", tmp_path / f"rep-{method}.json"
    argv = ["anonymize", str(files["input"]), str(dst), "--qi", ",".join(KEYS)]
    argv += ["--method", method, "--report", str(rep), *extra]
    code, err = _run(argv, capsys)
    if code != 0:
        assert not dst.exists() and not rep.exists()
        return code, err, None, None
    return code, err, pd.read_csv(dst, dtype=str), json.loads(rep.read_text())


@pytest.mark.parametrize("method", AVAILABLE)
@pytest.mark.parametrize("k", [3, 10])
def test_each_method_releases_true_values_and_k(
    method: str,
    k: int,
    *,
    table: pd.DataFrame,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    extra = ["--k", str(k), "--sensitive", "disease", "--seed", "3", *_hier_args(files)]
    if method in ("samarati", "optimal"):
        extra += ["--max-suppression", "0.05"]
    code, err, out, rep = _anonymize(files, tmp_path, capsys, method, *extra)
    assert code == 0, err
    assert out is not None and rep is not None
    assert len(out) == len(table)
    # rows shuffled, every pass-through value is its own record's
    assert out["id"].astype(int).tolist() != table["id"].tolist()
    back = out.assign(id=out["id"].astype(int)).sort_values("id").reset_index(drop=True)
    assert back["hours"].astype(int).tolist() == table["hours"].tolist()
    assert back["disease"].tolist() == table["disease"].tolist()
    sup = (back[KEYS] == "*").all(axis=1)
    assert int(sup.sum()) == rep["suppressed"]
    if method in ("samarati", "optimal"):
        assert rep["suppressed"] <= int(0.05 * len(table))
    else:
        assert rep["suppressed"] == 0
    # every released value is true
    for c in KEYS:
        for r, o in zip(back[c], table[c], strict=True):
            assert _covers(c, r, o), (c, r, o)
    kept = back[~sup]
    sizes = kept.groupby(KEYS).size()
    assert sizes.min() >= k
    assert rep["min_group_size"] == sizes.min() and rep["groups"] == len(sizes)
    assert anonymity.k_anonymity(kept, KEYS) >= k
    # report: the fronts' common keys, the models, the losses, the risk measured on the file
    assert set(rep) >= COMMON
    assert rep["method"] == method and rep["k"] == k and rep["release"] == "generalised"
    assert rep["order"] == {
        "shuffled": True,
        "seed": 3,
        "source": "seed",
        "note": rep["order"]["note"],
    }
    assert {"gil", "dm", "cavg"} <= set(rep["loss"])
    assert 0.0 <= rep["loss"]["gil"] <= 1.0
    m = rep["risk"]["measures"]
    assert m["prosecutor"] == pytest.approx(1.0 / sizes.min())
    assert 0.0 < m["linkage"] <= m["prosecutor"] + 1e-12
    assert m["interval"] is None
    assert m["linkage_passthrough"] == max(rep["risk"]["linkage"]["passthrough"].values())
    assert set(rep["risk"]["linkage"]["passthrough"]) == {"id", "hours", "disease"}


@pytest.mark.parametrize("method", AVAILABLE)
def test_distinct_l_is_applied(
    method: str, files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, out, rep = _anonymize(
        files,
        tmp_path,
        capsys,
        method,
        *["--k", "4", "--l", "3", "--sensitive", "disease", *_hier_args(files)],
    )
    assert code == 0, err
    assert out is not None and rep is not None
    kept = out[~(out[KEYS] == "*").all(axis=1)]
    assert anonymity.l_diversity(kept, KEYS, ["disease"]) >= 3
    assert rep["p"] == 3 and rep["p_achieved"]["disease"] >= 3


def test_same_report_keys_as_microaggregation(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI, API and report treat both families alike: same common keys, same measures."""
    num = pd.read_csv(files["input"])
    num["sex"] = (num["sex"] == "M").astype(int)
    src = tmp_path / "num.csv"
    num.drop(columns=["city"]).to_csv(src, index=False)
    reports = {}
    for method in ("mdav", "incognito"):
        rep = tmp_path / f"{method}.json"
        argv = ["anonymize", str(src), str(tmp_path / f"{method}.csv"), "--qi", "age,sex"]
        argv += ["--k", "5", "--method", method, "--sensitive", "disease", "--report", str(rep)]
        if method == "incognito":
            argv += ["--hierarchy", f"age={files['age']}", "--hierarchy", "sex=flat"]
        code, err = _run(argv, capsys)
        assert code == 0, err
        reports[method] = json.loads(rep.read_text())
    for rep in reports.values():
        assert set(rep) >= COMMON
    assert set(reports["mdav"]["risk"]["measures"]) == set(reports["incognito"]["risk"]["measures"])
    # one stage report, in one form, from the first stage to the written file
    for method, rep in reports.items():
        st = rep["stages"]
        assert set(st) == set(reports["mdav"]["stages"]), method
        names = [row["stage"] for row in st["stages"]]
        assert names[-2:] == ["audit", "output"], (method, names)
        assert set(st["stages"][0]) == set(reports["mdav"]["stages"]["stages"][0])
        assert st["seconds"] == pytest.approx(sum(row["seconds"] for row in st["stages"]))
    assert [r["stage"] for r in reports["incognito"]["stages"]["stages"]][:3] == [
        "hierarchies",
        "search",
        "loss",
    ]


def test_max_risk_gate_refuses_before_writing(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--k", "5", *_hier_args(files)]
    code, err, out, _ = _anonymize(
        files, tmp_path, capsys, "incognito", *base, "--max-risk", "prosecutor=0.01"
    )
    assert code == 2 and out is None
    assert "prosecutor" in err and "--max-risk" in err
    code, err, out, rep = _anonymize(
        files, tmp_path, capsys, "incognito", *base, "--max-risk", "prosecutor=0.2,linkage=0.2"
    )
    assert code == 0, err
    assert rep is not None and rep["risk"]["measures"]["prosecutor"] <= 0.2


def test_pass_through_audit_and_drop(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, out, rep = _anonymize(
        files, tmp_path, capsys, "incognito", "--k", "5", *_hier_args(files)
    )
    assert code == 0
    assert "column 'id' (pass-through) is near-unique" in err
    assert rep is not None and out is not None
    assert [e["column"] for e in rep["pass_through"]] == ["id", "disease", "hours"]
    code, err, out, rep = _anonymize(
        files, tmp_path, capsys, "incognito", "--k", "5", "--drop", "id", *_hier_args(files)
    )
    assert code == 0 and out is not None and rep is not None
    assert "id" not in out.columns and rep["dropped"] == ["id"]
    assert "near-unique" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--hierarchy", "sex=SEX"], "is neither a file nor one of"),
        (["--hierarchy", "sex"], "--hierarchy: 'sex' is not COLUMN=FILE"),
        (["--hierarchy", "disease=x.csv"], "hierarchy given for 'disease'"),
        (["--max-suppression", "3"], "method 'incognito' does not suppress"),
        (["--max-suppression", "lots"], "--max-suppression: 'lots'"),
        (["--k", "10,5", "--max-suppression", "3"], "nested releases suppress nothing"),
        (["--entropy-l", "2"], "need confidential attributes"),
        (["--recursive", "3"], "--recursive: '3' is not C,L"),
        (["--loss", "dm"], "--loss applies to samarati and optimal"),
    ],
)
def test_errors_name_the_flag(
    extra: list[str],
    message: str,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    given = [c for c in KEYS if not any(x.startswith(c) for x in extra)]
    argv = ["--k", "5", *_hier_args(files, given), *extra]
    if "--k" in extra:
        argv = argv[2:]
    code, err, out, _ = _anonymize(files, tmp_path, capsys, "incognito", *argv)
    assert code == 2 and out is None
    assert err.startswith("locpriv anonymize: error: "), err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1


def test_missing_hierarchy_and_uncovered_value(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, _, _ = _anonymize(
        files, tmp_path, capsys, "incognito", "--k", "5", *_hier_args(files, ["age", "sex"])
    )
    assert code == 2
    assert "'city' is not numerical and has no hierarchy" in err
    assert "--hierarchy city=FILE" in err
    files["city"].write_text("Lyon;France;*\nParis;France;*\n", encoding="utf-8")
    code, err, _, _ = _anonymize(
        files, tmp_path, capsys, "incognito", "--k", "5", *_hier_args(files)
    )
    assert code == 2
    assert "key attribute 'city'" in err and "not in the hierarchy" in err
    # microaggregation refuses the generalisation flags
    code, err, _, _ = _anonymize(
        files, tmp_path, capsys, "mdav", "--k", "5", "--hierarchy", f"age={files['age']}"
    )
    assert code == 2 and "--hierarchy applies to the generalisation methods" in err


def test_help_lists_the_methods(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["anonymize", "--help"])
    text = capsys.readouterr().out
    for method in (*GEN_METHODS, "mdav"):
        assert method in text
    for flag in ("--hierarchy", "--max-suppression", "--loss", "--entropy-l", "--recursive"):
        assert flag in text


def test_api_and_matching_linkage_equals_class_risk(table: pd.DataFrame) -> None:
    """Full-domain without suppression: the matching candidates are the class, so linkage
    is exactly the mean of 1/class size (prosecutor_mean); measured on every record."""
    hs = {c: LevelHierarchy.from_rows(rows) for c, rows in HIERARCHIES.items()}
    out, rep = generalise(
        table, KEYS, "disease", k=4, method="incognito", hierarchies=hs, seed=1, warn=print
    )
    assert rep["k"] == 4 and list(out.columns) == list(table.columns)
    truth = np.empty(len(table), dtype=np.int64)
    src = out["id"].to_numpy()
    truth[src] = np.arange(len(table))
    risk = assess_generalised(
        table, out, KEYS, ["disease"], hierarchies=hs, truth=truth, sample=None
    )
    sizes = out.groupby(KEYS)["id"].transform("size").to_numpy()
    assert risk["measures"]["linkage"] == pytest.approx(float(np.mean(1.0 / sizes)))
    assert risk["measures"]["prosecutor_mean"] == pytest.approx(float(np.mean(1.0 / sizes)))
    # one pass-through column known exactly: the id singles every record out
    assert risk["linkage"]["passthrough"]["id"] == pytest.approx(1.0)


def _entropy_ok(out: pd.DataFrame, keys: list[str], col: str, bound: float) -> bool:
    for _, g in out.groupby(keys):
        share = g[col].value_counts(normalize=True).to_numpy()
        if np.exp(-np.sum(share * np.log(share))) < bound - 1e-9:
            return False
    return True


@pytest.mark.parametrize("method", ["mdav", *[m for m in AVAILABLE if m not in ("incognito",)]])
def test_entropy_l_for_microaggregation_and_generalisation(
    method: str, files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model flags reach both families; the file read back satisfies the model."""
    extra = ["--k", "4", "--sensitive", "disease", "--entropy-l", "3.5"]
    if method == "mdav":
        keys = ["age", "hours"]
        src = tmp_path / "num.csv"
        pd.read_csv(files["input"]).drop(columns=["sex", "city"]).to_csv(src, index=False)
        dst, rep = tmp_path / "mdav.csv", tmp_path / "mdav.json"
        argv = ["anonymize", str(src), str(dst), "--qi", "age,hours", "--method", "mdav"]
        code, err = _run([*argv, *extra, "--report", str(rep)], capsys)
        assert code == 0, err
        out = pd.read_csv(dst)
        report = json.loads(rep.read_text())
    else:
        keys = KEYS
        code, err, got, got_rep = _anonymize(
            files, tmp_path, capsys, method, *extra, *_hier_args(files)
        )
        assert code == 0, err
        assert got is not None and got_rep is not None
        out, report = got[~(got[KEYS] == "*").all(axis=1)], got_rep
    assert report["models"]["entropy_l"] == 3.5
    assert _entropy_ok(out, keys, "disease", 3.5)
    assert out.groupby(keys).size().min() >= 4


def test_optimal_minimises_the_chosen_loss(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--loss`` reaches the optimal search: its release has the least of that loss among
    the full-domain releases at the same k and suppression; a loss it does not know is an
    error naming it."""
    base = ["--k", "5", "--max-suppression", "10", *_hier_args(files)]
    found = {}
    for method, loss in (("optimal", "dm"), ("optimal", "gil"), ("samarati", "dm")):
        code, err, _, rep = _anonymize(files, tmp_path, capsys, method, *base, "--loss", loss)
        assert code == 0, err
        assert rep is not None and rep["loss_objective"] == loss
        found[method, loss] = rep["loss"]
    assert found["optimal", "dm"]["dm"] <= found["optimal", "gil"]["dm"]
    assert found["optimal", "dm"]["dm"] <= found["samarati", "dm"]["dm"]
    assert found["optimal", "gil"]["gil"] <= found["optimal", "dm"]["gil"]
    for old in tmp_path.glob("*-optimal.*"):
        old.unlink()
    code, err, out, _ = _anonymize(files, tmp_path, capsys, "optimal", *base, "--loss", "ilx")
    assert code == 2 and out is None and "unknown loss 'ilx'" in err
