"""Solanas, Sebé & Domingo-Ferrer (2008): Algorithm 1 as printed, and why Table 1's direction
depends on the confidential attribute.

The transcription :func:`seeded_trace` must give the kernel's labels. On Census, a strongly
skewed confidential attribute (POTHVAL in 10 equal-width classes: 930 of 1080 records in one
class) stops the loop of line 2 once the rare values are used up and leaves most records to lines
17-20; there the random seed gives the lower information loss for most (k, p) of Table 1, as the
paper reports. With ERNVAL (the 13th column, balanced classes) few records are left over and the
MDAV seed gives the lower loss. docs/papers.md and notebooks/solanas_2008.ipynb show the figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locpriv.errors import ConfigError, InfeasibleError
from locpriv.tabular import il_percent, mdav_seed, random_seed
from locpriv.tabular.io.encoding import zscore
from locpriv.tabular.traces.seeded import seeded_trace

CENSUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "census.csv"
PAIRS = [(k, p) for k in range(2, 6) for p in range(2, k + 1)]  # Table 1's ten (k, p)


def _census(conf: str, bins: str) -> tuple[np.ndarray, np.ndarray]:
    if not CENSUS.exists():
        pytest.skip(f"Census data not found at {CENSUS}")
    df = pd.read_csv(CENSUS)
    Z = zscore(df.drop(columns=conf).to_numpy(np.float64))
    v = df[conf]
    cut = (
        pd.cut(v, 10, labels=False)
        if bins == "width"
        else pd.qcut(v.rank(method="first"), 10, labels=False)
    )
    return Z, np.asarray(cut, dtype=np.int64)


def _il_pair(Z: np.ndarray, s: np.ndarray, k: int, p: int) -> tuple[float, float]:
    """(mdav-seed IL %, mean random-seed IL % over seeds 0..4)."""
    h1 = il_percent(Z, mdav_seed(Z, s, k, p))
    h2 = [il_percent(Z, random_seed(Z, s, k, p, np.random.default_rng(r))) for r in range(5)]
    return h1, float(np.mean(h2))


@pytest.mark.parametrize("mode", ["mdav", "random"])
@pytest.mark.parametrize("case", [(300, 2, 3, 2, 0.9), (500, 4, 5, 3, 0.5)])
def test_trace_is_the_kernel(mode: str, case: tuple[int, int, int, int, float]) -> None:
    n, d, k, p, skew = case
    rng = np.random.default_rng(n + d)
    X = rng.uniform(-10000, 10000, (n, d))
    s = np.where(rng.random(n) < skew, 0, rng.integers(1, 6, n))
    want = (
        mdav_seed(X, s, k, p)
        if mode == "mdav"
        else random_seed(X, s, k, p, np.random.default_rng(7))
    )
    tr = seeded_trace(X, s, k, p, seed_mode=mode, rng=np.random.default_rng(7))
    assert np.array_equal(tr.labels, want)
    # loop groups are exactly k records (one attribute, p <= k), each with >= p values
    loop = tr.labels[~tr.leftover]
    assert np.all(np.bincount(loop) == k)
    assert len(tr.seeds) == tr.labels.max() + 1
    # the loop stops only when the unassigned records hold < k records or < p values
    left = s[tr.leftover]
    assert tr.n_leftover < k or len(np.unique(left)) < p


def test_skew_leaves_records_to_lines_17_to_20() -> None:
    """Every loop group needs a rare value: at most n_rare groups of k, the rest left over."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-10000, 10000, (1000, 2))
    s = np.zeros(1000, dtype=np.int64)
    s[rng.choice(1000, 40, replace=False)] = rng.integers(1, 4, 40)
    balanced = rng.integers(0, 10, 1000)
    for mode in ("mdav", "random"):
        skewed = seeded_trace(X, s, 3, 2, seed_mode=mode)
        assert len(skewed.seeds) <= 40
        assert skewed.n_leftover >= 1000 - 3 * 40
        assert seeded_trace(X, balanced, 3, 2, seed_mode=mode).n_leftover < 3


def test_trace_rejects_what_the_kernel_rejects() -> None:
    X = np.zeros((4, 2))
    with pytest.raises(InfeasibleError):
        seeded_trace(X, [0, 0, 0, 0], 2, 2)
    with pytest.raises(InfeasibleError):
        seeded_trace(X, [0, 1, 0, 1], 2, 3)
    with pytest.raises(ConfigError):
        seeded_trace(X, [0, 1, 0, 1], 2, 2, seed_mode="other")


@pytest.mark.slow
def test_census_skewed_attribute_random_seed_wins_as_in_table_1() -> None:
    Z, s = _census("POTHVAL", "width")
    assert np.bincount(s).max() == 930
    wins = 0
    for k, p in PAIRS:
        h1, h2 = _il_pair(Z, s, k, p)
        wins += int(h2 < h1)
        assert 15 < h1 < 45, (k, p, h1)  # the paper's H1 range (20.93-34.28) give or take
    assert wins >= 7, wins  # 8 of 10 when this was written
    for k, p in ((2, 2), (5, 5)):  # most records are placed by lines 17-20
        assert seeded_trace(Z, s, k, p).n_leftover > 0.4 * len(s)


@pytest.mark.slow
@pytest.mark.parametrize("bins", ["width", "freq"])
def test_census_ernval_mdav_seed_wins(bins: str) -> None:
    Z, s = _census("ERNVAL", bins)
    wins = sum(int(h1 < h2) for h1, h2 in (_il_pair(Z, s, k, p) for k, p in PAIRS))
    assert wins >= 8, wins  # 10 of 10 when this was written
    for k, p in ((2, 2), (4, 2)):  # the loop runs almost to the end
        assert seeded_trace(Z, s, k, p).n_leftover < 0.05 * len(s)
