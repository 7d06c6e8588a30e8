"""Cells of the intersection attack on sessions over walk seeds, for the session benchmarks
(``bench_session_parties.py``, ``bench_session_accuracy.py``): each cell plays
:func:`simulators.attacks.repeated_cloaks_attack` undefended and with sessions on every seed,
prints one row and gives what the results file keeps. Not a benchmark itself (``run_all``
runs ``bench_*`` only).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

HEADER = f"{'cell':52} {'narrowed by seed':>20} {'in all':>12} {'answered':>9} {'area ratio':>11}"
"""The header of the rows :func:`play_cell` prints."""


def play_cell(
    name: str,
    kw: Mapping[str, Any],
    seeds: Iterable[int],
    *,
    cloak: Mapping[str, Any] | None = None,
    session: Mapping[str, Any] | None = None,
    undefended: dict[tuple[int, str], Any] | None = None,
) -> dict[str, Any]:
    """One cell: ``repeated_cloaks_attack(**kw)`` on each seed, undefended (``session_s`` 0)
    and with hour-long sessions (``cloak``: session settings changed from the shipped;
    ``session``: arguments of the defended run only, such as ``fix_reply_s``). Per seed, the
    sessions, those narrowed below k by the adversary who knows every position, the answered
    share and the median areas; in all, the narrowed sum, the least answered share and the
    mean of the seeds' area ratios (defended over undefended median). ``undefended`` caches
    the undefended runs by seed and ``kw`` (they do not depend on the session settings).
    Prints the cell's row under :data:`HEADER`."""
    from simulators.attacks import repeated_cloaks_attack

    cache = {} if undefended is None else undefended
    per_seed = []
    for s in seeds:
        key = (s, json.dumps(kw, sort_keys=True))
        if key not in cache:
            cache[key] = repeated_cloaks_attack(session_s=0.0, seed=s, **kw)
        before = cache[key]
        after = repeated_cloaks_attack(
            session_s=3600.0, seed=s, cloak=dict(cloak or {}), **kw, **(session or {})
        )
        per_seed.append(
            {
                "seed": s,
                "sessions": after.sessions,
                "narrowed": round(after.success_rate * after.sessions),
                "undefended_success_rate": before.success_rate,
                "answered_rate": after.answered_rate,
                "area_m2_median": after.area_m2_median,
                "undefended_area_m2_median": before.area_m2_median,
                "area_ratio": after.area_m2_median / before.area_m2_median,
            }
        )
    narrowed = sum(r["narrowed"] for r in per_seed)
    sessions = sum(r["sessions"] for r in per_seed)
    answered = min(r["answered_rate"] for r in per_seed)
    ratio = sum(r["area_ratio"] for r in per_seed) / len(per_seed)
    by_seed = "/".join(str(r["narrowed"]) for r in per_seed)
    print(
        f"{name:52} {by_seed:>20} {f'{narrowed} of {sessions}':>12} {answered:9.1%} {ratio:10.2f}x",
        flush=True,
    )
    return {
        "narrowed": narrowed,
        "sessions": sessions,
        "answered_min": answered,
        "area_ratio_mean": ratio,
        "seeds": per_seed,
    }


def write_results(name: str, quick: bool, result: Mapping[str, Any]) -> Path:
    """Write ``result`` (with the machine and ``quick``) to
    ``benchmarks/results/<name>[_quick].json``; returns the path."""
    out = RESULTS / f"{name}{'_quick' if quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"machine": platform.platform(), "quick": quick, **result}
    out.write_text(json.dumps(body, indent=2) + "\n")
    return out
