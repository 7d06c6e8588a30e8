"""Benchmark: locpriv's generalisation methods vs anjana vs locpriv's microaggregation (MDAV).

Usage: ``.venv/bin/python benchmarks/bench_vs_anjana.py [--quick] [--ks 2,5,10]
[--no-anjana] [--data adult,census]``

Data (``../shared/data``):

- **Adult** (UCI, the rows without ``?``: 30,162): key attributes age, education,
  marital-status, occupation, sex, native-country (the issue's setting) with the shipped ARX
  hierarchies (``locpriv/data/hierarchies/adult``); confidential attribute income; the
  downstream task predicts income from the released key attributes only.
- **Census** (CASC, 1,080 records, numeric): key attributes AGI, FEDTAX, STATETAX, POTHVAL
  with generated interval hierarchies (:func:`~locpriv.tabular.generalisation.builders.
  interval_hierarchy`; Mondrian and MDAV use the numbers); the task predicts PEARNVAL above its
  median.

Methods: locpriv ``samarati``/``optimal`` (5 % suppression allowed, loss ``gil``),
``incognito`` (no suppression), ``mondrian`` and ``mondrian-relaxed``; **anjana** 1.2.3's
``k_anonymity`` (5 % suppression, the same hierarchies) run in its own virtual environment
(``benchmarks/.anjana-venv``, created on first use: anjana pins numpy 2.0.2 / pandas 2.3.3 /
pycanon 1.3.5) through a subprocess and files; locpriv ``mdav`` (microaggregation, the
categorical keys nominal). anjana drops the records it suppresses; they are counted here as
suppressed rows (all ``*``) so every release has n rows.

Measured on each written release (same code for all): ``seconds`` (the method's call only),
``classes``, ``mean_class_k`` (mean class size / k), ``suppressed`` (share), ``gil`` (generalised
information loss: mean over cells of the share of the column's values the released value
covers; ranges by width; generalisation only), ``dm``, ``auc`` (5-fold cross-validated ROC AUC of
a logistic regression on the released key columns, one-hot; MDAV's numerical keys as numbers),
and risk (:mod:`locpriv.tabular.risk.assess` / :mod:`locpriv.tabular.risk.assess`): ``prosecutor``
(1 / smallest class), ``marketer`` (expected share re-identified), ``linkage`` (matching for
generalised releases, distance-based for MDAV) and ``inference_gain`` on the confidential one.

**Equal measured risk**: for each method the smallest k of ``EQUAL_RISK_KS`` whose marketer
risk is at most anjana's at k = 5 (its default-like setting); its utility is compared.
Writes ``benchmarks/results/bench_vs_anjana.json`` and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from locpriv.tabular import anonymize  # noqa: E402
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy  # noqa: E402
from locpriv.tabular.io.estimators import source_rows_of  # noqa: E402
from locpriv.tabular.io.generalised import generalise, read_hierarchy_file  # noqa: E402
from locpriv.tabular.risk.assess import assess_generalised, assess_release  # noqa: E402
from locpriv.tabular.risk.linkage import ColumnCover  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bench_vs_anjana.json"
DATA = Path(os.environ.get("LOCPRIV_DATA", ROOT.parent / "shared" / "data"))
HIER = ROOT / "locpriv" / "data" / "hierarchies" / "adult"
VENV = Path(os.environ.get("ANJANA_VENV", ROOT / "benchmarks" / ".anjana-venv"))
ANJANA = "anjana==1.2.3"
GEN = ("incognito", "samarati", "optimal", "mondrian", "mondrian-relaxed")
SUPPRESSION = 0.05
EQUAL_RISK_KS = (2, 3, 5, 7, 10, 15, 20, 30, 50, 75, 100, 150, 200)

ANJANA_RUN = """
import json, sys, time
import pandas as pd
from anjana.anonymity import k_anonymity
src, hier, dst, k, supp = sys.argv[1:6]
df = pd.read_csv(src, dtype=str, keep_default_na=False)
levels = json.load(open(hier))
h = {c: {int(lev): vals for lev, vals in per.items()} for c, per in levels.items()}
qi = list(h)
t = time.perf_counter()
out = k_anonymity(df, [], qi, int(k), float(supp), h)
sec = time.perf_counter() - t
if "index" not in out.columns:
    out = out.reset_index()
out.to_csv(dst, index=False)
print(json.dumps({"seconds": sec, "rows": len(out)}))
"""


def anjana_python() -> Path:
    """The interpreter of anjana's own virtual environment (created on first use)."""
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        env = {**os.environ, "PIP_CONSTRAINT": ""}
        subprocess.run([str(py), "-m", "pip", "install", "-q", ANJANA], check=True, env=env)
    return py


def load(name: str, quick: bool, n: int | None = None) -> dict[str, Any]:
    """A data set, its key attributes, hierarchies, confidential attribute and task (``n``:
    that many Adult records drawn at random; ``quick``: 5,000)."""
    if name == "adult":
        qi = ["age", "education", "marital-status", "occupation", "sex", "native-country"]
        df = pd.read_csv(DATA / "adult.csv")
        df = df[~(df.astype(str) == "?").any(axis=1)].reset_index(drop=True)
        df = df[[*qi, "income"]]
        if quick or n is not None:
            df = df.sample(n or 5000, random_state=0).reset_index(drop=True)
        hs = {c: read_hierarchy_file(HIER / f"{c}.csv") for c in qi}
        y = (df["income"] == ">50K").to_numpy()
        return {"df": df, "qi": qi, "sensitive": "income", "hs": hs, "y": y, "numeric": ["age"]}
    qi = ["AGI", "FEDTAX", "STATETAX", "POTHVAL"]
    df = pd.read_csv(DATA / "census.csv")
    df["PEARN_HIGH"] = np.where(df["PEARNVAL"] > df["PEARNVAL"].median(), "high", "low")
    df = df[[*qi, "PEARN_HIGH"]]
    from locpriv.tabular.generalisation.builders import interval_hierarchy

    hs = {c: interval_hierarchy(df[c].tolist()) for c in qi}
    y = (df["PEARN_HIGH"] == "high").to_numpy()
    return {"df": df, "qi": qi, "sensitive": "PEARN_HIGH", "hs": hs, "y": y, "numeric": qi}


def auc(features: pd.DataFrame, y: np.ndarray, numeric: list[str]) -> float:
    """5-fold cross-validated ROC AUC of a logistic regression (one-hot categories, numbers
    standardised)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    parts = []
    for c in features.columns:
        s = features[c]
        if c in numeric and pd.api.types.is_numeric_dtype(s):
            v = s.to_numpy(dtype=np.float64)
            parts.append(pd.DataFrame({c: (v - v.mean()) / (v.std() or 1.0)}))
        else:
            parts.append(pd.get_dummies(s.astype(str), prefix=c, dtype=np.float64))
    X = pd.concat(parts, axis=1).to_numpy()
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    scores = cross_val_score(LogisticRegression(max_iter=2000), X, y, cv=cv, scoring="roc_auc")
    return float(np.mean(scores))


def written_gil(original: pd.DataFrame, released: pd.DataFrame, qi: list[str], hs: dict) -> float:
    """Mean over cells of the share of the column's values each released value covers
    (``(covered - 1) / (values - 1)``; ``*`` = 1)."""
    shares = []
    for c in qi:
        cv = ColumnCover(c, original[c], hs.get(c))
        per = {}
        for lab in pd.unique(released[c].astype(str)):
            cov = int(cv.covers(str(lab)).sum())
            per[lab] = (cov - 1) / (cv.nleaf - 1) if cv.nleaf > 1 else 0.0
        shares.append(released[c].astype(str).map(per).to_numpy(dtype=np.float64))
    return float(np.mean(np.column_stack(shares)))


def class_figures(released: pd.DataFrame, qi: list[str], k: int) -> dict[str, Any]:
    sup = (released[qi].astype(str) == "*").all(axis=1).to_numpy()
    kept = released[~sup]
    sizes = kept.groupby(qi, sort=False).size().to_numpy() if len(kept) else np.zeros(1)
    n = len(released)
    return {
        "classes": len(sizes),
        "min_class": int(sizes.min()),
        "mean_class_k": float(sizes.mean() / k),
        "suppressed": float(sup.mean()),
        "dm": float(np.sum(sizes.astype(np.float64) ** 2) + sup.sum() * n),
    }


def risk_figures(risk: dict[str, Any], sensitive: str) -> dict[str, Any]:
    m = risk["measures"]
    return {
        "prosecutor": m["prosecutor"],
        "marketer": m["marketer"],
        "linkage": m["linkage"],
        "inference_gain": m["inference_gain"],
    }


def run_locpriv(d: dict[str, Any], method: str, k: int) -> dict[str, Any]:
    df, qi, hs = d["df"], d["qi"], d["hs"]
    hier = (
        dict(hs)
        if method in ("incognito", "samarati", "optimal")
        else {c: h for c, h in hs.items() if c not in d["numeric"]}
    )
    t = time.perf_counter()
    out, rep = generalise(
        df,
        qi,
        d["sensitive"],
        k=k,
        method=method,
        hierarchies=hier,
        max_suppression=SUPPRESSION if method in ("samarati", "optimal") else 0,
        seed=0,
        warn=lambda _: None,
    )
    sec = time.perf_counter() - t
    order = source_rows_of(out)
    assert order is not None
    back = out.iloc[np.argsort(order)].reset_index(drop=True)
    cover = {c: hier.get(c) for c in qi}
    risk = assess_generalised(df, back, qi, [d["sensitive"]], hierarchies=cover)
    return {
        "seconds": sec,
        **class_figures(back, qi, k),
        "gil": written_gil(df, back, qi, cover),
        "auc": auc(back[qi], d["y"], []),
        **risk_figures(risk, d["sensitive"]),
        "levels": rep.get("levels"),
    }


def run_mdav(d: dict[str, Any], k: int) -> dict[str, Any]:
    df, qi = d["df"], d["qi"]
    nominal = [c for c in qi if c not in d["numeric"]]
    t = time.perf_counter()
    out, _ = anonymize(
        df, qi, d["sensitive"], k=k, method="mdav", nominal=nominal, seed=0, warn=lambda _: None
    )
    sec = time.perf_counter() - t
    risk = assess_release(df, out, qi, [d["sensitive"]], nominal=nominal)
    order = source_rows_of(out)
    assert order is not None
    back = out.iloc[np.argsort(order)].reset_index(drop=True)
    figs = class_figures(back, qi, k)
    return {
        "seconds": sec,
        **figs,
        "gil": None,
        "auc": auc(back[qi], d["y"], d["numeric"]),
        **risk_figures(risk, d["sensitive"]),
    }


def run_anjana(d: dict[str, Any], k: int, tmp: Path) -> dict[str, Any]:
    df, qi, hs = d["df"], d["qi"], d["hs"]
    src, hfile, dst = tmp / "in.csv", tmp / "h.json", tmp / f"out{k}.csv"
    df.astype(str).to_csv(src, index=False)
    levels = {}
    for c in qi:
        h: LevelHierarchy = hs[c]
        anc = h.ancestors()
        levels[c] = {lev: [h.labels[lev][int(a)] for a in anc[lev]] for lev in range(len(h.labels))}
    hfile.write_text(json.dumps(levels))
    run = subprocess.run(
        [
            str(anjana_python()),
            "-c",
            ANJANA_RUN,
            str(src),
            str(hfile),
            str(dst),
            str(k),
            str(100 * SUPPRESSION),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    facts = json.loads(run.stdout.strip().splitlines()[-1])
    got = pd.read_csv(dst, dtype=str, keep_default_na=False)
    back = pd.DataFrame("*", index=range(len(df)), columns=qi)
    back[d["sensitive"]] = df[d["sensitive"]].to_numpy()
    if len(got):
        rows = got["index"].astype(int).to_numpy()
        for c in qi:
            back.loc[rows, c] = got[c].to_numpy()
    cover = {c: hs[c] for c in qi}
    orig = df
    risk = assess_generalised(orig, back, qi, [d["sensitive"]], hierarchies=cover)
    return {
        "seconds": facts["seconds"],
        **class_figures(back, qi, k),
        "gil": written_gil(orig, back, qi, cover),
        "auc": auc(back[qi], d["y"], []),
        **risk_figures(risk, d["sensitive"]),
    }


def run_one(d: dict[str, Any], method: str, k: int, tmp: Path) -> dict[str, Any] | None:
    try:
        if method == "anjana":
            return run_anjana(d, k, tmp)
        if method == "mdav":
            return run_mdav(d, k)
        return run_locpriv(d, method, k)
    except Exception as exc:  # an infeasible setting is a row, not a crash
        return {"error": f"{type(exc).__name__}: {exc}"}


def fmt(rows: list[dict[str, Any]]) -> str:
    cols = [
        "data",
        "method",
        "k",
        "seconds",
        "classes",
        "mean_class_k",
        "suppressed",
        "gil",
        "auc",
        "prosecutor",
        "marketer",
        "linkage",
        "inference_gain",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            if isinstance(v, float):
                cells.append(f"{v:.3g}" if c != "auc" else f"{v:.3f}")
            else:
                cells.append("—" if v is None else str(v))
        if "error" in r:
            cells[3] = r["error"][:60]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000 Adult rows, k = 5 only")
    ap.add_argument("--ks", default="2,5,10")
    ap.add_argument("--no-anjana", action="store_true")
    ap.add_argument("--data", default="adult,census")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    ks = [5] if args.quick else [int(x) for x in args.ks.split(",")]
    methods = [*GEN, "mdav"] + ([] if args.no_anjana else ["anjana"])
    result: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load": os.getloadavg()[0],
        },
        "suppression": SUPPRESSION,
        "equal_k": [],
        "equal_risk": [],
    }
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for name in args.data.split(","):
            d = load(name, args.quick)
            d["original_auc"] = auc(d["df"][d["qi"]], d["y"], d["numeric"])
            result.setdefault("original_auc", {})[name] = d["original_auc"]
            print(f"{name}: n={len(d['df'])}, AUC on the original keys {d['original_auc']:.3f}")
            cache: dict[tuple[str, int], dict[str, Any]] = {}
            for k in ks:
                for m in methods:
                    row = run_one(d, m, k, tmp) or {}
                    cache[(m, k)] = row
                    row = {"data": name, "method": m, "k": k, **row}
                    result["equal_k"].append(row)
                    print(fmt([row]).splitlines()[-1], flush=True)
            if args.no_anjana or args.quick:
                continue
            target = cache[("anjana", 5)].get("marketer")
            if target is None:
                continue
            for m in methods:
                for k in EQUAL_RISK_KS:
                    row = cache.get((m, k)) or run_one(d, m, k, tmp) or {}
                    cache[(m, k)] = row
                    if "error" not in row and row["marketer"] <= target:
                        result["equal_risk"].append(
                            {"data": name, "method": m, "k": k, "target_marketer": target, **row}
                        )
                        break
    print("\n## At equal k\n\n" + fmt(result["equal_k"]))
    if result["equal_risk"]:
        print("\n## At equal measured risk (marketer <= anjana's at k = 5)\n")
        print(fmt(result["equal_risk"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
