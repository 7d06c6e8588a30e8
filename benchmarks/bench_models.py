"""Privacy models applied to microaggregation: information loss and time on Adult and Census.

``python benchmarks/bench_models.py [--method mdav]``: for each setting (k = 5 alone, then with
t-closeness, entropy and recursive l-diversity), the IL of the written file (%), the groups
before and after the model repair, the models the released table achieves (measured by the
validators of a released table) and the seconds. Adult (../shared/data/adult.csv): age, fnlwgt,
education-num, hours-per-week numerical, sex and race nominal, confidential occupation (nominal:
equal-distance EMD). Census (../shared/data/census.csv, 1080 records): the 11 other columns as
keys, confidential FEDTAX (numerical: ordered EMD).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

from locpriv.tabular import anonymize

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"

SETTINGS: list[dict[str, Any]] = [
    {},
    {"t": 0.2},
    {"t": 0.1},
    {"entropy_l": 2.0},
    {"entropy_l": 3.0},
    {"recursive": (3.0, 2)},
    {"p": 2, "t": 0.2},  # the default p-method, then the repair
]


def sets() -> dict[str, tuple[pd.DataFrame, list[str], str, dict[str, Any]]]:
    adult = pd.read_csv(DATA / "adult.csv")
    census = pd.read_csv(DATA / "census.csv")
    return {
        "adult": (
            adult,
            ["age", "fnlwgt", "education-num", "hours-per-week", "sex", "race"],
            "occupation",
            {"nominal": ["sex", "race"]},
        ),
        "census": (
            census,
            [c for c in census.columns if c not in ("FEDTAX", "STATETAX")],
            "FEDTAX",
            {},
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--method", default="mdav")
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    for name, (df, qi, sens, kw) in sets().items():
        anonymize(df.head(300), qi, sens, args.k, 1, args.method, warn=lambda _: None, **kw)
        for setting in SETTINGS:
            s = dict(setting)
            p = s.pop("p", 1)
            t0 = time.perf_counter()
            _, rep = anonymize(
                df,
                qi,
                sens,
                args.k,
                p,
                args.method if p == 1 else None,
                seed=0,
                warn=lambda _: None,
                **kw,
                **s,
            )
            md = rep["models"]
            row = {
                "data": name,
                "k": args.k,
                "p": p,
                **{key: (list(v) if isinstance(v, tuple) else v) for key, v in s.items()},
                "il_percent": round(rep["il_percent"], 3),
                "groups": rep["groups"],
                "merged": md["merged_groups"],
                "t_achieved": round(md["t_achieved"][sens], 4),
                "entropy_l_achieved": round(md["entropy_l_achieved"][sens], 3),
                "seconds": round(time.perf_counter() - t0, 2),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
