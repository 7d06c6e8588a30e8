"""Memory of a release through the pandas front (issue 23: 10M x 13 within 8 GB): the key
matrix is built column by column, the released float columns are the written values (no copy),
the information loss sums the squared differences row by row (no n x d matrix of them), and a
whole ``anonymize`` call holds a bounded number of n x d copies. Every change keeps the release
bit for bit (the reference implementations here are the former code)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.tabular.io.encoding import KeyColumn, encode, encode_column, encode_written
from locpriv.tabular.io.frame import _written_keys, anonymize

FloatArray = npt.NDArray[np.float64]


def _mixed(n: int = 500) -> tuple[list[KeyColumn], list[FloatArray]]:
    rng = np.random.default_rng(11)
    cols = [
        KeyColumn("x", "numerical"),
        KeyColumn("edu", "ordinal", ("a", "b", "c", "d")),
        KeyColumn("city", "nominal", ("n", "s", "e", "w", "c")),
        KeyColumn("flat", "numerical"),
        KeyColumn("one", "nominal", ("only",)),
    ]
    values = [
        rng.lognormal(3.0, 1.0, n),
        rng.integers(0, 4, n).astype(np.float64),
        rng.integers(0, 4, n).astype(np.float64),  # code 4 unused: the width follows the data
        np.full(n, 7.0),  # constant: scaled by 1
        np.zeros(n),
    ]
    return cols, values


def _encode_old(cols: list[KeyColumn], values: list[FloatArray]) -> FloatArray:
    return np.ascontiguousarray(
        np.hstack([encode_column(v, c.kind) for c, v in zip(cols, values, strict=True)])
    )


def _encode_written_old(
    cols: list[KeyColumn], values: list[FloatArray], written: list[FloatArray]
) -> FloatArray:
    parts = []
    for c, v, w in zip(cols, values, written, strict=True):
        if c.kind == "nominal":
            ncat = max(int(v.max()) + 1 if v.size else 0, 1)
            onehot = np.zeros((w.size, ncat))
            onehot[np.arange(w.size), w.astype(np.int64)] = 1.0 / np.sqrt(2.0)
            parts.append(onehot)
            continue
        sd = v.std() if v.std() > 0 else 1.0
        parts.append(((w - v.mean()) / sd)[:, None])
    return np.hstack(parts)


def test_encodings_are_written_column_by_column_bit_for_bit() -> None:
    cols, values = _mixed()
    Z = encode(cols, values).Z
    assert Z.flags.c_contiguous and Z.shape == (500, 1 + 1 + 4 + 1 + 1)
    np.testing.assert_array_equal(Z, _encode_old(cols, values))
    rng = np.random.default_rng(2)
    written = [v[rng.permutation(v.size)] for v in values]  # values of the same columns
    np.testing.assert_array_equal(
        encode_written(cols, values, written), _encode_written_old(cols, values, written)
    )
    assert encode([], []).Z.shape == (0, 0)
    assert encode_written([], [], []).shape == (0, 0)


def test_released_float_columns_are_the_written_values() -> None:
    """No second copy of the written values: a float64 key column of the release shares its
    memory with them; an integer column holds them rounded, in its own dtype."""
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"x": rng.random(60), "i": rng.integers(0, 9, 60)})
    labels = np.repeat(np.arange(20), 3)
    cols = [KeyColumn("x", "numerical"), KeyColumn("i", "numerical")]
    values = [df["x"].to_numpy(dtype=np.float64), df["i"].to_numpy(dtype=np.float64)]
    keys, written = _written_keys(df, cols, values, labels, "centroids")
    assert written is not None
    assert np.shares_memory(keys["x"].to_numpy(), written[0])
    assert keys["i"].dtype == df["i"].dtype
    np.testing.assert_array_equal(keys["i"].to_numpy(), written[1])


def test_anonymize_holds_few_copies_of_the_key_matrix() -> None:
    """The peak of numpy's allocations during a whole p = 2 ``anonymize`` call (in-process,
    numba's own task buffers not counted) stays below 4.6 n x d float64 copies beyond the input
    (measured 4.1 at 60k x 13; the code before this bound held 6.1: the encoding's parts and
    their hstack, the released columns copied from the written values, the written values'
    matrix and its differences to the key matrix, all alive at once)."""
    n, d = 60_000, 13
    qi = [f"x{j}" for j in range(d)]
    df = pd.DataFrame(np.random.default_rng(0).random((n, d)), columns=qi)
    df["s"] = np.arange(n) % 8
    anonymize(df.head(3000), qi, ["s"], 3, 2, "partitioned", seed=0, block_size=1024)
    tracemalloc.start()
    try:
        out, rep = anonymize(df, qi, ["s"], 3, 2, "partitioned", seed=0, block_size=8192)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rep["p_achieved"] == {"s": 2} and len(out) == n
    assert peak < 4.6 * 8 * n * d, peak / (8 * n * d)
