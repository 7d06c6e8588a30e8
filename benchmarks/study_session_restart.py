"""The intersection attack across an anonymizer restart, sessions carried over or forgotten.

Twelve askers ask every 60 s in 10-minute sessions (k = 5) among random walkers who report
every 10 s; the cloaker is replaced by a fresh one at minute 5, carrying its sessions over
(``export_sessions`` / ``restore_sessions``: what ``[state] sessions_file`` holds after the last
answer, so a crash then carries the same) or not. Per setting: each asker's intersection of
the users inside all her regions (the attacker knows every position), and the share below k.
The set-up is ``tests/test_session_restart.py``'s.

    .venv/bin/python benchmarks/study_session_restart.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_session_restart import _sessions_across_a_restart  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "study_session_restart.json"
K = 5


def main() -> int:
    t0 = time.perf_counter()
    rows = []
    print(f"{'walkers':>7s} {'m/s':>4s} {'seed':>4s} {'carried: min, below k':>22s} "
          f"{'forgotten: min, below k':>24s}")  # fmt: skip
    for n, speed in ((600, 1.4), (1500, 1.4), (1500, 0.5)):
        for seed in (0, 1):
            kept, _ = _sessions_across_a_restart(n, speed, seed, carry=True, k=K)
            lost, _ = _sessions_across_a_restart(n, speed, seed, carry=False, k=K)
            rows.append({"walkers": n, "speed_m_s": speed, "seed": seed})
            rows[-1] |= {"carried": kept, "forgotten": lost}
            below = [sum(s < K for s in v) / len(v) for v in (kept, lost)]
            print(f"{n:7d} {speed:4.1f} {seed:4d} {min(kept):10d} {below[0]:10.0%} "
                  f"{min(lost):11d} {below[1]:11.0%}")  # fmt: skip
    seconds = time.perf_counter() - t0
    OUT.write_text(json.dumps({"k": K, "rows": rows, "seconds": seconds}, indent=1))
    print(f"wrote {OUT} ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
