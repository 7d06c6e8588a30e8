"""Shared helpers of the microaggregation kernel tests: data loaders and a plain numpy MDAV."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CENSUS = DATA_DIR / "census.csv"
needs_census = pytest.mark.skipif(not CENSUS.exists(), reason=f"{CENSUS} not found")
"""For tests that read ../shared/data/census.csv (a clone without shared/ skips them)."""
ADULT = DATA_DIR / "adult.csv"
ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]


def zscore(A: npt.ArrayLike, ddof: int = 0) -> npt.NDArray[np.float64]:
    """Centre each column and divide by its standard deviation (constant columns: by 1)."""
    A = np.asarray(A, dtype=np.float64)
    sd = A.std(axis=0, ddof=ddof)
    out: npt.NDArray[np.float64] = (A - A.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return out


def load_census(ddof: int = 0) -> npt.NDArray[np.float64]:
    """The 13 Census columns, z-scored."""
    return zscore(np.loadtxt(CENSUS, delimiter=",", skiprows=1), ddof)


def load_adult_numeric(n: int | None = None, seed: int = 0) -> npt.NDArray[np.float64]:
    """Adult's six numeric columns, z-scored; a random subsample of ``n`` rows if given."""
    import pandas as pd

    A = pd.read_csv(ADULT, usecols=ADULT_NUMERIC)[ADULT_NUMERIC].to_numpy(np.float64)
    if n is not None and n < len(A):
        A = A[np.sort(np.random.default_rng(seed).choice(len(A), n, replace=False))]
    return zscore(A)


def _sqdist(X: npt.NDArray[np.float64], q: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    # columns added in order 0..d-1, as the kernel does (np.sum would add them pairwise)
    acc = np.zeros(len(X))
    for j in range(X.shape[1]):
        t = X[:, j] - q[j]
        acc += t * t
    return acc


def _mean(X: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    # correctly rounded column sums, then divided by the count
    return np.array([math.fsum(X[:, j]) for j in range(X.shape[1])]) / len(X)


def mdav_reference(X: npt.ArrayLike, k: int) -> npt.NDArray[np.intp]:
    """Textbook MDAV in plain numpy, one full pass per step, with the documented tie-breaks."""
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    labels = np.full(n, -1, dtype=np.intp)
    rem = np.arange(n)
    g = 0

    def furthest(cand: npt.NDArray[np.intp], q: npt.NDArray[np.float64]) -> int:
        dd = _sqdist(X[cand], q)
        return int(cand[np.flatnonzero(dd == dd.max())[0]])  # cand is sorted: lowest index

    def group(seed: int) -> None:
        nonlocal rem, g
        others = rem[rem != seed]
        dd = _sqdist(X[others], X[seed])
        order = np.lexsort((others, dd))[: k - 1]
        members = np.concatenate(([seed], others[order]))
        labels[members] = g
        g += 1
        rem = np.setdiff1d(rem, members)

    while len(rem) >= 3 * k:
        r = furthest(rem, _mean(X[rem]))
        group(r)
        group(furthest(rem, X[r]))  # s: rem no longer holds r's group
    if len(rem) >= 2 * k:
        group(furthest(rem, _mean(X[rem])))
    labels[rem] = g
    return labels
