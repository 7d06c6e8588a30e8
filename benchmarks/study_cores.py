"""Success where a region is feasible, with and without cores, over grid phases and densities.

A request is *feasible* when a square centred on the user holding k users fits under A_max.
"with cores" is what a real :class:`~locpriv.core.cloak.cloaker.Cloaker` answers; "without" is
the same partition (same phase, same A_min rung) answering only the leaf or its grid box, as
before cores. Populations: ``tests/test_cloak.py``'s dense spot + sparse fringe (1,500 random
requests, k in {3, 5, 10, 20}) over 20 phases, and ``tests/test_cloak_core.py``'s fringes
(1,000-4,000 users, 2-8 fringe users per km², every user asks) over two phases.

    .venv/bin/python benchmarks/study_cores.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_cloak_core import _fringe  # noqa: E402

from locpriv.core.cloak.cloaker import Cloaker  # noqa: E402
from locpriv.core.cloak.partition import build_partition, leaf_region, shrunk_region  # noqa: E402
from locpriv.core.cloak.types import CloakConfig, CloakParams, round_a_min  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "study_cores.json"
WORLD = (0.0, 0.0, 10_000.0, 10_000.0)


def _rate(xy: np.ndarray, asks: list[tuple[int, CloakParams]], phase: float) -> tuple[float, float]:
    """(without cores, with cores): answered share of the feasible requests in ``asks``."""
    cfg = CloakConfig(world=WORLD, epoch_s=1.0, user_ttl_s=60.0)
    ck = Cloaker(cfg, phase=phase)
    ids = [f"u{i}" for i in range(len(xy))]
    ck.update_many(ids, xy, now=0.0)
    parts: dict[tuple[int, float], object] = {}
    feasible = old = new = 0
    for n, (u, p) in enumerate(asks):
        d = np.sort(np.max(np.abs(xy - xy[u]), axis=1))[p.k - 1]
        if (2 * d) ** 2 >= p.a_max_m2:
            continue
        feasible += 1
        out = ck.request(n, ids[u], p, now=0.5)
        new += out is not None and out.region is not None
        rung = round_a_min(p.a_min_m2, cfg.a_min_step)
        part = parts.get((p.k, rung))
        if part is None:
            part = parts[(p.k, rung)] = build_partition(
                xy[:, 0], xy[:, 1], np.zeros(len(xy)), WORLD, k=p.k, a_min_m2=rung, phase=phase
            )
        leaf = int(part.leaf_of[u])  # type: ignore[attr-defined]
        q = CloakParams(p.k, rung, p.a_max_m2, 0.0)
        old += leaf_region(part, leaf, 0.0).area_m2 < p.a_max_m2 or (  # type: ignore[arg-type]
            shrunk_region(part, leaf, q, 0.0) is not None  # type: ignore[arg-type]
        )
    return old / feasible, new / feasible


def main() -> int:
    t0 = time.perf_counter()
    rows = []
    rng = np.random.default_rng(7)
    xy = rng.uniform(0, 10_000, (4000, 2))
    xy[:800] = rng.normal((3000.0, 3000.0), 25.0, (800, 2))
    xy[800:2800] = rng.normal((7000.0, 6000.0), 600.0, (2000, 2))
    xy = np.clip(xy, 0, 10_000)
    asks = [
        (int(u), CloakParams(int(rng.choice([3, 5, 10, 20])), 2e4, 1e6, 0.0))
        for u in rng.integers(0, 4000, 1500)
    ]
    for phase in np.linspace(0.05, 0.95, 20):
        old, new = _rate(xy, asks, float(phase))
        rows.append({"population": "test_cloak spot+fringe", "phase": float(phase),
                     "without": old, "with": new})  # fmt: skip
    for n in (1000, 2000, 4000):
        for k, a_max in ((10, 1e6), (20, 2e6), (5, 2e5)):
            fx = _fringe(n, seed=n + k)
            every = [(u, CloakParams(k, 2e4, a_max, 0.0)) for u in range(n)]
            for phase in (0.13, 0.41):
                old, new = _rate(fx, every, phase)
                rows.append({"population": f"fringe n={n} k={k} a_max={a_max:g}",
                             "phase": phase, "without": old, "with": new})  # fmt: skip
    print(f"{'population':36s} {'phases':>6s} {'without':>15s} {'with cores':>15s}")
    for pop in dict.fromkeys(r["population"] for r in rows):
        sel = [r for r in rows if r["population"] == pop]
        w0 = [r["without"] for r in sel]
        w1 = [r["with"] for r in sel]
        print(f"{pop:36s} {len(sel):6d} {min(w0):7.4f}-{max(w0):.4f} {min(w1):7.4f}-{max(w1):.4f}")
    seconds = time.perf_counter() - t0
    OUT.write_text(json.dumps({"rows": rows, "seconds": seconds}, indent=1))
    print(f"wrote {OUT} ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
