"""Stays that end together (parties), against historical k-anonymity sessions.

    .venv/bin/python benchmarks/bench_session_parties.py [--quick]

The thin regions of a session trust that at most ``session_slack`` of their members walk out
unseen at one request, and the margins of members who stayed put size that risk as if each
leaves on her own. Parties break the "on her own": here the users who do not ask come in
parties of 1, 3 or 5 that stay, leave, walk and stop together (one draw per party), either
standing together (within 5 m: a meeting, friends) or scattered over 300 m (a shift that ends,
a train that arrives), among 2,000 users on 4 km x 4 km of whom half start in a stay
(heavy-tailed stays, 5-minute walks, fixes every 30 s at each user's phase; walking at 1.4 or
3 m/s; :func:`simulators.attacks.repeated_cloaks_attack` with ``party_size``). 100 askers each,
k = 5, 30 minutes, on every seed, unless a cell says otherwise (1,000 or 4,000 users on the
same square; k = 10 for 60 minutes). Per cell: sessions narrowed below k by the adversary who
knows every position (sum over seeds), the least answered share, and the median area over the
undefended median (mean of the seeds' ratios). The row "no stay margins" gives the members who
stayed put no thinner margin (``session_risk`` 1e-12): if parties still narrow sessions there,
the stay model is not the cause. Prints a table and writes
benchmarks/results/bench_session_parties[_quick].json.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

CELLS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("alone, 1.4 m/s", {"party_size": 1}, {}),
    ("parties of 3 together, 1.4 m/s", {"party_size": 3}, {}),
    ("parties of 5 together, 1.4 m/s", {"party_size": 5}, {}),
    ("parties of 3 over 300 m, 1.4 m/s", {"party_size": 3, "party_m": 300.0}, {}),
    ("parties of 5 over 300 m, 1.4 m/s", {"party_size": 5, "party_m": 300.0}, {}),
    ("alone, 3 m/s", {"party_size": 1, "speed_m_s": 3.0}, {}),
    ("parties of 3 together, 3 m/s", {"party_size": 3, "speed_m_s": 3.0}, {}),
    ("parties of 5 together, 3 m/s", {"party_size": 5, "speed_m_s": 3.0}, {}),
    ("parties of 3 over 300 m, 3 m/s", {"party_size": 3, "party_m": 300.0, "speed_m_s": 3.0}, {}),
    ("parties of 5 over 300 m, 3 m/s", {"party_size": 5, "party_m": 300.0, "speed_m_s": 3.0}, {}),
    (
        "parties of 3 together, 3 m/s, no stay margins",
        {"party_size": 3, "speed_m_s": 3.0},
        {"session_risk": 1e-12},
    ),
    # other densities: the same 4 km x 4 km with half and twice the users
    (
        "1,000 users, parties of 3 together, 3 m/s",
        {"users": 1000, "party_size": 3, "speed_m_s": 3.0},
        {},
    ),
    (
        "4,000 users, parties of 3 together, 3 m/s",
        {"users": 4000, "party_size": 3, "speed_m_s": 3.0},
        {},
    ),
    (
        "4,000 users, parties of 5 over 300 m, 3 m/s",
        {"users": 4000, "party_size": 5, "party_m": 300.0, "speed_m_s": 3.0},
        {},
    ),
    # a larger k over a longer session: the slack is still 2, so parties of 3 can still take
    # more than it out of a set at once
    (
        "k = 10 for 60 min, parties of 3 together, 1.4 m/s",
        {"k": 10, "minutes": 60.0, "party_size": 3},
        {},
    ),
    (
        "k = 10 for 60 min, parties of 3 together, 3 m/s",
        {"k": 10, "minutes": 60.0, "party_size": 3, "speed_m_s": 3.0},
        {},
    ),
    (
        "k = 10 for 60 min, parties of 5 over 300 m, 3 m/s",
        {"k": 10, "minutes": 60.0, "party_size": 5, "party_m": 300.0, "speed_m_s": 3.0},
        {},
    ),
)
"""(name, ``repeated_cloaks_attack`` arguments, session settings changed from the shipped)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds of 40 askers")
    args = ap.parse_args()
    from session_cells import HEADER, play_cell, write_results

    seeds = range(2) if args.quick else range(10)
    askers = 40 if args.quick else 100
    base_kw: dict[str, Any] = {
        "askers": askers,
        "update_s": 30.0,
        "dwell_share": 0.5,
    }
    t0 = time.perf_counter()
    rows: dict[str, Any] = {}
    # the undefended run depends on the population only, not on the session settings: a
    # cell that changes only those reuses it
    undefended: dict[tuple[int, str], Any] = {}
    print(HEADER)
    for name, kw, cloak in CELLS:
        got = play_cell(name, {**base_kw, **kw}, seeds, cloak=cloak, undefended=undefended)
        rows[name] = {"conditions": kw, "cloak": cloak, **got}
    seconds = time.perf_counter() - t0
    print(f"({seconds:.0f} s)")
    defaults = {**base_kw, "k": 5, "users": 2000, "minutes": 30.0, "session_s": 3600.0}
    write_results(
        "bench_session_parties",
        args.quick,
        {"defaults": defaults, "cells": rows, "seconds": seconds},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
