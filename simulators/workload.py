"""Workload: per-user privacy profiles, Poisson query arrivals, a protocol mix (pure, seeded).

A distribution is written in a scenario file as a small table, for example
``k = { dist = "choice", values = [3, 5, 10], weights = [0.3, 0.5, 0.2] }``. Kinds:

=============  ==========================  =========================================
``dist``       keys                        draws
=============  ==========================  =========================================
``const``      ``value``                   always ``value``
``choice``     ``values``, ``weights``?    one of ``values`` (weights normalised)
``uniform``    ``low``, ``high``           uniform on ``[low, high)``
``loguniform`` ``low``, ``high`` (> 0)     ``exp`` of uniform on ``[ln low, ln high)``
``randint``    ``low``, ``high``           integer uniform on ``[low, high]`` inclusive
``normal``     ``mean``, ``sd``, ``low``?,  normal, clipped to ``[low, high]``
               ``high``?
=============  ==========================  =========================================

A bare number is a ``const``. Profiles hold ``k`` (users), ``a_min_m2`` and ``a_max_m2`` (m²;
``a_max_m2`` is raised to at least ``4 * a_min_m2`` so that the window is never empty),
``max_delay_s`` (s) and ``sigma_m`` (Protocol 4 perturbation, metres).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locpriv.core.grouping import DEFAULT_NODE_BUDGET
from locpriv.core.noise import GaussianMechanism
from locpriv.protocols.p4.types import PeerConfig, ResponderPolicy

__all__ = [
    "Distribution",
    "QueryEvent",
    "UserProfile",
    "Workload",
    "WorkloadConfig",
    "draw_profiles",
    "generate_workload",
    "poisson_arrivals",
]

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class Distribution:
    """A scalar distribution from a scenario table (see the module docstring)."""

    kind: str
    params: Mapping[str, Any]

    @classmethod
    def parse(cls, spec: Any) -> Distribution:
        """From a number or a ``{dist = ..., ...}`` table; raises ``ValueError`` when invalid."""
        if isinstance(spec, int | float) and not isinstance(spec, bool):
            return cls("const", {"value": float(spec)})
        if not isinstance(spec, Mapping) or "dist" not in spec:
            raise ValueError(f"a distribution is a number or a table with 'dist': {spec!r}")
        kind = str(spec["dist"])
        params = {k: v for k, v in spec.items() if k != "dist"}
        need = {
            "const": {"value"},
            "choice": {"values"},
            "uniform": {"low", "high"},
            "loguniform": {"low", "high"},
            "randint": {"low", "high"},
            "normal": {"mean", "sd"},
        }
        if kind not in need:
            raise ValueError(f"unknown distribution {kind!r} (one of {sorted(need)})")
        if missing := need[kind] - set(params):
            raise ValueError(f"distribution {kind!r} needs {sorted(missing)}")
        if kind == "loguniform" and not 0 < params["low"] <= params["high"]:
            raise ValueError("loguniform needs 0 < low <= high")
        if kind in ("uniform", "randint") and params["low"] > params["high"]:
            raise ValueError(f"{kind} needs low <= high")
        if kind == "choice" and not params["values"]:
            raise ValueError("choice needs at least one value")
        return cls(kind, params)

    def sample(self, rng: np.random.Generator, n: int) -> F64:
        """``n`` independent draws as floats."""
        p = self.params
        if self.kind == "const":
            return np.full(n, float(p["value"]))
        if self.kind == "choice":
            values = np.asarray(p["values"], dtype=np.float64)
            w = p.get("weights")
            probs = None if w is None else np.asarray(w, float) / float(np.sum(w))
            return np.asarray(rng.choice(values, size=n, p=probs), dtype=np.float64)
        if self.kind == "uniform":
            return rng.uniform(p["low"], p["high"], size=n)
        if self.kind == "loguniform":
            return np.exp(rng.uniform(math.log(p["low"]), math.log(p["high"]), size=n))
        if self.kind == "randint":
            return rng.integers(int(p["low"]), int(p["high"]) + 1, size=n).astype(np.float64)
        out = rng.normal(p["mean"], p["sd"], size=n)
        return np.clip(out, p.get("low", -np.inf), p.get("high", np.inf))

    def mean(self) -> float:
        """The distribution's mean (for documentation and sanity checks)."""
        p = self.params
        if self.kind == "const":
            return float(p["value"])
        if self.kind == "choice":
            w = np.asarray(p.get("weights") or [1.0] * len(p["values"]), float)
            return float(np.dot(np.asarray(p["values"], float), w / w.sum()))
        if self.kind in ("uniform", "randint"):
            return (float(p["low"]) + float(p["high"])) / 2
        if self.kind == "loguniform":
            lo, hi = float(p["low"]), float(p["high"])
            return (hi - lo) / math.log(hi / lo) if hi > lo else lo
        return float(p["mean"])


@dataclass(frozen=True, slots=True)
class UserProfile:
    """One user's privacy parameters: ``k`` users, areas in m², delay in s, noise in m."""

    k: int
    a_min_m2: float
    a_max_m2: float
    max_delay_s: float
    sigma_m: float
    session_s: float = 0.0
    """Historical k-anonymity asked for by this user's cloaks (0: none), s."""

    def peer_config(
        self,
        *,
        cell_side_m: int,
        window_s: float,
        max_rounds: int,
        max_distance_m: float,
        ds_timeout_s: float,
        max_replies: int = 200,
        reuse_radius_m: float = 50.0,
        node_budget: int | None = DEFAULT_NODE_BUDGET,
        keyed_noise: bool = True,
    ) -> PeerConfig:
        """This user's Protocol 4 device configuration (both runners build devices with it):
        Gaussian noise of ``sigma_m`` per axis, at least 2 users, the runner's timings (s) and
        distances (m), at most ``max_replies`` candidates (never fewer than k - 1)."""
        k = max(2, self.k)
        return PeerConfig(
            k=k,
            a_min_m2=self.a_min_m2,
            a_max_m2=self.a_max_m2,
            mechanism=GaussianMechanism(max(self.sigma_m, 1e-6)),
            window_s=window_s,
            max_rounds=max_rounds,
            max_distance_m=max_distance_m,
            cell_side_m=cell_side_m,
            ds_timeout_s=ds_timeout_s,
            reuse_radius_m=reuse_radius_m,
            max_candidates=max(max_replies, k - 1),
            node_budget=node_budget,
            keyed_noise=keyed_noise,
            responder=ResponderPolicy(max_distance_m=max_distance_m),
        )


@dataclass(frozen=True, slots=True)
class QueryEvent:
    """A query of user index ``user`` at ``t_s`` (s): ``n`` nearest POIs of ``category``."""

    t_s: float
    user: int
    protocol: int
    category: str
    n: int


def _default_profile() -> dict[str, Any]:
    return {
        "k": {"dist": "choice", "values": [3, 5, 10], "weights": [0.3, 0.5, 0.2]},
        "a_min_m2": {"dist": "loguniform", "low": 1.0e3, "high": 1.0e4},
        "a_max_m2": {"dist": "loguniform", "low": 1.0e6, "high": 4.0e6},
        "max_delay_s": {"dist": "uniform", "low": 0.0, "high": 5.0},
        "sigma_m": {"dist": "choice", "values": [50.0, 100.0, 200.0]},
        "session_s": {"dist": "const", "value": 0.0},
    }


@dataclass(frozen=True)
class WorkloadConfig:
    """How users query: rate (queries per user per hour), protocol mix, categories, profiles."""

    queries_per_user_per_hour: float = 6.0
    protocol_mix: Mapping[int, float] = field(
        default_factory=lambda: {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}
    )
    categories: Sequence[str] = ("restaurant", "pharmacy", "cafe", "atm")
    nearest_n: Distribution = field(
        default_factory=lambda: Distribution.parse({"dist": "choice", "values": [1, 3, 5]})
    )
    profile: Mapping[str, Distribution] = field(
        default_factory=lambda: {k: Distribution.parse(v) for k, v in _default_profile().items()}
    )
    session_share: float = 0.0
    """Share of the querying users who also ask repeatedly in one session (the intersection
    attack's victims): from a uniform start, every ``session_every_s`` for a uniform
    duration in ``session_minutes``, by protocol 1 or 3 (half each)."""
    session_every_s: float = 60.0
    session_minutes: tuple[float, float] = (30.0, 60.0)

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any]) -> WorkloadConfig:
        """From the ``[workload]`` table of a scenario (every key optional)."""
        known = {
            "queries_per_user_per_hour",
            "protocol_mix",
            "categories",
            "nearest_n",
            "profile",
            "session_share",
            "session_every_s",
            "session_minutes",
        }
        if extra := set(cfg) - known:
            raise ValueError(f"unknown workload key(s) {sorted(extra)}")
        base = cls()
        mix_raw = cfg.get("protocol_mix")
        mix = (
            {int(str(k).lstrip("p")): float(v) for k, v in mix_raw.items()}
            if mix_raw is not None
            else dict(base.protocol_mix)
        )
        if not mix or any(p not in (1, 2, 3, 4) or w < 0 for p, w in mix.items()):
            raise ValueError(f"protocol_mix maps p1..p4 to non-negative weights: {mix_raw!r}")
        if sum(mix.values()) <= 0:
            raise ValueError("protocol_mix weights sum to zero")
        prof_raw = {**_default_profile(), **dict(cfg.get("profile", {}))}
        if extra := set(prof_raw) - set(_default_profile()):
            raise ValueError(f"unknown profile key(s) {sorted(extra)}")
        rate = float(cfg.get("queries_per_user_per_hour", base.queries_per_user_per_hour))
        if rate < 0:
            raise ValueError("queries_per_user_per_hour must be >= 0")
        cats = tuple(str(c) for c in cfg.get("categories", base.categories))
        if not cats:
            raise ValueError("categories must not be empty")
        return cls(
            queries_per_user_per_hour=rate,
            protocol_mix=mix,
            categories=cats,
            nearest_n=Distribution.parse(cfg["nearest_n"])
            if "nearest_n" in cfg
            else base.nearest_n,
            profile={k: Distribution.parse(v) for k, v in prof_raw.items()},
            session_share=float(cfg.get("session_share", base.session_share)),
            session_every_s=float(cfg.get("session_every_s", base.session_every_s)),
            session_minutes=tuple(cfg.get("session_minutes", base.session_minutes)),
        )


@dataclass(frozen=True)
class Workload:
    """Profiles per user index and every query event, sorted by time."""

    profiles: tuple[UserProfile, ...]
    events: tuple[QueryEvent, ...]

    def by_protocol(self) -> dict[int, int]:
        """Number of query events per protocol."""
        out: dict[int, int] = {}
        for e in self.events:
            out[e.protocol] = out.get(e.protocol, 0) + 1
        return dict(sorted(out.items()))


def draw_profiles(
    cfg: Mapping[str, Distribution], n: int, rng: np.random.Generator
) -> tuple[UserProfile, ...]:
    """``n`` profiles; ``k >= 1`` (rounded), ``a_max_m2 >= 4 a_min_m2``, delays and sigma >= 0."""
    k = np.maximum(1, np.rint(cfg["k"].sample(rng, n))).astype(int)
    a_min = np.maximum(cfg["a_min_m2"].sample(rng, n), 0.0)
    a_max = np.maximum(cfg["a_max_m2"].sample(rng, n), 4.0 * a_min + 1.0)
    delay = np.maximum(cfg["max_delay_s"].sample(rng, n), 0.0)
    sigma = np.maximum(cfg["sigma_m"].sample(rng, n), 0.0)
    session = np.maximum(cfg["session_s"].sample(rng, n), 0.0)
    return tuple(
        UserProfile(
            int(k[i]),
            float(a_min[i]),
            float(a_max[i]),
            float(delay[i]),
            float(sigma[i]),
            float(session[i]),
        )
        for i in range(n)
    )


def poisson_arrivals(
    rate_per_s: float, start_s: float, end_s: float, rng: np.random.Generator
) -> F64:
    """Sorted arrival times (s) of a homogeneous Poisson process on ``[start_s, end_s)``."""
    span = end_s - start_s
    if rate_per_s <= 0 or span <= 0:
        return np.empty(0)
    count = int(rng.poisson(rate_per_s * span))
    return np.sort(rng.uniform(start_s, end_s, size=count))


def generate_workload(
    cfg: WorkloadConfig,
    n_users: int,
    duration_s: float,
    rng: np.random.Generator,
    *,
    start_s: float = 0.0,
    querying: NDArray[np.bool_] | None = None,
) -> Workload:
    """Profiles for all users; Poisson queries of the ``querying`` ones in ``[start_s, end)``.

    Each user's queries are an independent Poisson process of rate
    ``queries_per_user_per_hour / 3600`` per second; each query draws its protocol from the mix,
    a uniform category and ``n`` from ``nearest_n``.
    """
    profiles = draw_profiles(cfg.profile, n_users, rng)
    rate = cfg.queries_per_user_per_hour / 3600.0
    protos = np.array(sorted(cfg.protocol_mix), dtype=int)
    weights = np.array([cfg.protocol_mix[p] for p in protos], dtype=float)
    weights /= weights.sum()
    # Superposition of independent per-user Poisson processes: draw the total count, then
    # assign each arrival a uniform user (equivalent in distribution, and vectorised).
    active = np.arange(n_users) if querying is None else np.flatnonzero(querying)
    times = poisson_arrivals(rate * len(active), start_s, duration_s, rng)
    m = len(times)
    users = active[rng.integers(0, len(active), size=m)] if len(active) else np.empty(0, int)
    proto = rng.choice(protos, size=m, p=weights)
    cats = rng.integers(0, len(cfg.categories), size=m)
    ns = np.maximum(1, np.rint(cfg.nearest_n.sample(rng, m))).astype(int)
    events = [
        QueryEvent(
            float(times[i]), int(users[i]), int(proto[i]), cfg.categories[cats[i]], int(ns[i])
        )
        for i in range(m)
    ]
    events += _session_events(cfg, active, start_s, duration_s, rng)
    return Workload(profiles, tuple(sorted(events, key=lambda e: (e.t_s, e.user))))


def _session_events(
    cfg: WorkloadConfig,
    active: NDArray[np.int64],
    start_s: float,
    duration_s: float,
    rng: np.random.Generator,
) -> list[QueryEvent]:
    """Periodic queries of the ``session_share`` of ``active`` users (see WorkloadConfig)."""
    n = round(cfg.session_share * len(active))
    if n <= 0:
        return []
    who = rng.choice(active, size=n, replace=False)
    out: list[QueryEvent] = []
    lo, hi = cfg.session_minutes
    for u in who.tolist():
        span = float(rng.uniform(lo, hi)) * 60.0
        t0 = float(rng.uniform(start_s, max(start_s, duration_s - span)))
        protocol = int(rng.choice([1, 3]))
        category = cfg.categories[int(rng.integers(0, len(cfg.categories)))]
        t = t0
        while t < min(t0 + span, duration_s):
            out.append(QueryEvent(t, int(u), protocol, category, 1))
            t += cfg.session_every_s
    return out
