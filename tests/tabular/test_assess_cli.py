"""``locpriv assess``, ``anonymize --max-risk`` and ``anonymize --k 10,5`` through real files;
the HTML report loaded in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locpriv.cli import main
from locpriv.tabular.io.estimators import source_rows_of
from locpriv.tabular.risk.history import intersected_sizes

QI = ["age", "income", "zip"]


@pytest.fixture
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 240
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 90, n),
            "income": rng.normal(50_000, 15_000, n).round(2),
            "zip": rng.integers(10_000, 10_100, n),
            "disease": rng.choice(["flu", "hiv", "cold", "cancer", "none"], n),
            "city": rng.choice(["x", "y", "z"], n),
        }
    )


def _anonymize(src: Path, dst: Path, *extra: str) -> int:
    argv = ["anonymize", str(src), str(dst), "--qi", ",".join(QI), "--sensitive", "disease"]
    return main([*argv, *extra])


def test_max_risk_refuses_to_write(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    table.to_csv(src, index=False)
    code = _anonymize(src, dst, "--k", "5", "--method", "mdav", "--max-risk", "prosecutor=0.1")
    err = capsys.readouterr().err
    assert code != 0
    assert not dst.exists() and not list(tmp_path.glob(".*tmp*"))
    assert re.search(r"prosecutor = 0\.2 > 0\.1", err), err
    # pass-through 'id' identifies the records (DBRL on standardised values links > 80 %),
    # measured on the default release, whose rows are shuffled: linkage follows each written
    # row to its record through the release's permutation
    code = _anonymize(src, dst, "--k", "5", "--max-risk", "linkage_passthrough=0.5")
    err = capsys.readouterr().err
    assert code != 0 and not dst.exists()
    assert re.search(r"linkage_passthrough = 0\.[89]\d* > 0\.5", err), err
    code = _anonymize(src, dst, "--k", "5", "--max-risk", "linkage=0.01")
    err = capsys.readouterr().err
    assert code == 2 and not dst.exists()
    assert re.search(r"linkage = 0\.\d+ > 0\.01", err) and "not computed" not in err, err
    code = _anonymize(src, dst, "--k", "5", "--max-risk", "bogus=1")
    assert code == 2 and "not MEASURE=VALUE" in capsys.readouterr().err
    # within the bounds: written, and the report carries the risk measured on that file
    rep = tmp_path / "r.json"
    code = _anonymize(
        src, dst, "--k", "5", "--report", str(rep), "--max-risk", "prosecutor=0.2,linkage=0.2"
    )
    assert code == 0, capsys.readouterr().err
    risk = json.loads(rep.read_text())["risk"]
    out = pd.read_csv(dst)
    sizes = out.groupby(QI).size()
    assert risk["measures"]["prosecutor"] == pytest.approx(1 / sizes.min())
    assert risk["measures"]["prosecutor_mean"] == pytest.approx(len(sizes) / len(out))
    assert risk["linkage"]["passthrough"]["id"] > 0.8 > risk["linkage"]["keys"]
    # the file is in a random order, and the report's linkage is that of its rows: the same
    # as locpriv assess matching the rows by 'id'
    assert not (out["id"].to_numpy() == np.arange(len(out))).all()
    res_json = tmp_path / "a.json"
    argv = ["assess", str(src), str(dst), "--qi", ",".join(QI), "--sensitive", "disease"]
    assert main([*argv, "--id", "id", "--json", str(res_json)]) == 0
    by_id = json.loads(res_json.read_text())["release"]
    assert by_id["measures"] == pytest.approx(risk["measures"])
    assert by_id["linkage"]["passthrough"] == pytest.approx(risk["linkage"]["passthrough"])
    assert set(risk["inference"]) == {"disease"}


def test_assess_command_json_and_a_shuffled_release(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    table.to_csv(src, index=False)
    assert _anonymize(src, dst, "--k", "4", "--report", str(tmp_path / "r.json")) == 0
    res_json = tmp_path / "a.json"
    argv = ["assess", str(src), str(dst), "--qi", ",".join(QI), "--sensitive", "disease"]
    # the release is shuffled (the default): its rows are matched by --id
    assert main([*argv, "--id", "id", "--json", str(res_json)]) == 0
    stdout = capsys.readouterr().out
    assert "prosecutor" in stdout and "linkage with 'city'" in stdout
    res = json.loads(res_json.read_text())["release"]
    # the same figures as the report anonymize wrote for that file
    report = json.loads((tmp_path / "r.json").read_text())["risk"]
    assert res["measures"] == pytest.approx(report["measures"])
    # shuffled rows: position no longer matches and is refused; --id matches the rows again
    shuffled = tmp_path / "shuffled.csv"
    pd.read_csv(dst).sample(frac=1.0, random_state=3).to_csv(shuffled, index=False)
    argv[2] = str(shuffled)
    code = main([*argv, "--json", str(res_json), "--max-risk", "linkage=0.5"])
    captured = capsys.readouterr()
    assert code == 3 and "linkage could not be computed" in captured.err
    assert "not in the original's order" in captured.out
    assert main([*argv, "--id", "id", "--json", str(res_json)]) == 0
    again = json.loads(res_json.read_text())["release"]
    assert again["measures"] == pytest.approx(res["measures"])


def test_nested_releases_survive_an_intersection(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    table.to_csv(src, index=False)
    rep = tmp_path / "r.json"
    code = _anonymize(src, tmp_path / "out.csv", "--k", "10,5", "--report", str(rep))
    assert code == 0, capsys.readouterr().err
    r5, r10 = pd.read_csv(tmp_path / "out.k5.csv"), pd.read_csv(tmp_path / "out.k10.csv")
    assert r5.groupby(QI).size().min() >= 5 and r10.groupby(QI).size().min() >= 10
    assert json.loads((tmp_path / "r.k10.json").read_text())["nested_in"] == 5
    # both files shuffled, each in its own order; each report's linkage measured on its rows
    assert not (r5["id"].to_numpy() == np.arange(len(table))).all()
    assert not (r5["id"].to_numpy() == r10["id"].to_numpy()).all()
    for k in (5, 10):
        report = json.loads((tmp_path / f"r.k{k}.json").read_text())
        assert report["order"]["shuffled"] and report["risk"]["measures"]["linkage"] is not None
        assert report["history"]["min_size"] >= 5
    # the attacker joins the two files on the pass-through 'id' and intersects the classes
    both = r5.merge(r10, on="id", suffixes=("_5", "_10"))
    keys = [f"{c}_5" for c in QI] + [f"{c}_10" for c in QI]
    assert len(both) == len(table)
    assert both.groupby(keys).size().min() >= 5
    # each k=10 class is a union of k=5 classes
    assert both.groupby([f"{c}_5" for c in QI])[keys[3:]].nunique().max().max() == 1
    assert intersected_sizes(r5, QI, [(r10, QI)]).min() >= 5
    # `assess --history` agrees: nothing below k = 5
    out = tmp_path / "h.json"
    argv = ["assess", str(src), str(tmp_path / "out.k5.csv"), "--qi", ",".join(QI)]
    assert main([*argv, "--history", str(tmp_path / "out.k10.csv"), "--json", str(out)]) == 0
    hist = json.loads(out.read_text())["history"]
    assert hist["min_size"] >= 5 and hist["share_below_k"] == 0.0
    assert sum(hist["records_by_size"].values()) == len(table)
    # linked by repeated values only (the shuffled files' 'disease' and 'city'), the target's
    # classes are unknown to assess and the smallest candidate set counts (over-stated);
    # --id matches the records, and the intersection is the k = 5 class again
    linked = [*argv, "--history", str(tmp_path / "out.k10.csv"), "--link", "disease,city"]
    assert main([*linked, "--json", str(out)]) == 0
    loose = json.loads(out.read_text())["history"]
    assert main([*linked, "--id", "id", "--json", str(out)]) == 0
    exact = json.loads(out.read_text())["history"]
    assert exact["min_size"] >= 5 and exact["share_below_k"] == 0.0
    assert loose["min_size"] <= exact["min_size"] and loose["share_below_k"] > 0.0


def test_independent_releases_are_narrowed_by_the_intersection(
    table: pd.DataFrame, tmp_path: Path
) -> None:
    """The attack the nested releases defend against: two independent runs (k = 5 and 10)."""
    src = tmp_path / "in.csv"
    table.to_csv(src, index=False)
    assert _anonymize(src, tmp_path / "a.csv", "--k", "5", "--method", "mdav") == 0
    assert _anonymize(src, tmp_path / "b.csv", "--k", "10", "--method", "best") == 0
    a, b = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    sizes = intersected_sizes(a, QI, [(b, QI)])
    both = a.merge(b, on="id", how="left")  # in a's (shuffled) row order
    independent = both.groupby([f"{c}_x" for c in QI] + [f"{c}_y" for c in QI])["id"]
    expected = independent.transform("size").to_numpy()
    assert sizes.tolist() == expected.tolist()  # = a pandas join by the attacker
    assert sizes.min() < 5 and np.mean(sizes < 5) > 0.3


def _require_chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is not None:
        return exe
    message = "chromium not found (apt-get install chromium; scripts/setup.sh installs it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def test_html_report_drawn_in_headless_chromium(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exe = _require_chromium()
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    table.to_csv(src, index=False)
    assert _anonymize(src, dst, "--k", "5") == 0
    assert _anonymize(src, tmp_path / "old.csv", "--k", "10", "--method", "mdav") == 0
    page, res_json = tmp_path / "report.html", tmp_path / "a.json"
    argv = ["assess", str(src), str(dst), "--qi", ",".join(QI), "--sensitive", "disease"]
    argv += ["--id", "id", "--sweep", "2,3,5,10", "--html", str(page), "--json", str(res_json)]
    argv += ["--history", str(tmp_path / "old.csv")]
    assert main(argv) == 0, capsys.readouterr().err
    text = page.read_text()
    # self-contained: nothing fetched (no src/href/url()/@import, one inline script)
    assert not re.search(r"\bsrc=|\bhref=|url\(|@import", text)
    result = json.loads(res_json.read_text())
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    dom = proc.stdout
    circles = re.findall(r"<circle ([^>]*)>", dom)
    attrs = [dict(re.findall(r'([\w-]+)="([^"]*)"', c)) for c in circles]
    drawn = re.search(r'<body[^>]*data-drawn="(\d+)"', dom)
    assert drawn is not None and int(drawn.group(1)) == len(attrs) > 0  # laid out, not empty
    # the curve: one point per k of the sweep (and the release) for each series, at the
    # figures of the JSON, placed left to right by information loss
    for series in ("linkage", "linkage_passthrough", "prosecutor"):
        pts = [a for a in attrs if a["data-series"] == series]
        ks = sorted(int(a["data-k"]) for a in pts)
        assert ks == sorted([2, 3, 5, 10, result["release"]["reidentification"]["min_class_size"]])
        for row in result["sweep"]:
            match = [
                a for a in pts
                if int(a["data-k"]) == row["k"] and float(a["data-il"]) == pytest.approx(
                    row["il_written"], rel=1e-5)
            ]  # fmt: skip
            assert match  # (the release is a second point at its k when it is the same file)
            for pt in match:
                assert float(pt["data-risk"]) == pytest.approx(row["measures"][series], rel=1e-5)
        by_il = sorted(pts, key=lambda a: float(a["data-il"]))
        xs = [float(a["data-px"]) for a in by_il]
        assert xs == sorted(xs) and xs[-1] > xs[0]
    # prosecutor risk falls as k grows: drawn higher on the page (smaller y) for k = 2
    pros = {
        int(a["data-k"]): float(a["data-py"]) for a in attrs if a["data-series"] == "prosecutor"
    }
    assert pros[2] < pros[10]
    # the measures table, the class-size histogram, the loss per attribute, pass-through risk
    rel = result["release"]
    row = re.search(r'<tr data-measure="prosecutor" data-value="([^"]+)"', dom)
    assert row is not None
    assert float(row.group(1)) == pytest.approx(rel["measures"]["prosecutor"], rel=1e-5)

    def svg(pid: str) -> str:
        found = re.search(rf'<svg id="{pid}".*?</svg>', dom, re.S)
        assert found is not None, pid
        return found.group(0)

    bars = dict(re.findall(r'data-size="(\d+)" data-count="(\d+)"', svg("classes")))
    assert bars == {s: str(c) for s, c in rel["class_sizes"].items()}
    # the classes left after intersecting the earlier release, records by class size
    hist = result["history"]
    bars = dict(re.findall(r'data-size="(\d+)" data-count="(\d+)"', svg("history-classes")))
    assert bars == {s: str(c) for s, c in hist["records_by_size"].items()}
    found = re.search(r'<p id="history" data-min="(\d+)" data-below="([^"]+)"', dom)
    assert found is not None and int(found.group(1)) == hist["min_size"]
    assert float(found.group(2)) == pytest.approx(hist["share_below_k"], rel=1e-5)
    loss = dict(re.findall(r'data-name="([\w-]+)" data-value="([^"]+)"', dom))
    for col in QI:
        assert float(loss[col]) == pytest.approx(rel["il_per_attribute"][col], rel=1e-5)
    for col in ("id", "city", "disease"):
        assert float(loss[col]) == pytest.approx(rel["linkage"]["passthrough"][col], rel=1e-5)


def test_nested_releases_keep_p_and_a_population_sets_journalist_risk(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pycanon import anonymity

    src = tmp_path / "in.csv"
    table.to_csv(src, index=False)
    code = _anonymize(src, tmp_path / "r{k}.csv", "--k", "4,8,12", "--p", "3")
    assert code == 0, capsys.readouterr().err
    files = {k: pd.read_csv(tmp_path / f"r{k}.csv") for k in (4, 8, 12)}
    for k, df in files.items():
        assert anonymity.k_anonymity(df, QI) >= k
        assert anonymity.l_diversity(df, QI, ["disease"]) >= 3
    sizes = intersected_sizes(files[4], QI, [(files[8], QI), (files[12], QI)])
    assert sizes.min() >= 4
    # journalist: a population of twice the records (the original and a jittered copy); each
    # population record counts for the released class nearest to it, so F_c >= f_c
    pop = pd.concat([table, table.assign(age=table["age"] + 1)], ignore_index=True)
    pop.to_csv(tmp_path / "pop.csv", index=False)
    out = tmp_path / "j.json"
    argv = ["assess", str(src), str(tmp_path / "r4.csv"), "--qi", ",".join(QI)]
    assert main([*argv, "--population", str(tmp_path / "pop.csv"), "--json", str(out)]) == 0
    m = json.loads(out.read_text())["release"]["measures"]
    assert m["journalist"] <= m["prosecutor"] and m["journalist_mean"] < m["prosecutor_mean"]
    assert m["marketer"] == pytest.approx(m["journalist_mean"])


def test_assess_bad_input_is_one_line_error(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    table.to_csv(src, index=False)
    assert _anonymize(src, dst, "--k", "5") == 0
    capsys.readouterr()
    short = tmp_path / "short.csv"
    pd.read_csv(dst).iloc[:-3].to_csv(short, index=False)
    empty = tmp_path / "empty.csv"
    table.iloc[:0].to_csv(empty, index=False)
    odd = tmp_path / "odd.csv"
    pd.read_csv(dst).assign(zip="x").to_csv(odd, index=False)
    cases = [
        ([str(dst), "--qi", "age,nope"], "key attribute 'nope' not found"),
        ([str(empty), "--qi", "age"], "has no rows"),
        ([str(short), "--qi", "age", "--history", str(dst), "--link", "position"], "rows"),
        ([str(dst), "--qi", "age", "--history", str(dst), "--link", "nope"], "'nope'"),
        ([str(odd), "--qi", "age,zip"], "not numerical"),
        ([str(dst), "--qi", "age", "--max-risk", "prosecutor=2"], "must be in [0, 1]"),
        (["--qi", "age"], "give RELEASED, or --sweep"),
        (["--qi", "age", "--sweep", "2,x"], "--sweep must be integers"),
    ]
    for extra, message in cases:
        assert main(["assess", str(src), *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
        assert err[0].startswith("locpriv assess: error:")


def test_nested_gate_writes_none_of_the_files(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.csv"
    table.to_csv(src, index=False)
    # k=10 passes prosecutor <= 0.15, k=5 does not: neither file is written
    code = _anonymize(src, tmp_path / "o.csv", "--k", "10,5", "--max-risk", "prosecutor=0.15")
    err = capsys.readouterr().err
    assert code == 2 and "prosecutor = 0.2 > 0.15" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]
    assert _anonymize(src, tmp_path / "o.csv", "--k", "5,5") == 2
    assert "twice" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("ks", "p", "seed"), [((3, 7), 1, 0), ((5, 10), 2, 1), ((2, 5, 9), 1, 2), ((4, 6), 3, 3)]
)
def test_nested_releases_over_ranges(ks: tuple[int, ...], p: int, seed: int) -> None:
    """Every larger-k release's classes are unions of the smaller-k's, at least k each, and
    the attacker's intersection of all the files never falls below the smallest k."""
    from locpriv.tabular.risk.history import nested_releases

    rng = np.random.default_rng(seed)
    n = 180 + 40 * seed
    df = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.integers(0, 20, n),  # integer key: released rounded, groups intact
            "c": rng.exponential(size=n),
            "s": rng.choice(list("uvwxyz"), n),
        }
    )
    qi = ["a", "b", "c"]
    method = "mdav" if p == 1 else "mdav-seed"
    results = nested_releases(df, qi, ["s"], ks, p=p, method=method, seed=seed)
    assert [k for k, _, _ in results] == sorted(ks)
    # every release in its own random order: no two files line up row by row
    perms = [source_rows_of(out) for _, out, _ in results]
    for i, a in enumerate(perms):
        assert a is not None and sorted(a) == list(range(n))
        assert all(not np.array_equal(a, b) for b in perms[i + 1 :])
    assert all(r["order"]["shuffled"] for _, _, r in results)
    # seeded: the same orders again (the seed stays with the agency)
    again = nested_releases(df, qi, ["s"], ks, p=p, method=method, seed=seed)
    for a, (_, o, _) in zip(perms, again, strict=True):
        assert np.array_equal(a, source_rows_of(o))
    # each file put back in the records' order, to compare the levels record by record
    frames = [out.iloc[np.argsort(perm)].reset_index(drop=True) for (_, out, _), perm in
              zip(results, perms, strict=True)]  # fmt: skip
    for (k, _, report), out, prev in zip(results, frames, [None, *frames[:-1]], strict=True):
        classes = out.groupby(qi)
        assert classes.size().min() >= k and report["min_group_size"] >= k
        assert classes["s"].nunique().min() >= p
        if prev is not None:  # (the smallest k's dtypes are anonymize's)
            assert out["b"].dtype == df["b"].dtype
            # the figures are those of the written file
            assert report["il_basis"] == "written values"
            written = out.groupby(qi).size()
            assert report["groups"] == len(written) and report["min_group_size"] == written.min()
            # union of the previous level's classes
            pairs = pd.concat([prev[qi].add_suffix("_f"), out[qi]], axis=1)
            assert pairs.groupby([f"{c}_f" for c in qi])[qi].nunique().max().max() == 1
    sizes = intersected_sizes(frames[0], qi, [(f, qi) for f in frames[1:]], link="position")
    assert sizes.min() >= min(ks)


def test_parquet_streaming_report_says_what_it_did_not_read(
    table: pd.DataFrame, tmp_path: Path
) -> None:
    src, dst, rep = tmp_path / "in.parquet", tmp_path / "out.parquet", tmp_path / "r.json"
    table.to_parquet(src, index=False)
    assert _anonymize(src, dst, "--k", "5", "--report", str(rep)) == 0
    risk = json.loads(rep.read_text())["risk"]
    assert set(risk["linkage"]["passthrough"]) == {"disease"}  # the only column it read
    assert any("Parquet streaming" in n and "id, city" in n for n in risk["notes"])
    assert risk["measures"]["linkage_passthrough"] is None  # 'id', 'city' not read
    assert risk["measures"]["linkage"] is not None  # through the streamed shuffle's permutation
    # assess on the two files measures every pass-through column of what was written (the
    # rows shuffled: matched by 'id'), and its linkage on the keys is the report's
    out = tmp_path / "a.json"
    argv = ["assess", str(src), str(dst), "--qi", ",".join(QI), "--sensitive", "disease"]
    assert main([*argv, "--id", "id", "--json", str(out)]) == 0
    assessed = json.loads(out.read_text())["release"]
    assert assessed["measures"]["linkage"] == pytest.approx(risk["measures"]["linkage"])
    through = json.loads(out.read_text())["release"]["linkage"]["passthrough"]
    assert set(through) == {"id", "disease", "city"}
    assert through["disease"] == pytest.approx(risk["linkage"]["passthrough"]["disease"])
    # the gate runs on the streamed path before anything is written
    dst.unlink()
    assert _anonymize(src, dst, "--k", "5", "--max-risk", "linkage=0.01") == 2
    assert not dst.exists()
    assert _anonymize(src, dst, "--k", "5", "--max-risk", "linkage_passthrough=0.99") == 2
    assert not dst.exists()


def test_the_permutation_never_reaches_the_file(table: pd.DataFrame, tmp_path: Path) -> None:
    """The released frame carries its permutation in attrs (for assess); pandas would store
    attrs in Parquet metadata: the file must not hold it, nor anything else of attrs."""
    import pyarrow.parquet as pq

    src = tmp_path / "in.csv"
    table.to_csv(src, index=False)
    for dst in (tmp_path / "out.parquet", tmp_path / "n.parquet"):
        extra = ("--k", "5") if dst.name == "out.parquet" else ("--k", "10,5")
        assert _anonymize(src, dst, *extra) == 0
    for path in tmp_path.glob("*.parquet"):
        meta = pq.read_schema(path).metadata or {}
        assert b"PANDAS_ATTRS" not in meta and not any(b"source_rows" in v for v in meta.values())
        assert pd.read_parquet(path).attrs == {}


def test_nested_releases_without_a_shared_column(
    table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No column to link the files by: independent random orders leave the attacker nothing;
    the reports give the intersection with every record linked (the worst case). With
    --keep-order the position links them."""
    src = tmp_path / "in.csv"
    table[QI].to_csv(src, index=False)
    argv = ["anonymize", str(src), str(tmp_path / "o.csv"), "--qi", ",".join(QI), "--k", "8,4"]
    argv += ["--seed", "1", "--report", str(tmp_path / "r.json")]
    assert main(argv) == 0, capsys.readouterr().err
    o4, o8 = pd.read_csv(tmp_path / "o.k4.csv"), pd.read_csv(tmp_path / "o.k8.csv")
    for k in (4, 8):
        rep = json.loads((tmp_path / f"r.k{k}.json").read_text())
        assert rep["history"]["linked_by"] == "every record (worst case)"
        assert rep["history"]["min_size"] >= 4 and rep["order"]["seed"] == 1
        assert rep["risk"]["measures"]["linkage"] is not None
    assert o4.groupby(QI).size().min() >= 4 and o8.groupby(QI).size().min() >= 8
    assert main([*argv, "--keep-order"]) == 0
    assert "ROW ORDER KEPT" in capsys.readouterr().err
    rep = json.loads((tmp_path / "r.k4.json").read_text())
    assert rep["history"]["linked_by"] == "row position" and not rep["order"]["shuffled"]
    assert rep["history"]["min_size"] >= 4
