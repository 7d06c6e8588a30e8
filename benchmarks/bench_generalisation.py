"""Benchmark: the full-domain searches (Samarati, optimal, Incognito) on Adult.

Usage: ``.venv/bin/python benchmarks/bench_generalisation.py [--quick] [--eight | --arx8]
[--loss L] [--samarati-only]``

Data: ../shared/data/adult.csv, key attributes age, workclass, marital-status, race, sex,
native-country with ARX's published hierarchies (notebooks/data/adult_hierarchies/; 540
lattice nodes), records missing one of them dropped (30169 left); the income is the confidential
attribute for l = 2. ``--eight`` adds education-num and hours-per-week with banded hierarchies
built here (bands of 2/4/8 and 10/20/40, then ``*``: 13500 nodes) to time a larger lattice.
``--arx8`` takes Adult's eight categorical key attributes with the ARX hierarchies shipped in
locpriv/data/hierarchies/adult/ instead: the six above plus education and occupation (records
missing occupation dropped too; 6480 nodes). ``--samarati-only`` times Samarati alone, next to
the binary search over heights it replaced (:func:`binary_minimal_height`, the same answer) on
the same lattice, so the two are compared within one run.
For k = 2, 5, 10 and MaxSup = 0, 1 %, 5 %: seconds, the chosen node, suppressed records, nodes
checked/tagged and every loss of the release. Writes benchmarks/results/bench_generalisation.json
and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from locpriv.tabular.generalisation.arx import read_hierarchy  # noqa: E402
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy  # noqa: E402
from locpriv.tabular.generalisation.incognito import incognito_release  # noqa: E402
from locpriv.tabular.generalisation.lattice import Lattice  # noqa: E402
from locpriv.tabular.generalisation.optimal import optimal  # noqa: E402
from locpriv.tabular.generalisation.release import GeneralisedRelease  # noqa: E402
from locpriv.tabular.generalisation.samarati import samarati  # noqa: E402
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels  # noqa: E402
from locpriv.tabular.quality.loss import LOSSES, loss_of_release  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bench_generalisation.json"
ADULT = ROOT.parent / "shared" / "data" / "adult.csv"
HIER = ROOT / "notebooks" / "data" / "adult_hierarchies"
QI = ("age", "workclass", "marital-status", "race", "sex", "native-country")
SHIPPED = ROOT / "locpriv" / "data" / "hierarchies" / "adult"
ARX8 = (*QI, "education", "occupation")


def _bands(values: range, widths: tuple[int, ...]) -> LevelHierarchy:
    rows = []
    for v in values:
        row = [str(v)]
        for w in widths:
            lo = (v - values.start) // w * w + values.start
            row.append(f"{lo}-{lo + w - 1}")
        rows.append([*row, "*"])
    return LevelHierarchy.from_rows(rows)


def load_arx8() -> tuple[np.ndarray, tuple[LevelHierarchy, ...], np.ndarray, tuple[str, ...]]:
    """Adult's eight categorical key attributes with the shipped ARX hierarchies."""
    hs = [read_hierarchy(SHIPPED / f"{col}.csv") for col in ARX8]
    df = pd.read_csv(ADULT, dtype=str, skipinitialspace=True)
    df = df[~df[list(ARX8)].isin(["?"]).any(axis=1)]
    leaves = np.column_stack([h.codes(df[c]) for h, c in zip(hs, ARX8, strict=True)])
    income = np.unique(df["income"].to_numpy(), return_inverse=True)[1].astype(np.int64)
    return leaves, tuple(hs), income, ARX8


def binary_minimal_height(lat: Lattice) -> int:
    """Samarati's binary search over heights, each height's nodes in lexicographic order (the
    search :func:`samarati` used before its downward scan): the baseline of --samarati-only."""
    lo, hi = 0, sum(lat.heights)
    while lo < hi:
        mid = (lo + hi) // 2
        if any(lat.acceptable(nd) for nd in lat.nodes_at(mid)):
            hi = mid
        else:
            lo = mid + 1
    return hi


def samarati_pair(
    leaves: np.ndarray, hs: Any, check: ModelCheck, ms: float, loss: str
) -> dict[str, Any]:
    """Samarati's release and the binary-search baseline on the same lattice: seconds and
    nodes checked of each, and whether they agree (height, node)."""
    t0 = time.perf_counter()
    rel = samarati(leaves, hs, check, ms, loss=loss)
    new_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    lat = Lattice(leaves, hs, check, ms)
    lat.require_top()
    height = binary_minimal_height(lat)
    cands = [nd for nd in lat.nodes_at(height) if lat.acceptable(nd)]
    node = min(cands, key=lambda nd: (lat.loss(nd, loss), nd))
    old_s = time.perf_counter() - t0
    return {
        "seconds": round(new_s, 3),
        "nodes_checked": rel.info["nodes_checked"],
        "binary_seconds": round(old_s, 3),
        "binary_nodes_checked": lat.evaluations,
        "speedup": round(old_s / new_s, 2),
        "same_node": tuple(rel.levels or ()) == node,
        "node": list(rel.levels or ()),
        "height": rel.info["height"],
        "lattice_size": lat.size,
    }


def load(eight: bool) -> tuple[np.ndarray, tuple[LevelHierarchy, ...], np.ndarray, tuple[str, ...]]:
    hs: list[LevelHierarchy] = []
    for col in QI:
        with open(HIER / f"{col}.csv", newline="") as f:
            hs.append(LevelHierarchy.from_rows(csv.reader(f, delimiter=";")))
    cols = list(QI)
    if eight:
        hs += [_bands(range(1, 17), (2, 4, 8)), _bands(range(1, 100), (10, 20, 40))]
        cols += ["education-num", "hours-per-week"]
    df = pd.read_csv(ADULT, dtype=str, skipinitialspace=True)
    df = df[~df[list(QI)].isin(["?"]).any(axis=1)]
    leaves = np.column_stack([h.codes(df[c]) for h, c in zip(hs, cols, strict=True)])
    income = np.unique(df["income"].to_numpy(), return_inverse=True)[1].astype(np.int64)
    return leaves, tuple(hs), income, tuple(cols)


def _row(
    rel: GeneralisedRelease, k: int, leaves: np.ndarray, hs: Any, secs: float
) -> dict[str, Any]:
    return {
        "seconds": round(secs, 3),
        "node": list(rel.levels or ()),
        "suppressed": int(rel.suppressed.sum()),
        "classes": len(set(rel.labels[rel.labels >= 0].tolist())),
        "nodes_checked": rel.info.get("nodes_checked"),
        "nodes_tagged": rel.info.get("nodes_tagged"),
        "lattice_size": rel.info.get("lattice_size"),
        **{name: round(loss_of_release(name, rel, k, leaves, hs), 4) for name in LOSSES},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="k = 5 only")
    ap.add_argument("--eight", action="store_true", help="eight key attributes (13500 nodes)")
    ap.add_argument("--arx8", action="store_true", help="eight keys, shipped ARX hierarchies")
    ap.add_argument("--loss", default="gil", choices=LOSSES)
    ap.add_argument(
        "--samarati-only", action="store_true", help="Samarati against its binary search"
    )
    args = ap.parse_args()
    leaves, hs, income, cols = load_arx8() if args.arx8 else load(args.eight)
    rows: list[dict[str, Any]] = []
    ks = (5,) if args.quick else (2, 5, 10)
    for k in ks:
        for ell in (1, 2):
            check = ModelCheck(PrivacyModels(k=k, l=ell), income if ell > 1 else None)
            for ms in (0, 0.01, 0.05):
                if args.samarati_only:
                    pair = samarati_pair(leaves, hs, check, ms, args.loss)
                    rows.append({"method": "samarati", "k": k, "l": ell, "max_sup": ms, **pair})
                    print(json.dumps(rows[-1]), flush=True)
                    continue
                for name, fn in (("samarati", samarati), ("optimal", optimal)):
                    t0 = time.perf_counter()
                    rel = fn(leaves, hs, check, ms, loss=args.loss, columns=cols)
                    secs = time.perf_counter() - t0
                    rows.append(
                        {
                            "method": name,
                            "k": k,
                            "l": ell,
                            "max_sup": ms,
                            **_row(rel, k, leaves, hs, secs),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
            if not (args.eight or args.arx8 or args.samarati_only):
                t0 = time.perf_counter()
                rel = incognito_release(leaves, hs, income, k, ell, columns=cols)
                secs = time.perf_counter() - t0
                rows.append(
                    {
                        "method": "incognito",
                        "k": k,
                        "l": ell,
                        "max_sup": 0,
                        **_row(rel, k, leaves, hs, secs),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    out = {
        "machine": platform.processor() or platform.machine(),
        "n": len(leaves),
        "qi": list(cols),
        "loss": args.loss,
        "rows": rows,
    }
    tag = ("_eight" if args.eight else "_arx8" if args.arx8 else "") + (
        "_samarati" if args.samarati_only else ""
    )
    path = OUT.with_name(OUT.stem + tag + ".json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
