"""Evaluation of a run: privacy and utility per protocol from per-query records (pure).

Runners (:mod:`simulators.fleet` on a real broker, :mod:`simulators.virtual` on a virtual clock)
fill one :class:`QueryRecord` per query; :func:`summarize` turns them into the metrics below,
per protocol and for all queries. Positions are local metres, areas m², times s.

=============================  ===================================================================
metric                         definition
=============================  ===================================================================
``success_rate``               answered queries / issued queries (errors and timeouts fail)
``anon_latency_s``             p50/p95/p99 of request -> anonymised location (cloak reply, P4 group)
``e2e_latency_s``              p50/p95/p99 of request -> final answer at the user
``k_ratio``                    achieved k (users truly inside at answer time) / requested k
                               (mean, min, fraction below 1); ``k_reported_ratio`` likewise
                               with the service's own count (from reported positions)
``area_m2``                    cloak area quantiles; ``below_a_min`` / ``above_a_max`` fractions
``temporal_delay_s``           mean and p95 of the time a request was held (``t2`` - request)
``precision``, ``recall``      of the answer against the ``n`` nearest POIs at the exact location
``ds_error_m``                 distance from the true location to the location DS saw (point,
                               region centroid or group centroid), mean and p95
``messages_per_query``         wire messages (all hops) per query; ``bytes_per_query`` likewise
``adversary_error_m``          the adversary's expected error (Shokri et al. 2011), mean and p50
=============================  ===================================================================

The adversary's expected error is ``E[d(x_hat, x)] = sum_x' P(x' | o) d(x', x)`` for the posterior
``P(. | o)`` given the observation ``o``. For a cloaked region (P1, P3) two estimators are
reported: uniform over the users inside the region at that time (:func:`expected_error_uniform`)
and the region centroid; for P4 the DS-side adversary sees the group centroid and a peer sees the
perturbed location; for P2 DS sees the exact point (error 0, the protection is unlinkability).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "QueryRecord",
    "RunStats",
    "expected_error_uniform",
    "precision_recall",
    "quantiles",
    "summarize",
    "write_json",
]

F64 = NDArray[np.float64]


@dataclass(slots=True)
class QueryRecord:
    """What happened to one query. ``None`` means "not applicable" or "not observed"."""

    protocol: int
    user: int
    t_request_s: float
    k_requested: int
    a_min_m2: float
    a_max_m2: float
    ok: bool = False
    error: str | None = None
    t_anon_s: float | None = None
    """When the anonymised location (cloak reply, P4 group) was available, s."""
    t_answer_s: float | None = None
    """When the final answer reached the user, s."""
    k_achieved: int | None = None
    """Users truly inside the region (ground truth, requester included only when inside it)."""
    k_reported: int | None = None
    """The service's own count (P3 ``CloakReply.users``, the virtual cloaker's count)."""
    area_m2: float | None = None
    held_s: float | None = None
    """Temporal cloaking: how long the request was held (t2 of the interval - request time), s."""
    precision: float | None = None
    recall: float | None = None
    ds_error_m: float | None = None
    adversary_error_m: float | None = None
    """Expected error of the main adversary (uniform over region users; P4 centroid), m."""
    adversary_centroid_error_m: float | None = None
    """Error of the region-centroid estimate (P1, P3) or of a peer's perturbed view (P4), m."""
    messages: int = 0
    bytes: int = 0
    inside: frozenset[int] | None = None
    """Users truly inside the region (indices), for the intersection attack."""
    region_xy: tuple[tuple[float, float], ...] | None = None
    """The answered region (P1, P3): its ring in the scenario's metres, for the map."""
    region_rings_xy: tuple[tuple[tuple[float, float], ...], ...] | None = None
    """A session's region of tiles (P1, P3): the outer ring of each polygon of their union,
    in the scenario's metres, for the map (``region_xy`` is then None)."""
    group_xyr: tuple[float, float, float] | None = None
    """Protocol 4: the centroid sent to DS and its radius, metres, for the map."""


@dataclass
class RunStats:
    """Run-wide counters from the runner (wall or virtual seconds)."""

    duration_s: float
    users: int
    location_updates: int = 0
    messages: int = 0
    bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def precision_recall(answer: Iterable[str], exact: Iterable[str]) -> tuple[float, float]:
    """Precision and recall of an answer's POI ids against the exact answer's ids.

    An empty answer has precision 1 (nothing wrong was returned); an empty exact answer has
    recall 1. Both empty: ``(1.0, 1.0)``.
    """
    a, e = set(answer), set(exact)
    hit = len(a & e)
    return (hit / len(a) if a else 1.0, hit / len(e) if e else 1.0)


def expected_error_uniform(true_xy: Sequence[float], candidates_xy: ArrayLike) -> float:
    """Expected distance (m) between ``true_xy`` and a uniform draw over ``candidates_xy`` (M, 2).

    The adversary's posterior is uniform over the candidates (for example every user inside a
    cloak, the requester included); the expected error is the mean distance to the truth.
    """
    c = np.asarray(candidates_xy, dtype=np.float64).reshape(-1, 2)
    if len(c) == 0:
        raise ValueError("no candidates")
    return float(np.mean(np.hypot(c[:, 0] - true_xy[0], c[:, 1] - true_xy[1])))


def region_truth(
    rec: QueryRecord,
    poly: Any,
    xy: Sequence[float],
    positions: tuple[NDArray[np.float64], NDArray[np.float64]],
    user: int,
) -> int:
    """Score a cloaked region (``poly``, a shapely polygon in local metres) against the truth.

    Fills ``rec.ds_error_m`` and ``rec.adversary_centroid_error_m`` (centroid to the true
    position ``xy``) and ``rec.adversary_error_m`` (:func:`expected_error_uniform` over the users
    truly inside plus the requester ``user`` at ``xy``). Returns how many of the users at
    ``positions`` (x and y arrays, metres) are inside, the boundary included with a 1e-6 m
    slack: the WGS84 round trip of the wire moves a boundary by ~1e-10 m, and simulated users
    walk on grid lines.
    """
    import shapely

    eps = 1e-6
    xs, ys = positions
    c = poly.centroid
    rec.ds_error_m = math.hypot(c.x - xy[0], c.y - xy[1])
    rec.adversary_centroid_error_m = rec.ds_error_m
    x0, y0, x1, y1 = poly.bounds
    inside = (xs >= x0 - eps) & (xs <= x1 + eps) & (ys >= y0 - eps) & (ys <= y1 + eps)
    near = np.flatnonzero(inside)
    inside[near] = shapely.intersects_xy(poly.buffer(eps), xs[near], ys[near])
    n_inside = int(inside.sum())
    rec.inside = frozenset(np.flatnonzero(inside).tolist())
    inside[user] = False  # the requester is added once, at her true position
    cand = np.vstack([np.column_stack([xs[inside], ys[inside]]), np.asarray([xy])])
    rec.adversary_error_m = expected_error_uniform(xy, cand)
    return n_inside


def quantiles(values: Iterable[float | None], qs: Sequence[float] = (50, 95, 99)) -> dict[str, Any]:
    """``{"n", "mean", "p50", ...}`` of the non-``None`` values (``None`` entries when empty)."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    out: dict[str, Any] = {"n": len(v)}
    if len(v) == 0:
        out["mean"] = None
        out.update({f"p{q:g}": None for q in qs})
        return out
    out["mean"] = float(v.mean())
    out.update({f"p{q:g}": float(np.percentile(v, q)) for q in qs})
    return out


def _ratio(ratios: Sequence[float]) -> dict[str, float | None]:
    return {
        "mean": float(np.mean(ratios)) if ratios else None,
        "min": float(np.min(ratios)) if ratios else None,
        "below_1": sum(x < 1 for x in ratios) / len(ratios) if ratios else None,
    }


def _metrics(recs: Sequence[QueryRecord], duration_s: float) -> dict[str, Any]:
    n = len(recs)
    ok = [r for r in recs if r.ok]
    anon = [r.t_anon_s - r.t_request_s for r in ok if r.t_anon_s is not None]
    e2e = [r.t_answer_s - r.t_request_s for r in ok if r.t_answer_s is not None]
    ratios = [r.k_achieved / r.k_requested for r in ok if r.k_achieved is not None]
    areas = [r for r in ok if r.area_m2 is not None]
    errors: dict[str, int] = {}
    for r in recs:
        if not r.ok:
            key = r.error or "unknown"
            errors[key] = errors.get(key, 0) + 1
    return {
        "queries": n,
        "answered": len(ok),
        "queries_per_s": n / duration_s if duration_s > 0 else None,
        "success_rate": len(ok) / n if n else None,
        "errors": dict(sorted(errors.items())),
        "anon_latency_s": quantiles(anon),
        "e2e_latency_s": quantiles(e2e),
        "k_ratio": _ratio(ratios),
        "k_reported_ratio": _ratio(
            [r.k_reported / r.k_requested for r in ok if r.k_reported is not None]
        ),
        "area_m2": {
            **quantiles([r.area_m2 for r in areas], (5, 50, 95)),
            "below_a_min": (
                sum(r.area_m2 <= r.a_min_m2 for r in areas if r.area_m2 is not None) / len(areas)
                if areas
                else None
            ),
            "above_a_max": (
                sum(r.area_m2 >= r.a_max_m2 for r in areas if r.area_m2 is not None) / len(areas)
                if areas
                else None
            ),
        },
        "temporal_delay_s": quantiles([r.held_s for r in ok], (50, 95)),
        "precision": quantiles([r.precision for r in ok], (50,))["mean"],
        "recall": quantiles([r.recall for r in ok], (50,))["mean"],
        "ds_error_m": quantiles([r.ds_error_m for r in ok], (50, 95)),
        "adversary_error_m": quantiles([r.adversary_error_m for r in ok], (50, 95)),
        "adversary_centroid_error_m": quantiles(
            [r.adversary_centroid_error_m for r in ok], (50, 95)
        ),
        "messages_per_query": float(np.mean([r.messages for r in recs])) if n else None,
        "bytes_per_query": float(np.mean([r.bytes for r in recs])) if n else None,
    }


def summarize(records: Sequence[QueryRecord], stats: RunStats) -> dict[str, Any]:
    """Metrics per protocol (keys ``"p1"`` ... ``"p4"``) and ``"all"``, plus the run counters."""
    by: dict[int, list[QueryRecord]] = {}
    for r in records:
        by.setdefault(r.protocol, []).append(r)
    out: dict[str, Any] = {
        "run": asdict(stats),
        "protocols": {f"p{p}": _metrics(rs, stats.duration_s) for p, rs in sorted(by.items())},
        "all": _metrics(records, stats.duration_s),
        "attacks": {"intersection": intersection_by_user(records)},
    }
    return out


def region_sessions(records: Sequence[QueryRecord]) -> dict[int, list[QueryRecord]]:
    """Per user who was answered at least five regions (P1, P3) in the run, those answers in
    time order: the sessions the intersection attack plays."""
    by_user: dict[int, list[QueryRecord]] = {}
    for r in records:
        if r.ok and r.protocol in (1, 3) and r.inside is not None:
            by_user.setdefault(r.user, []).append(r)
    return {
        user: sorted(rs, key=lambda r: r.t_request_s)
        for user, rs in by_user.items()
        if len(rs) >= 5
    }


def intersection_by_user(records: Sequence[QueryRecord]) -> dict[str, Any]:
    """The intersection attack on users who asked for several regions (P1, P3) in the run:
    each user's answered regions, in time order, are one session (:func:`region_sessions`);
    see :func:`simulators.attacks.intersection_attack`. Also the median area paid."""
    from simulators.attacks import intersection_attack

    sessions = list(region_sessions(records).values())
    result: dict[str, Any] = intersection_attack(
        [[r.inside for r in rs if r.inside is not None] for rs in sessions],
        [rs[0].k_requested for rs in sessions],
    )
    areas = [r.area_m2 for rs in sessions for r in rs if r.area_m2 is not None]
    result["area_m2_median"] = float(np.median(areas)) if areas else None
    return result


def write_json(summary: dict[str, Any], path: str | Path) -> None:
    """Write a summary as indented JSON (non-finite numbers become ``null``)."""

    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [clean(v) for v in o]
        if isinstance(o, np.generic):
            return clean(o.item())
        return o

    Path(path).write_text(json.dumps(clean(summary), indent=2) + "\n", encoding="utf-8")
