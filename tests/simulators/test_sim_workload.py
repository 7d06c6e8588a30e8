"""Workload distributions, Poisson arrivals, protocol mix, scenario files and their expansion."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from simulators.scenario import SCENARIO_DIR, build, load_scenario, scenario_from_mapping
from simulators.workload import (
    Distribution,
    WorkloadConfig,
    draw_profiles,
    generate_workload,
    poisson_arrivals,
)


def test_distributions_draw_within_their_support() -> None:
    rng = np.random.default_rng(0)
    assert Distribution.parse(5).sample(rng, 3).tolist() == [5.0, 5.0, 5.0]
    v = Distribution.parse({"dist": "choice", "values": [3, 5], "weights": [1, 0]}).sample(rng, 50)
    assert set(v.tolist()) == {3.0}
    lu = Distribution.parse({"dist": "loguniform", "low": 10, "high": 1000}).sample(rng, 1000)
    assert lu.min() >= 10 and lu.max() < 1000 and 100 < np.median(lu) < 250  # geometric median
    ri = Distribution.parse({"dist": "randint", "low": 2, "high": 4}).sample(rng, 200)
    assert set(ri.tolist()) == {2.0, 3.0, 4.0}
    nm = Distribution.parse({"dist": "normal", "mean": 0, "sd": 10, "low": -1, "high": 1})
    assert np.all(np.abs(nm.sample(rng, 100)) <= 1)
    assert Distribution.parse({"dist": "uniform", "low": 2, "high": 4}).mean() == 3.0


@pytest.mark.parametrize(
    "spec",
    [{"dist": "nope"}, {"dist": "uniform", "low": 1}, {"dist": "loguniform", "low": 0, "high": 1}],
)
def test_bad_distributions_are_rejected(spec: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Distribution.parse(spec)


def test_poisson_arrival_count_matches_the_rate() -> None:
    rng = np.random.default_rng(1)
    counts = [len(poisson_arrivals(2.0, 0.0, 100.0, rng)) for _ in range(200)]
    assert abs(np.mean(counts) - 200.0) < 5.0  # mean rate*T = 200, se ~1
    t = poisson_arrivals(2.0, 10.0, 20.0, rng)
    assert np.all(np.diff(t) >= 0) and t.min() >= 10 and t.max() < 20


def test_workload_mix_profiles_and_determinism() -> None:
    cfg = WorkloadConfig.from_mapping(
        {"queries_per_user_per_hour": 360.0, "protocol_mix": {"p1": 1.0, "p3": 3.0}}
    )
    w = generate_workload(cfg, 100, 600.0, np.random.default_rng(5))
    again = generate_workload(cfg, 100, 600.0, np.random.default_rng(5))
    assert w == again
    n = len(w.events)
    assert abs(n - 6000) < 300  # 100 users x 360/h x 600 s
    mix = w.by_protocol()
    assert set(mix) == {1, 3} and 0.7 < mix[3] / n < 0.8
    assert all(a.t_s <= b.t_s for a, b in itertools.pairwise(w.events))
    for p in w.profiles:
        assert p.k >= 1 and p.a_max_m2 >= 4 * p.a_min_m2 and p.max_delay_s >= 0


def test_profiles_keep_the_area_window_open() -> None:
    dists = WorkloadConfig.from_mapping(
        {"profile": {"a_min_m2": 1e6, "a_max_m2": 1e5}}
    ).profile  # a_max below a_min on purpose
    for p in draw_profiles(dists, 20, np.random.default_rng(0)):
        assert p.a_max_m2 > p.a_min_m2


def test_workload_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="unknown workload"):
        WorkloadConfig.from_mapping({"rate": 3})
    with pytest.raises(ValueError, match="protocol_mix"):
        WorkloadConfig.from_mapping({"protocol_mix": {"p7": 1.0}})


@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_bundled_scenarios_parse(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.users >= 1 and sc.duration_s > 0 and sc.seed >= 0


def test_scenario_expansion_is_deterministic_and_respects_the_static_fraction() -> None:
    sc = load_scenario("demo").replace(users=200, duration_s=20.0)
    a, b = build(sc), build(sc)
    assert np.array_equal(a.trajectories.x_m, b.trajectories.x_m)
    assert a.workload == b.workload and a.protocol_seed == b.protocol_seed
    assert a.trajectories.n_users == 200 and int(a.trajectories.static.sum()) == 60
    c = build(sc.replace(seed=sc.seed + 1))
    assert not np.array_equal(a.trajectories.x_m, c.trajectories.x_m)


def test_trace_scenario_adds_static_users_to_the_trace() -> None:
    built = build(load_scenario("trace_tiny"))
    ids = built.trajectories.user_ids
    assert sum(u.startswith("walker") for u in ids) == 9
    assert sum(u.startswith("static") for u in ids) == 3


def test_scenario_rejects_unknown_keys_and_models() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        scenario_from_mapping({"userz": 3})
    with pytest.raises(ValueError, match=r"mobility\.model"):
        scenario_from_mapping({"mobility": {"model": "teleport"}})
    sc = load_scenario("demo")
    with pytest.raises(ValueError):
        dataclasses.replace(sc, static_fraction=1.5)
