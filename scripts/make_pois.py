"""Generate the demo POI set locpriv/data/pois.csv (seeded, reproducible).

5,000 POIs in 6 categories over a 20 km x 20 km city centred on the reference point
(Barcelona, Plaça de Catalunya: lat 41.3874, lon 2.1686). Positions are drawn in local metres
(azimuthal equidistant projection centred on the reference point): 60 % around 25 Gaussian
"neighbourhood" centres (sigma 300-1500 m), 40 % uniform, clipped to the square.

    .venv/bin/python scripts/make_pois.py [--seed 20240521] [--n 5000] [--out locpriv/data/pois.csv]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from locpriv.core.geo import LocalProjection

REF_LAT, REF_LON = 41.3874, 2.1686
HALF_M = 10_000.0
CATEGORIES = ("cafe", "restaurant", "pharmacy", "atm", "fuel", "hospital")
WEIGHTS = (0.30, 0.30, 0.15, 0.15, 0.07, 0.03)


def generate(n: int, seed: int) -> list[tuple[str, str, float, float, str]]:
    """Rows ``(id, category, lat, lon, name)`` with coordinates rounded to 1e-6 degrees."""
    rng = np.random.default_rng(seed)
    n_clustered = int(n * 0.6)
    centres = rng.uniform(-HALF_M * 0.8, HALF_M * 0.8, size=(25, 2))
    sigmas = rng.uniform(300.0, 1500.0, size=25)
    which = rng.integers(0, 25, size=n_clustered)
    clustered = centres[which] + rng.normal(size=(n_clustered, 2)) * sigmas[which, None]
    uniform = rng.uniform(-HALF_M, HALF_M, size=(n - n_clustered, 2))
    xy = np.clip(np.vstack([clustered, uniform]), -HALF_M, HALF_M)
    cats = rng.choice(len(CATEGORIES), size=n, p=WEIGHTS)
    lon, lat = LocalProjection(REF_LAT, REF_LON).to_lonlat(xy[:, 0], xy[:, 1])
    rows = []
    for i in range(n):
        cat = CATEGORIES[int(cats[i])]
        rows.append(
            (f"poi-{i:05d}", cat, round(float(lat[i]), 6), round(float(lon[i]), 6), f"{cat} {i}")
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20240521)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=Path("locpriv/data/pois.csv"))
    args = parser.parse_args()
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(("id", "category", "lat", "lon", "name"))
        writer.writerows(generate(args.n, args.seed))
    print(f"wrote {args.n} POIs to {args.out}")


if __name__ == "__main__":
    main()
