"""Protocol 4 insiders (issue 20): Sybil groups and the steered DS radius, with and without the
defences, on the real PeerMachine and issuer (no network).

    .venv/bin/python benchmarks/bench_insiders.py [--quick]

* Sybil groups - one login answers each of the victim's requests with 40 crafted replies under
  fresh pseudonyms placed to win the least-SSE group; 0, 5, 20 and 50 honest neighbours within
  600 m; k = 5, A 2·10⁴-10⁶ m², σ = 100 m. Without tokens (before) and with tokens required
  (her two genuine tokens, the rest none or copied): share of queries whose group is only hers,
  her mean and largest number of members, failures by reason;
* steering - a colluding DS and Sybils steer the centroid of a static victim over 50 queries
  and estimate her position from the radii DS sees (grid posterior); median error in σ for
  σ = 50, 100, 200 m and 0 or 20 honest neighbours, for the ladder of |centroid − true| used
  before (legacy) and the device's group-only radius (now).

Prints tables and writes benchmarks/results/bench_insiders.json. Deterministic (seeded noise and
place secrets; the Ed25519 pseudonym keys are random but change no outcome).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from simulators.insiders import steering_errors, sybil_groups

OUT = Path(__file__).resolve().parent / "results" / "bench_insiders.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    args = ap.parse_args()
    trials = 20 if args.quick else 100
    victims = 4 if args.quick else 20
    t0 = time.perf_counter()
    result: dict[str, Any] = {"machine": {"python": platform.python_version()}, "quick": args.quick}
    sybil: dict[str, Any] = {}
    print(f"{'honest':>6} {'tokens':>6} {'sybil-only':>10} {'mean/max hers':>14}  failed")
    for honest in (0, 5, 20, 50):
        for tokens in (False, True):
            o = sybil_groups(honest, tokens=tokens, trials=trials, seed=honest)
            sybil[f"{honest}/{'tokens' if tokens else 'none'}"] = {
                "trials": o.trials,
                "sybil_only_share": o.sybil_only_share,
                "mixed": o.mixed,
                "failed": dict(o.failed),
                "attacker_members_mean": o.attacker_members,
                "attacker_members_max": o.max_attacker_members,
            }
            print(
                f"{honest:6d} {tokens!s:>6} {o.sybil_only_share:10.1%}"
                f" {o.attacker_members:8.2f}/{o.max_attacker_members:<5d} {dict(o.failed)}"
            )
    result["sybil_groups"] = sybil
    steering: dict[str, Any] = {}
    print(f"\n{'sigma':>6} {'honest':>6} {'legacy err/σ':>12} {'now err/σ':>10} {'now p10/σ':>10}")
    for sigma in (50.0, 100.0, 200.0):
        for honest in (0, 20):
            legacy = np.array(
                steering_errors(sigma, honest=honest, victims=victims, rule="legacy", seed=1)
            )
            now = np.array(steering_errors(sigma, honest=honest, victims=victims, seed=2))
            steering[f"{sigma:.0f}/{honest}"] = {
                "legacy_median_sigma": float(np.median(legacy) / sigma),
                "now_median_sigma": float(np.median(now) / sigma),
                "now_p10_sigma": float(np.percentile(now, 10) / sigma),
                "victims": victims,
            }
            print(
                f"{sigma:6.0f} {honest:6d} {np.median(legacy) / sigma:12.3f}"
                f" {np.median(now) / sigma:10.3f} {np.percentile(now, 10) / sigma:10.3f}"
            )
    result["steering"] = steering
    result["seconds"] = time.perf_counter() - t0
    print(f"({result['seconds']:.0f} s)")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
