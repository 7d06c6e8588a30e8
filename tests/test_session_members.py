"""Historical k-anonymity sessions (issue 22): who a session keeps, what it costs, and what the
intersection attack gets, over densities, speeds and mobility; the knobs through the operator's
config file. Every test attacks the regions the cloaker returns (users truly inside each of a
requester's successive regions, intersected) rather than inspecting the code.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from _box_sessions import ONE_BOX, box

from locpriv.config import load_config
from locpriv.core.cloak.cloaker import Cloaker, CloakParams
from locpriv.core.cloak.types import CloakConfig
from locpriv.errors import ConfigError
from simulators.attacks import repeated_cloaks_attack, session_area_bound

"""Sessions of one box per region (``session_tile_factor = 0``); regions of tiles, the default
since 2026-12-06, are tested in tests/test_session_tiles.py."""


@pytest.mark.parametrize(
    "conditions",
    [
        {"users": 1000},
        {"users": 4000},
        {"speed_m_s": 0.7},
        {"speed_m_s": 3.0},
        {"k": 10, "minutes": 60.0},
        {"update_s": 30.0},
        {"update_s": 30.0, "users": 4000},
        {"update_s": 30.0, "speed_m_s": 3.0},
        {"update_s": 30.0, "k": 10, "minutes": 60.0},
    ],
    ids=[
        "sparse",
        "dense",
        "slow",
        "fast",
        "k10-60min",
        "stale",
        "stale-dense",
        "stale-fast",
        "stale-k10-60min",
    ],
)
def test_sessions_hold_k_over_densities_and_speeds(conditions: dict[str, float]) -> None:
    """Random walkers at several densities, speeds, k and session lengths, reporting at each
    request or (``stale``) every 30 s at their own phase while turning at random every
    minute, so that a member's fix is up to 30 s old and she may have turned since (what the
    thin margins around dead-reckoned positions, the slack and the self-audit must absorb):
    with sessions no asker is narrowed below k, and (nearly) every request is answered. The
    area paid grows with how far members walk apart (docs/algorithms.md)."""
    kw = {key: (int(val) if key in ("users", "k") else val) for key, val in conditions.items()}
    before = repeated_cloaks_attack(session_s=0.0, askers=40, **kw, cloak=box())  # type: ignore[arg-type]
    after = repeated_cloaks_attack(session_s=3600.0, askers=40, **kw, cloak=box())  # type: ignore[arg-type]
    assert before.success_rate >= 0.5  # the attack works on one-shot cloaks
    assert after.success_rate <= 0.01
    assert after.answered_rate >= 0.95
    assert after.area_m2_median > before.area_m2_median


@pytest.mark.parametrize(
    "conditions",
    [{}, {"users": 4000}, {"speed_m_s": 3.0}, {"k": 10, "minutes": 60.0}],
    ids=["default", "dense", "fast", "k10-60min"],
)
def test_sessions_on_random_walkers_cost_less_than_committing_to_the_nearest_k(
    conditions: dict[str, float],
) -> None:
    """Random walkers (headings drawn afresh every minute, fixes at every request), where
    the shipped sessions pay more than 5x but for the default: the oracle told every present
    position, committing at a session's first request to the k - 1 nearest, with 20 m margins
    and no grid, pays more than the shipped sessions, whose set starts larger and shrinks as
    the walks unfold; the oracle that knows the future and chooses by the joint box pays less
    (bench_privacy's conditions, 100 askers: online 6.2x/10.4x/19.9x/9.1x, shipped
    4.4x/7.5x/14.3x/6.9x, joint box 1.9x/3.1x/4.8x/2.7x)."""
    kw = {key: (int(val) if key in ("users", "k") else val) for key, val in conditions.items()}
    before = repeated_cloaks_attack(
        session_s=0.0, askers=40, oracle_margin_m=20.0, **kw, cloak=box()
    )  # type: ignore[arg-type]
    after = repeated_cloaks_attack(session_s=3600.0, askers=40, **kw, cloak=box())  # type: ignore[arg-type]
    assert after.success_rate <= 0.01 and after.answered_rate >= 0.95
    assert after.area_m2_median < before.oracle_online_area_m2_median
    assert before.oracle_joint_area_m2_median <= before.oracle_area_m2_median
    assert before.oracle_joint_area_m2_median < after.area_m2_median


def test_adopted_bystanders_and_thin_margins_cost_less_than_the_group_alone() -> None:
    """With fixes up to 30 s old, the previous design (the set is the first region's group,
    every member kept off the edges by 3 m/s x age, up to 93 m) against the defaults (everyone
    the first region covers joins the set; regions of k + 2 members placed where their
    velocities carry them, margins of 5 m + 1 m/s x age, self-audit): a third less area, and
    still no session narrowed below k (measured 9.8x -> 6.5x, 100 askers)."""
    before = repeated_cloaks_attack(
        session_s=600.0,
        askers=40,
        update_s=30.0,
        cloak=box({"session_slack": 0, "session_adopt": False}),
    )
    now = repeated_cloaks_attack(session_s=600.0, askers=40, update_s=30.0, cloak=box())
    assert before.success_rate <= 0.01 and now.success_rate <= 0.01
    assert now.answered_rate >= 0.95
    assert now.area_m2_median <= 0.8 * before.area_m2_median


def test_the_attack_finds_regions_whose_thin_margins_are_too_thin() -> None:
    """The stale-fix attack is not vacuous: with no thin margin at all (members boxed exactly
    at their dead-reckoned positions) and a slack of one, 4,000 walkers who turn between fixes
    narrow sessions below k (9 of 200 sessions on two seeds with members ranked each by her
    own distance; the joint-box ranking, which keeps compact sets, leaves 3 of 200 and 5 of
    400 on four seeds narrowed, too few to tell the attack's power, so this test ranks by
    distance, and, like the joint box, the 32k candidates of the defaults keep sets compact
    enough that the bare margins narrow 1 of 200, so it takes its first members among 16k);
    the defaults (5 m + 1 m/s x age, slack 2) narrow none."""
    bare = {
        "session_slack": 1,
        "session_drift_m_s": 0.0,
        "session_floor_m": 0.0,
        "session_joint_box": False,
        "session_candidate_factor": 16,
    }
    kw = {"session_s": 600.0, "askers": 100, "update_s": 30.0, "users": 4000}
    narrowed = sum(
        repeated_cloaks_attack(cloak=box(bare), seed=seed, **kw).success_rate * 100
        for seed in (1, 3)
    )
    assert narrowed >= 4  # of 200 sessions
    ok = repeated_cloaks_attack(seed=1, **kw, cloak=box())
    assert ok.success_rate <= 0.01


def test_rekeying_sessions_is_measured_as_the_risk_it_is() -> None:
    """Restarting a session with fresh members when its region grows (``session_rekey_factor``)
    lets an adversary who links the requester's requests across the restart narrow nearly
    every session below k, and does not even buy smaller regions (each restart pays a first
    region over a whole group again): why it is off by default."""
    base = repeated_cloaks_attack(session_s=600.0, askers=40, cloak=box())
    rekeyed = repeated_cloaks_attack(
        session_s=600.0, askers=40, cloak=box({"session_rekey_factor": 3.0})
    )
    assert base.success_rate <= 0.01
    assert rekeyed.success_rate >= 0.5
    assert rekeyed.answered_rate >= base.answered_rate


def test_session_knobs_from_the_config_file(tmp_path: Path) -> None:
    """The [cloak] session keys reach the cloaker; bad values are refused naming the key."""
    shipped = load_config(Path(__file__).parents[1] / "deploy" / "locpriv.toml").cloak_config()
    assert shipped.session_rekey_factor == 0.0 and shipped.session_keep_bystanders
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    unset = load_config(empty).cloak_config()
    # the shipped file sets every session key to the core's default, as an empty file does
    for f in dataclasses.fields(CloakConfig):
        if f.name.startswith("session_"):
            assert getattr(shipped, f.name) == f.default == getattr(unset, f.name), f.name
    path = tmp_path / "locpriv.toml"
    path.write_text(
        "[cloak]\nsession_candidate_factor = 6\nsession_horizon_s = 0.0\n"
        "session_keep_bystanders = false\nsession_speed_m_s = 2.0\n"
        "session_pool_factor = 3\nsession_shrink_requests = 5\n"
        "session_slack = 1\nsession_drift_m_s = 0.5\nsession_floor_m = 8.0\n"
        "session_adopt = false\nsession_forecast_s = 120.0\nsession_risk = 0.001\n"
        "session_joint_box = false\nsession_requester_quantile = 0.5\n"
        "session_speed_factor = 2.0\nsession_spare = 0\nsession_spare_fast_users = 7\n"
    )
    cfg = load_config(path).cloak_config()
    assert (cfg.session_candidate_factor, cfg.session_horizon_s) == (6, 0.0)
    assert (cfg.session_pool_factor, cfg.session_shrink_requests) == (3, 5)
    assert not cfg.session_keep_bystanders and cfg.session_speed_m_s == 2.0
    assert (cfg.session_slack, cfg.session_drift_m_s, cfg.session_floor_m) == (1, 0.5, 8.0)
    assert not cfg.session_adopt
    assert (cfg.session_forecast_s, cfg.session_risk) == (120.0, 0.001)
    assert not cfg.session_joint_box and shipped.session_joint_box
    assert cfg.session_requester_quantile == 0.5
    assert (cfg.session_speed_factor, cfg.session_spare) == (2.0, 0)
    assert cfg.session_spare_fast_users == 7 and shipped.session_spare_fast_users == 1
    assert shipped.session_requester_quantile == "draw" == CloakConfig().session_requester_quantile
    assert (shipped.session_forecast_s, shipped.session_risk) == (
        CloakConfig().session_forecast_s,
        CloakConfig().session_risk,
    )
    assert shipped.session_slack == CloakConfig().session_slack and shipped.session_adopt
    # the loaded configuration runs the attack: sessions still hold k
    cloak = {
        f: getattr(cfg, f)
        for f in (
            "session_candidate_factor",
            "session_horizon_s",
            "session_keep_bystanders",
            "session_speed_m_s",
            "session_pool_factor",
            "session_shrink_requests",
            "session_slack",
            "session_drift_m_s",
            "session_floor_m",
            "session_adopt",
            "session_forecast_s",
            "session_risk",
            "session_joint_box",
            "session_requester_quantile",
            "session_speed_factor",
            "session_spare",
            "session_spare_fast_users",
        )
    }
    r = repeated_cloaks_attack(session_s=600.0, askers=20, cloak=box(cloak))
    assert r.success_rate <= 0.01 and r.answered_rate >= 0.95
    for bad in (
        "session_candidate_factor = 0",
        "session_horizon_s = -1.0",
        "session_rekey_factor = -2.0",
        "session_shrink_requests = 0",
        "session_keep_bystanders = 3",
        "session_slack = -1",
        "session_floor_m = -5.0",
        "session_adopt = 2",
        "session_forecast_s = -1.0",
        "session_risk = 0.0",
        "session_risk = 1.0",
        "session_joint_box = 3",
        "session_requester_quantile = 1.5",
        "session_requester_quantile = -0.1",
        'session_requester_quantile = "median"',
        "session_requester_quantile = true",
        "session_speed_factor = -1.0",
        "session_spare = -1",
        "session_spare_fast_users = -1",
        "session_spare_fast_users = 0.5",
    ):
        path.write_text(f"[cloak]\n{bad}\n")
        with pytest.raises(ConfigError, match=rf"cloak\.{bad.split()[0]}"):
            load_config(path)
    with pytest.raises(ConfigError, match="session_horizon_s"):
        CloakConfig(session_horizon_s=float("nan"))
    with pytest.raises(ConfigError, match="session_slack"):
        CloakConfig(session_slack=-1)
    with pytest.raises(ConfigError, match="session_forecast_s"):
        CloakConfig(session_forecast_s=-1.0)
    with pytest.raises(ConfigError, match="session_spare_fast_users"):
        CloakConfig(session_spare_fast_users=-1)
    with pytest.raises(ConfigError, match="session_speed_factor"):
        CloakConfig(session_speed_factor=-1.0)
    for risk in (0.0, 1.0, float("nan")):
        with pytest.raises(ConfigError, match="session_risk"):
            CloakConfig(session_risk=risk)
    for q in (-0.1, 1.5, float("nan"), "median", True):
        with pytest.raises(ConfigError, match="session_requester_quantile"):
            CloakConfig(session_requester_quantile=q)  # type: ignore[arg-type]


def test_an_operator_default_gives_profile_less_requests_sessions(tmp_path: Path) -> None:
    """``[cloak] default_session_s`` (shipped 1,800 s since 2026-12-06; the library's own
    default stays 0) reaches the requests that carry no profile:
    with 600 s, a user who asks three times without one keeps the same users in all her
    regions (the intersection holds k), as a profile with ``session_s`` would; with 0 her
    regions are one-shot. A default beyond ``session_s_bound`` is refused naming its key."""
    shipped = load_config(Path(__file__).parents[1] / "deploy" / "locpriv.toml").cloak_config()
    assert shipped.default.session_s == 1800.0 and CloakConfig().default.session_s == 0.0
    assert load_config(None).cloak_config().default.session_s == 1800.0  # embedded defaults
    path = tmp_path / "locpriv.toml"
    base = "[cloak]\ndefault_k = 5\nworld_half_m = 2000.0\n"
    rng = np.random.default_rng(11)
    side = 4000.0
    start = rng.uniform(-side / 2, side / 2, (400, 2))
    ids = [f"u{i}" for i in range(len(start))]
    got = {}
    for default_s in (0.0, 600.0):
        path.write_text(base + f"default_session_s = {default_s}\n")
        cfg = load_config(path).cloak_config()
        assert cfg.default.session_s == default_s
        cloaker = Cloaker(cfg, rng=np.random.default_rng(12))
        xy = start.copy()
        walk = np.random.default_rng(13)
        common: set[int] | None = None
        for step in range(3):
            now = 1000.0 + 60.0 * step
            heading = walk.uniform(0, 2 * np.pi, len(xy))
            xy += np.column_stack([np.cos(heading), np.sin(heading)]) * 1.4 * 60.0 * (step > 0)
            cloaker.update_many(ids, xy, now)
            cloaker.update_many(ids, xy, now + 1.5)  # a fix each, past the epoch boundary
            out = cloaker.request(("q", step), ids[0], None, now + 1.5)
            assert out is not None and out.region is not None
            x0, y0, x1, y1 = out.region.polygon.bounds
            inside = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
            here = set(np.flatnonzero(inside).tolist())
            common = here if common is None else common & here
        assert common is not None
        got[default_s] = (sum(cloaker.session_counts.values()), len(common))
    assert got[0.0][0] == 0 and got[0.0][1] < 5  # one-shot regions: intersected, below k
    assert got[600.0][0] >= 3 and got[600.0][1] >= 5  # every region a session's: k kept
    path.write_text(base + "session_s_bound = 600.0\ndefault_session_s = 900.0\n")
    with pytest.raises(ConfigError, match=r"cloak\.default_session_s"):
        load_config(path)


def test_session_area_bound_keeps_the_users_who_stay_nearest() -> None:
    """The oracle's bound: the fixed k users that stay nearest the requester over a session,
    their box (with margin, at least a_min) per request."""
    rng = np.random.default_rng(4)
    frames = []
    for t in range(10):
        x = np.concatenate([[0.0, 10.0, -20.0], rng.uniform(-2000, 2000, 50) + 30.0 * t])
        y = np.concatenate([[0.0, 5.0, 15.0], rng.uniform(-2000, 2000, 50)])
        frames.append((x, y))
    areas = session_area_bound(frames, 0, 3, margin_m=10.0, a_min_m2=100.0)
    assert areas == [pytest.approx((30.0 + 20.0) * (15.0 + 20.0))] * 10
    assert session_area_bound(frames, 0, 3, a_min_m2=1e4) == [1e4] * 10
    assert session_area_bound([], 0, 3) == []
    # chosen by their joint box: two on her street (a 220 x 20 m box with 10 m margins), not
    # the nearest two each on her own (one east, one north: 120 x 170 m)
    street = (np.array([0.0, 100.0, 200.0, 0.0, -150.0]), np.array([0.0, 0.0, 0.0, 150.0, 0.0]))
    alone = session_area_bound([street] * 3, 0, 3, margin_m=10.0)
    joint = session_area_bound([street] * 3, 0, 3, margin_m=10.0, joint=True)
    assert alone == pytest.approx([120.0 * 170.0] * 3)
    assert joint == pytest.approx([220.0 * 20.0] * 3)
    # restricted to a pool (rows 1 and 3-4 here), or chosen by the first request only
    pool = np.zeros(53, dtype=bool)
    pool[[1, 3, 4]] = True
    chosen_by_first = session_area_bound(frames, 0, 2, pool=pool, online=True)
    x0, y0 = frames[0]
    near = int(np.argmin(np.maximum(np.abs(x0[[1, 3, 4]]), np.abs(y0[[1, 3, 4]]))))
    j = [1, 3, 4][near]
    expect = [abs(float(x[j] - x[0])) * abs(float(y[j] - y[0])) for x, y in frames]
    assert chosen_by_first == pytest.approx(expect)


@pytest.mark.parametrize("users", [1000, 4000])
def test_session_regions_are_not_centred_on_the_requester(users: int) -> None:
    """The centre attack: guess that the user nearest the centre of a region is its requester
    (and the edge attack: the user nearest an edge).
    A session's members are chosen to move like her, but as a group of her leaf that does not
    depend on who asks, and its first region covers all of them: the guess succeeds no more
    often than picking one of the users inside at random (choosing the members nearest her
    made it 48 % against 10 % on the first region)."""
    rng = np.random.default_rng(5)
    side, askers = 4000.0, 200
    xy = rng.uniform(0, side, (users, 2))
    ids = [f"u{i}" for i in range(users)]
    cloaker = Cloaker(
        CloakConfig(world=(0.0, 0.0, side, side), **ONE_BOX), rng=np.random.default_rng(6)
    )
    params = CloakParams(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=600.0)
    hits, edge_hits, chance = [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]
    for step in range(4):
        now = 1000.0 + 60.0 * step
        heading = rng.uniform(0, 2 * np.pi, users)
        xy += np.column_stack([np.cos(heading), np.sin(heading)]) * 1.4 * 60.0
        np.clip(xy, 0.0, side, out=xy)
        cloaker.update_many(ids, xy, now, np.zeros(users))  # exact fixes, and said so
        for a in range(askers):
            out = cloaker.request(("q", a, step), ids[a], params, now)
            assert out is not None and out.region is not None
            x0, y0, x1, y1 = out.region.polygon.bounds
            inside = np.flatnonzero(
                (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
            )
            d = np.maximum(
                np.abs(xy[inside, 0] - (x0 + x1) / 2), np.abs(xy[inside, 1] - (y0 + y1) / 2)
            )
            e = np.minimum.reduce(
                [xy[inside, 0] - x0, x1 - xy[inside, 0], xy[inside, 1] - y0, y1 - xy[inside, 1]]
            )
            later = int(step > 0)
            hits[later] += float(inside[int(np.argmin(d))] == a)
            edge_hits[later] += float(inside[int(np.argmin(e))] == a)
            chance[later] += 1.0 / len(inside)
    assert hits[0] <= 1.5 * chance[0] + 5  # first regions: about chance (~15 of 200)
    assert hits[1] <= 1.5 * chance[1] + 5  # later ones too
    # nor at an edge: the joint box grows the set from her, but she is one of its corners no
    # more often than chance
    assert edge_hits[0] <= 1.5 * chance[0] + 5
    assert edge_hits[1] <= 1.5 * chance[1] + 5
