"""``locpriv assess`` on generalised releases, through real files.

Each generalisation method of ``locpriv anonymize`` writes a release (CSV, ARX hierarchy files on
disk); ``locpriv assess ORIGINAL RELEASED --hierarchy ...`` reads it back and must give the
measures anonymize's report states (matching linkage, class-based risks, no interval
disclosure). Also: detection without ``--hierarchy``, errors naming the column and value, the
risk–utility sweep over k, earlier releases, the HTML section; and an attacker written here,
independently of ``linkage.py``, who links records by matching and reaches the linkage rate the
report states.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from locpriv.cli import main
from tests.tabular._gen_helpers import hierarchies, hierarchy_args, people, write_inputs

KEYS = ["age", "sex", "city"]


HIERARCHIES = hierarchies((5, 10))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return write_inputs(tmp_path, people(), HIERARCHIES)


def _hier(files: dict[str, Path], cols: list[str] = KEYS) -> list[str]:
    return hierarchy_args(files, cols)


def _anonymize(
    files: dict[str, Path], tmp_path: Path, method: str, k: int, *extra: str, tag: str = ""
) -> tuple[Path, dict[str, Any]]:
    dst = tmp_path / f"out-{method}-{k}{tag}.csv"
    rep = tmp_path / f"rep-{method}-{k}{tag}.json"
    argv = ["anonymize", str(files["input"]), str(dst), "--qi", ",".join(KEYS)]
    argv += ["--method", method, "--k", str(k), "--sensitive", "disease", "--report", str(rep)]
    assert main([*argv, *extra]) == 0
    return dst, json.loads(rep.read_text())


def _assess(
    files: dict[str, Path], released: Path, tmp_path: Path, *extra: str, qi: list[str] = KEYS
) -> tuple[int, dict[str, Any] | None]:
    res = tmp_path / f"assess-{released.stem}.json"
    argv = ["assess", str(files["input"]), str(released), "--qi", ",".join(qi)]
    argv += ["--sensitive", "disease", "--json", str(res), *extra]
    code = main(argv)
    return code, (json.loads(res.read_text()) if code == 0 else None)


SETTINGS = [
    ("incognito", 3, []),
    ("incognito", 10, []),
    ("samarati", 5, ["--max-suppression", "0.05"]),
    ("optimal", 4, []),
    ("optimal", 8, ["--max-suppression", "0.1"]),
    ("mondrian", 5, []),
    ("mondrian-relaxed", 6, []),
]


@pytest.mark.parametrize(("method", "k", "extra"), SETTINGS)
def test_assess_gives_anonymize_measures(
    method: str,
    k: int,
    extra: list[str],
    *,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dst, rep = _anonymize(files, tmp_path, method, k, *extra, *_hier(files))
    code, res = _assess(files, dst, tmp_path, *_hier(files))
    assert code == 0, capsys.readouterr().err
    assert res is not None
    rel, risk = res["release"], rep["risk"]
    assert "generalised" in rel and rel["generalised"]["suppressed"] == rep["suppressed"]
    for name, value in risk["measures"].items():
        if value is None:
            assert rel["measures"][name] is None, name
        else:
            assert rel["measures"][name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
    assert rel["measures"]["interval"] is None and rel["measures"]["interval_sdcmicro"] is None
    assert rel["linkage"]["passthrough"] == pytest.approx(risk["linkage"]["passthrough"])
    assert rel["linkage"]["model"].startswith("matching")
    assert rel["class_sizes"] == risk["class_sizes"]
    # no note about unmatched rows: matching needs no row correspondence
    assert not any("not computed" in n for n in rel["notes"])


def test_detection_without_hierarchy(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # numbers only, cut by Mondrian: every key a [lo, hi] range
    num = ["age", "hours"]
    dst = tmp_path / "mondrian-num.csv"
    rep_path = tmp_path / "mondrian-num.json"
    argv = ["anonymize", str(files["input"]), str(dst), "--qi", ",".join(num)]
    argv += ["--method", "mondrian", "--k", "5", "--report", str(rep_path)]
    assert main(argv) == 0
    rep = json.loads(rep_path.read_text())
    code, res = _assess(files, dst, tmp_path, qi=num)
    assert code == 0, capsys.readouterr().err
    assert res is not None
    assert res["release"]["generalised"]["detected_by"] == "every key holds [lo, hi] ranges"
    stated = rep["risk"]["measures"]["linkage"]
    assert res["release"]["measures"]["linkage"] == pytest.approx(stated)
    # generated interval hierarchies (half-open ranges), sex by its flat hierarchy, found alone
    dst2, rep2 = _anonymize(
        files, tmp_path, "optimal", 5, "--hierarchy", "sex=flat", "--hierarchy",
        f"city={files['city']}", "--max-suppression", "0.05",
    )  # fmt: skip
    out = pd.read_csv(dst2, dtype=str)
    assert out["age"].str.endswith(")").any() or (out["age"] == "*").any()
    code, res2 = _assess(files, dst2, tmp_path, "--hierarchy", f"city={files['city']}")
    assert code == 0, capsys.readouterr().err
    assert res2 is not None and res2["release"]["generalised"]["detected_by"]
    for name, value in rep2["risk"]["measures"].items():
        assert res2["release"]["measures"][name] == pytest.approx(value), name
    # a microaggregation release is still measured by distance
    mic = tmp_path / "mdav.csv"
    argv = ["anonymize", str(files["input"]), str(mic), "--qi", "age,hours", "--k", "5"]
    assert main([*argv, "--method", "mdav"]) == 0
    code, res3 = _assess(files, mic, tmp_path, "--id", "id", qi=["age", "hours"])
    assert code == 0 and res3 is not None
    assert "generalised" not in res3["release"]
    assert res3["release"]["measures"]["interval"] is not None


def test_errors_name_the_column_and_value(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst, _ = _anonymize(files, tmp_path, "optimal", 5, *_hier(files))
    out = pd.read_csv(dst, dtype=str)
    capsys.readouterr()
    bad_city = tmp_path / "bad-city.csv"
    out.assign(city=["Atlantis", *out["city"].iloc[1:]]).to_csv(bad_city, index=False)
    coarse = tmp_path / "coarse-city.csv"
    out.assign(city=["France", *out["city"].iloc[1:]]).to_csv(coarse, index=False)
    bad_age = tmp_path / "bad-age.csv"
    out.assign(age=["[500, 600]", *out["age"].iloc[1:]]).to_csv(bad_age, index=False)
    cases = [
        ([str(bad_city), *_hier(files)], ["'Atlantis'", "'city'"]),
        ([str(bad_age), *_hier(files, ["sex", "city"])], ["'[500, 600]'", "'age'"]),
        ([str(coarse)], ["'city'", "--hierarchy"]),
        ([str(dst), *_hier(files), "--population", str(files["input"])], ["--population"]),
        ([str(dst), *_hier(files), "--hierarchy", "disease=flat"], ["'disease'"]),
        ([str(dst), "--hierarchy", "age"], ["--hierarchy"]),
    ]
    for extra, words in cases:
        argv = ["assess", str(files["input"]), *extra, "--qi", ",".join(KEYS)]
        assert main(argv) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("locpriv assess: error:"), err
        for w in words:
            assert w in err[0], (extra, err)
    # sweep options that do not fit the method
    for extra, word in (
        (["--sweep", "3,5", "--max-suppression", "0.1"], "--max-suppression"),
        (["--sweep", "3,5", "--method", "mdav", *_hier(files)], "--hierarchy"),
    ):
        assert main(["assess", str(files["input"]), "--qi", "age", *extra]) == 2
        err = capsys.readouterr().err
        assert word in err


def test_sweep_over_k_with_a_generalisation_method(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res_path = tmp_path / "sweep.json"
    argv = ["assess", str(files["input"]), "--qi", ",".join(KEYS), "--sensitive", "disease"]
    argv += ["--sweep", "3,5,10", "--method", "optimal", "--max-suppression", "0.05"]
    argv += ["--seed", "4", "--json", str(res_path), *_hier(files)]
    assert main(argv) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    rows = json.loads(res_path.read_text())["sweep"]
    assert [r["k"] for r in rows] == [3, 5, 10]
    gil = [r["loss"]["gil"] for r in rows]
    assert gil == sorted(gil)  # coarser with k
    for r in rows:
        assert r["measures"]["interval"] is None
        assert r["measures"]["linkage"] <= r["measures"]["prosecutor"] + 1e-12
        assert f"{100 * r['loss']['gil']:.4f}" in text
    # the row at k = 5 is the release anonymize writes with the same options
    _, rep = _anonymize(
        files, tmp_path, "optimal", 5, "--max-suppression", "0.05", "--seed", "4", *_hier(files)
    )
    for name, value in rep["risk"]["measures"].items():
        assert rows[1]["measures"][name] == pytest.approx(value), name


def test_earlier_generalised_releases(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = _anonymize(files, tmp_path, "optimal", 5, *_hier(files), tag="a")
    b, _ = _anonymize(files, tmp_path, "mondrian", 5, *_hier(files), tag="b")
    code, res = _assess(files, a, tmp_path, "--history", str(b), "--id", "id", *_hier(files))
    assert code == 0, capsys.readouterr().err
    assert res is not None
    hist = res["history"]
    # independently: classes of the two files intersected record by record (linked by id)
    ta, tb = pd.read_csv(a, dtype=str), pd.read_csv(b, dtype=str)
    ca = ta.set_index("id")[KEYS].astype(str).agg("|".join, axis=1)
    cb = tb.set_index("id")[KEYS].astype(str).agg("|".join, axis=1)
    both = pd.DataFrame({"a": ca, "b": cb.reindex(ca.index)})
    sizes = both.groupby(["a", "b"])["a"].transform("size")
    assert hist["min_size"] == sizes.min()
    assert hist["share_below_k"] == pytest.approx(float((sizes < 5).mean()))


def test_html_report_has_the_generalised_section(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.tabular.test_assess_cli import _require_chromium

    exe = _require_chromium()
    sup = ["--max-suppression", "0.05"]
    dst, rep = _anonymize(files, tmp_path, "samarati", 5, *sup, *_hier(files))
    page = tmp_path / "report.html"
    code, res = _assess(
        files, dst, tmp_path, "--html", str(page), "--sweep", "3,5", "--method", "samarati",
        *_hier(files),
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert res is not None
    text = page.read_text()
    assert not re.search(r"\bsrc=|\bhref=|url\(|@import", text)
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    dom = proc.stdout
    found = re.search(
        r'<div id="generalised" data-linkage="([^"]+)" data-candidates="([^"]+)" '
        r'data-suppressed="(\d+)"',
        dom,
    )
    assert found is not None
    assert float(found.group(1)) == pytest.approx(rep["risk"]["measures"]["linkage"], rel=1e-5)
    assert int(found.group(3)) == rep["suppressed"]
    assert "Matching linkage" in dom and "Interval disclosure: not applicable" in dom
    row = re.search(r'<tr data-measure="interval" data-value="([^"]*)"', dom)
    assert row is not None and row.group(1) == ""
    # the curve has the sweep's points, placed by generalised information loss
    circles = [
        dict(re.findall(r'([\w-]+)="([^"]*)"', c)) for c in re.findall(r"<circle ([^>]*)>", dom)
    ]
    ks = sorted({int(c["data-k"]) for c in circles if c.get("data-series") == "linkage"})
    assert ks == [3, 5]
    for r in res["sweep"]:
        pts = [
            c for c in circles if c.get("data-series") == "linkage" and int(c["data-k"]) == r["k"]
        ]
        assert float(pts[0]["data-il"]) == pytest.approx(100 * r["loss"]["gil"], rel=1e-5)


# --- an attacker written here, independently of linkage.py --------------------------------


def _cover_sets() -> dict[str, dict[str, set[str]]]:
    """For each key column: released label -> original values (strings) it holds."""
    out: dict[str, dict[str, set[str]]] = {}
    for col, rows in HIERARCHIES.items():
        labels: dict[str, set[str]] = {}
        for row in rows:
            for lab in row:
                labels.setdefault(lab, set()).add(row[0])
        out[col] = labels
    return out


def _holds(col: str, label: str, value: str, sets: dict[str, dict[str, set[str]]]) -> bool:
    if label == "*":
        return True
    if label in sets[col]:
        return value in sets[col][label]
    m = re.fullmatch(r"([\[(])\s*([-\d.e]+)\s*,\s*([-\d.e]+)\s*([\])])", label.strip())
    assert m is not None, (col, label)
    x, lo, hi = float(value), float(m.group(2)), float(m.group(3))
    return (x >= lo if m.group(1) == "[" else x > lo) and (x <= hi if m.group(4) == "]" else x < hi)


@pytest.mark.parametrize(
    ("method", "k", "extra"),
    [
        ("optimal", 3, []),
        ("samarati", 6, ["--max-suppression", "0.1"]),
        ("optimal", 10, ["--max-suppression", "0.03"]),
        ("mondrian-relaxed", 4, []),
    ],
)
def test_matching_attacker_reaches_the_stated_linkage(
    method: str, k: int, extra: list[str], files: dict[str, Path], tmp_path: Path
) -> None:
    dst, rep = _anonymize(files, tmp_path, method, k, *extra, *_hier(files))
    table = pd.read_csv(files["input"], dtype=str)
    out = pd.read_csv(dst, dtype=str)
    sets = _cover_sets()
    rng = np.random.default_rng(11)
    draws = 50
    # the attacker knows each target's key values and the hierarchies (not the id): she keeps
    # the released rows whose every key value holds the target's and picks one at random
    per_key: dict[str, dict[tuple[str, str], bool]] = {c: {} for c in KEYS}
    wins = []
    for _, target in table.iterrows():
        ok = np.ones(len(out), dtype=bool)
        for c in KEYS:
            memo = per_key[c]
            col = out[c].to_numpy()
            ok &= np.array(
                [memo.setdefault((lab, target[c]), _holds(c, lab, target[c], sets)) for lab in col]
            )
        cand = np.flatnonzero(ok)
        assert cand.size >= 1
        picks = out["id"].to_numpy()[rng.choice(cand, draws)]
        wins.append(float(np.mean(picks == target["id"])))
    rate = float(np.mean(wins))
    stated = rep["risk"]["measures"]["linkage"]
    se = np.sqrt(stated * (1 - stated) / (len(table) * draws)) + 1e-9
    assert abs(rate - stated) < 4 * se, (rate, stated, se)
    # and the attacker never does better than 1/k on the kept records (suppression only adds
    # candidates)
    assert stated <= 1.0 / k + 4 * se


# --- nested releases by full-domain generalisation ----------------------------------------


@pytest.mark.parametrize("method", ["incognito", "samarati", "optimal"])
@pytest.mark.parametrize("ks", [(10, 5), (12, 6, 3)])
def test_nested_full_domain_releases(
    method: str,
    ks: tuple[int, ...],
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dst, rep = tmp_path / "nest.csv", tmp_path / "nest.json"
    argv = ["anonymize", str(files["input"]), str(dst), "--qi", ",".join(KEYS), "--method", method]
    argv += ["--k", ",".join(map(str, ks)), "--sensitive", "disease", "--seed", "2"]
    argv += ["--report", str(rep), *_hier(files)]
    assert main(argv) == 0, capsys.readouterr().err
    table = pd.read_csv(files["input"], dtype=str).set_index("id")
    sets = _cover_sets()
    outs, reps = {}, {}
    for k in ks:
        out = pd.read_csv(tmp_path / f"nest.k{k}.csv", dtype=str)
        reps[k] = json.loads((tmp_path / f"nest.k{k}.json").read_text())
        assert len(out) == len(table) and reps[k]["suppressed"] == 0
        assert out.groupby(KEYS).size().min() >= k
        for c in KEYS:  # true values
            assert all(
                _holds(c, lab, table.at[i, c], sets)
                for lab, i in zip(out[c], out["id"], strict=True)
            )
        outs[k] = out.set_index("id")[KEYS].agg("|".join, axis=1)
    # independent row orders
    orders = [pd.read_csv(tmp_path / f"nest.k{k}.csv")["id"].tolist() for k in ks]
    assert all(a != b for a, b in itertools.pairwise(orders))
    # nesting: lattice nodes ordered, each finer class inside one coarser class, and the
    # classes left by intersecting every file (records linked by id) are the finest file's
    for big, small in itertools.pairwise(sorted(ks, reverse=True)):
        assert all(a <= b for a, b in zip(reps[small]["levels"], reps[big]["levels"], strict=True))
        pair = pd.DataFrame({"s": outs[small], "b": outs[big].reindex(outs[small].index)})
        assert (pair.groupby("s")["b"].nunique() == 1).all()
    joint = pd.DataFrame(outs).astype(str).agg("||".join, axis=1)
    assert joint.value_counts().min() >= min(ks)
    assert reps[min(ks)]["history"]["min_size"] >= min(ks)
    # each file measured by locpriv assess as anonymize measured it
    for k in ks:
        code, res = _assess(files, tmp_path / f"nest.k{k}.csv", tmp_path, *_hier(files))
        assert code == 0 and res is not None
        for name, value in reps[k]["risk"]["measures"].items():
            assert res["release"]["measures"][name] == pytest.approx(value), (k, name)
    # the finer release is the best node below the coarser one: never better than the
    # unconstrained optimum at its k
    if method == "optimal":
        _, alone = _anonymize(files, tmp_path, "optimal", min(ks), "--seed", "2", *_hier(files))
        assert reps[min(ks)]["loss"]["gil"] >= alone["loss"]["gil"] - 1e-12


def test_nested_generalisation_errors(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for method, extra, word in (
        ("mondrian", [], "full-domain method"),
        ("optimal", ["--max-suppression", "0.05"], "--max-suppression"),
    ):
        dst = tmp_path / "x.csv"
        argv = ["anonymize", str(files["input"]), str(dst), "--qi", ",".join(KEYS)]
        argv += ["--method", method, "--k", "10,5", *extra, *_hier(files)]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and word in err[0], err
        assert not list(tmp_path.glob("x*.csv"))


@pytest.mark.parametrize("method", ["optimal", "mondrian"])
def test_keys_all_categorical(
    method: str, files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No numerical key: the release is read through the hierarchies only (once refused by the
    distance encoding, 'holds a category absent from the original')."""
    qi = ["sex", "city"]
    dst, rep = tmp_path / "cat.csv", tmp_path / "cat.json"
    argv = ["anonymize", str(files["input"]), str(dst), "--qi", ",".join(qi), "--k", "40"]
    argv += ["--method", method, "--sensitive", "disease", "--report", str(rep)]
    argv += _hier(files, qi)
    assert main(argv) == 0, capsys.readouterr().err
    stated = json.loads(rep.read_text())["risk"]
    code, res = _assess(files, dst, tmp_path, *_hier(files, qi), qi=qi)
    assert code == 0 and res is not None
    for name, value in stated["measures"].items():
        assert res["release"]["measures"][name] == pytest.approx(value), name
    assert 0.0 < stated["measures"]["linkage"] <= 1.0 / 40
