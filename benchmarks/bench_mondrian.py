"""Benchmark: Mondrian (strict and relaxed) on Adult with the shipped ARX hierarchies, and on
large numeric tables.

Usage: ``.venv/bin/python benchmarks/bench_mondrian.py [--quick]``

* ``adult``: ``../shared/data/adult.csv`` less the rows with ``?`` in a key attribute (30162
  rows); key attributes age, education-num, hours-per-week (numeric, ranges) and workclass,
  marital-status, race, sex, native-country (categorical, the hierarchies shipped in
  ``locpriv/data/hierarchies/adult/``); k = 2, 5, 10, and k = 5 with distinct l = 3 over
  occupation. Seconds of ``mondrian`` (min and median of 3 runs, after one warm-up call; the
  machine may be shared: the load average is recorded), classes, class sizes
  (min, mean, max) and the mean ``cover`` (share of each attribute's domain a released value
  spans, 0 = exact).
* ``numeric``: n standard-normal records in 3 columns (seed 1), n = 100k and 1M (100k only with
  ``--quick``), k = 5: seconds and classes.

Writes ``benchmarks/results/bench_mondrian.json`` and prints one line per run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from locpriv.tabular.generalisation.arx import read_hierarchy, shipped_hierarchy_files
from locpriv.tabular.generalisation.hierarchy import KeyTable
from locpriv.tabular.generalisation.mondrian import mondrian
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "data" / "adult.csv"
NUMERIC = ["age", "education-num", "hours-per-week"]
CATEGORICAL = ["workclass", "marital-status", "race", "sex", "native-country"]


def _figures(rel: Any, seconds: float) -> dict[str, Any]:
    sizes = np.bincount(rel.labels)
    return {
        "seconds": round(seconds, 3),
        "classes": len(sizes),
        "min_class": int(sizes.min()),
        "mean_class": round(float(sizes.mean()), 2),
        "max_class": int(sizes.max()),
        "mean_cover": round(float(rel.cover.mean()), 4),
    }


def _adult() -> list[dict[str, Any]]:
    files = shipped_hierarchy_files("adult")
    hs = tuple(read_hierarchy(files[c]) for c in CATEGORICAL)
    with ADULT.open() as fh:
        rows = [
            r for r in csv.DictReader(fh) if all(r[c] != "?" for c in [*CATEGORICAL, "occupation"])
        ]
    num = np.array([[float(r[c]) for c in NUMERIC] for r in rows])
    codes = np.column_stack(
        [h.codes([r[c] for r in rows]) for h, c in zip(hs, CATEGORICAL, strict=True)]
    )
    occ = sorted({r["occupation"] for r in rows})
    S = np.array([occ.index(r["occupation"]) for r in rows])
    keys = KeyTable(num, codes, hs)
    mondrian(keys, ModelCheck(PrivacyModels(k=5)))  # warm-up
    out = []
    for relaxed in (False, True):
        for k, l in [(2, 1), (5, 1), (10, 1), (5, 3)]:  # noqa: E741
            check = ModelCheck(PrivacyModels(k=k, l=l), S if l > 1 else None)
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                rel = mondrian(keys, check, relaxed=relaxed, columns=[*NUMERIC, *CATEGORICAL])
                times.append(time.perf_counter() - t0)
            res = {"data": "adult", "n": len(rows), "k": k, "l": l, "relaxed": relaxed}
            res |= _figures(rel, min(times))
            res["median_seconds"] = round(sorted(times)[1], 3)
            print(res, flush=True)
            out.append(res)
    return out


def _numeric(sizes: list[int]) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        num = np.random.default_rng(1).normal(size=(n, 3))
        keys = KeyTable(num, np.zeros((n, 0), dtype=np.int64), ())
        for relaxed in (False, True):
            t0 = time.perf_counter()
            rel = mondrian(keys, ModelCheck(PrivacyModels(k=5)), relaxed=relaxed)
            res = {"data": "normal-3d", "n": n, "k": 5, "l": 1, "relaxed": relaxed}
            res |= _figures(rel, time.perf_counter() - t0)
            print(res, flush=True)
            out.append(res)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()
    runs = _adult() if ADULT.exists() else []
    runs += _numeric([100_000] if args.quick else [100_000, 1_000_000])
    result = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg_before": load,
        "load_avg_after": os.getloadavg(),
        "runs": runs,
    }
    dest = ROOT / "benchmarks" / "results" / "bench_mondrian.json"
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
