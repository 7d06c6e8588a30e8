"""The groups a session's first members come from (``history.motion_groups``): users split on
where they are, where a forecast they can keep puts them, and how long they have stayed put;
and what that buys against the intersection attack on walkers who turn every minute."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from locpriv.core.cloak.history import motion_groups
from simulators.attacks import repeated_cloaks_attack

F64 = NDArray[np.float64]


def _walkers(n: int, rng: np.random.Generator) -> tuple[F64, F64]:
    """``n`` users over 1 km x 1 km walking 1.4 m/s, each her own way."""
    xy = rng.uniform(0.0, 1000.0, (n, 2))
    heading = rng.uniform(0.0, 2 * np.pi, n)
    return xy, 1.4 * np.column_stack([np.cos(heading), np.sin(heading)])


def test_users_who_stayed_put_for_long_are_grouped_apart_from_walkers() -> None:
    """Half the leaf has stood still for an hour, half walks: no group mixes them, wherever
    they stand (a requester who stays put gets neighbours who stay put)."""
    rng = np.random.default_rng(0)
    xy, v = _walkers(320, rng)
    still = np.where(np.arange(320) < 160, 3600.0, 0.0)
    v[:160] = 0.0
    g = motion_groups(xy, v, still, 10, horizon_s=1800.0, forecast_s=300.0)
    for label in np.unique(g):
        rows = np.flatnonzero(g == label)
        assert 10 <= len(rows) < 20
        assert len(set((still[rows] > 0).tolist())) == 1


def test_walkers_are_grouped_on_forecasts_they_keep_not_on_half_an_hour() -> None:
    """Walkers each heading her own way: a forecast taken half an hour ahead spreads them
    over 2.5 km and splits them by heading alone, so each group spans the whole leaf; a
    forecast over the 300 s it is trusted for keeps groups nearer (their boxes now about a
    quarter as large), and with no velocity at all the split is on position alone."""
    rng = np.random.default_rng(1)
    xy, v = _walkers(320, rng)
    still = np.zeros(320)

    def box_now(g: NDArray[np.int64]) -> float:
        return float(np.mean([np.prod(np.ptp(xy[g == lab], axis=0)) for lab in np.unique(g)]))

    kept = box_now(motion_groups(xy, v, still, 10, horizon_s=1800.0, forecast_s=300.0))
    far = box_now(motion_groups(xy, v, still, 10, horizon_s=1800.0, forecast_s=1800.0))
    where = box_now(motion_groups(xy, 0.0 * v, still, 10, horizon_s=1800.0, forecast_s=300.0))
    assert where < kept < far / 2


def test_half_hour_sessions_of_walkers_with_30_s_fixes_cost_at_most_5x() -> None:
    """Issue 22's goal at defaults, on 2,000 random walkers (heading drawn afresh every
    minute) who report every 30 s and answer the anonymizer's requests for fresh fixes a
    second later, 100 askers, 30-minute sessions, over three walk seeds (bench_privacy's
    session_lengths row): none narrowed below k, every request answered, the median region
    at most 5x the undefended median (measured 4.31x, 4.82x, 4.98x, mean 4.70x; with groups
    split on half-hour forecasts 5.15x, 5.17x, 4.90x, mean 5.07x, which fails here; with 40
    askers the two designs come to 4.82x and 4.99x, too close to the line to tell apart).
    These three walks are on the cheap side: bench_privacy's row over walk seeds 0-9 gives a
    mean of 4.91x, two of the ten walks above 5x (docs/algorithms.md)."""
    ratios = []
    for seed in (0, 1, 2):
        before = repeated_cloaks_attack(session_s=0.0, askers=100, update_s=30.0, seed=seed)
        after = repeated_cloaks_attack(
            session_s=3600.0, askers=100, update_s=30.0, seed=seed, fix_reply_s=1.0
        )
        assert after.success_rate <= 0.01
        assert after.answered_rate >= 0.95
        ratios.append(after.area_m2_median / before.area_m2_median)
    assert float(np.mean(ratios)) <= 5.0
