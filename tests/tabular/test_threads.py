"""The parent's column- and group-wise work on threads (locpriv.tabular.threads): the same
results bit for bit for any thread count, equal to the serial kernels they replace, and counted
as parallel sections in the stage report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from locpriv.tabular.io import frame
from locpriv.tabular.io.encoding import encode, encode_column, encode_written
from locpriv.tabular.microagg._kernels.partition_stats import group_means as means_kernel
from locpriv.tabular.microagg._kernels.partition_stats import group_span as span_kernel
from locpriv.tabular.microagg.partitioned import StageLog, stage_log
from locpriv.tabular.quality import metrics
from locpriv.tabular.threads import kernel_threads, map_items, threads


def _data(seed: int, n: int = 40_000, d: int = 5, g: int = 9000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.lognormal(0, 2, size=d)  # scales far apart
    X[::7] = X[0]  # ties
    labels = rng.integers(0, g, n).astype(np.int64)  # some groups empty
    return X, labels


def test_map_items_keeps_order_and_counts_a_parallel_section() -> None:
    assert threads() == 1
    with stage_log() as log, kernel_threads(3):
        assert threads() == 3
        with log.stage("work"):
            out = map_items(lambda x: x * x, list(range(10)))
        with log.stage("none"):
            pass
    assert threads() == 1
    assert out == [x * x for x in range(10)]
    work, none = log.report()["stages"]
    assert work["parallel_items"] == 10 and work["threads"] == 3
    assert 0.0 <= work["parallel_seconds"] <= work["seconds"]
    assert none["parallel_seconds"] == 0.0 and none["parallel_items"] == 0
    assert none["threads"] == 1


def test_serial_share_leaves_out_the_parallel_sections() -> None:
    log = StageLog()
    log.rows = [
        {"stage": "a", "seconds": 4.0, "cpu_seconds": 4.0, "tasks": 0, "parallel_seconds": 3.0,
         "parallel_cpu_seconds": 3.0},
        {"stage": "b", "seconds": 6.0, "cpu_seconds": 6.0, "tasks": 2},
        {"stage": "c", "seconds": 2.0, "cpu_seconds": 2.0, "tasks": 0},  # an old report's row
    ]  # fmt: skip
    assert log.serial_share() == pytest.approx((1.0 + 2.0) / 12.0)
    assert log.serial_cpu_share() == pytest.approx((1.0 + 2.0) / 12.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_group_statistics_equal_the_serial_kernels_for_any_thread_count(seed: int) -> None:
    X, labels = _data(seed)
    g = int(labels.max()) + 1
    cen = means_kernel(X, labels, g)[0]
    lo, hi, cnt = span_kernel(X, labels, g)
    diff = X - X.mean(axis=0)
    for t in (1, 2, 5):
        with kernel_threads(t):
            np.testing.assert_array_equal(metrics.group_means(X, labels), cen)
            glo, ghi, gcnt = metrics.group_span(X, labels)
            np.testing.assert_array_equal(glo, lo)
            np.testing.assert_array_equal(ghi, hi)
            np.testing.assert_array_equal(gcnt, cnt)
            total = metrics.sst(X)
            assert total == pytest.approx(float(np.einsum("ij,ij->", diff, diff)), rel=1e-13)
            assert total == float(np.sum(np.sum(diff * diff, axis=1)))  # rows, then pairwise
            W = X + 0.5
            assert metrics.squared_distances(X, W) == pytest.approx(0.25 * X.size, rel=1e-13)
    sums = {t: None for t in (1, 2, 5)}
    for t in sums:
        with kernel_threads(t):
            sums[t] = (metrics.sst(X), metrics.squared_distances(X, X[::-1].copy()))
    assert sums[1] == sums[2] == sums[5]


def test_release_and_audit_figures_are_the_same_on_any_thread_count() -> None:
    rng = np.random.default_rng(4)
    n = 30_000
    df = pd.DataFrame(rng.random((n, 4)), columns=["a", "b", "c", "d"])
    df["i"] = rng.integers(0, 50, n)  # an integer key: rounded centroids
    df["o"] = pd.Categorical(rng.choice(["lo", "mid", "hi"], n), ["lo", "mid", "hi"], ordered=True)
    df["m"] = rng.choice(["x", "y", "z", "w"], n)  # nominal: one-hot columns
    df["s"] = rng.integers(0, 6, n)
    df["pt"] = np.round(df["a"] * 10)  # predicts a key attribute
    qi = ["a", "b", "c", "d", "i", "o", "m"]
    labels = (rng.permutation(n) // 4).astype(np.int64)
    cols, values = frame._key_columns(df, qi, ["o"], ["m"])
    got = {}
    for t in (1, 3):
        with kernel_threads(t):
            Z = encode(cols, values).Z
            keys, written = frame._written_keys(df, cols, values, labels, "centroids")
            assert written is not None
            WZ = encode_written(cols, values, written)
            figures = frame.release_figures(
                keys, Z, None, [], k=3, written_Z=WZ, classes=frame.release_classes(keys, qi)
            )
            audit = frame.audit_pass_through(df, qi, {"pt": "pass-through", "s": "confidential"}, 3)
            got[t] = (Z, keys, WZ, json.dumps([figures, audit], sort_keys=True))
    np.testing.assert_array_equal(got[1][0], got[3][0])
    pd.testing.assert_frame_equal(got[1][1], got[3][1])
    np.testing.assert_array_equal(got[1][2], got[3][2])
    assert got[1][3] == got[3][3]
    # the matrix equals the column parts joined by numpy
    np.testing.assert_array_equal(
        got[1][0], np.hstack([encode_column(v, c.kind) for c, v in zip(cols, values, strict=True)])
    )
    assert any("predicts key attribute 'a'" in w for w in json.loads(got[1][3])[1][0]["warnings"])


def test_anonymize_is_the_same_for_one_and_two_workers_and_counts_parallel_work() -> None:
    rng = np.random.default_rng(8)
    qi = [f"x{j}" for j in range(6)]
    df = pd.DataFrame(rng.random((20_000, 6)), columns=qi)
    df["s"] = rng.integers(0, 5, len(df))
    runs = []
    for w in (1, 2):
        out, rep = frame.anonymize(
            df,
            qi,
            "s",
            3,
            2,
            "partitioned",
            seed=3,
            workers=w,
            block_size=4096,
            warn=lambda _: None,
        )
        stages = rep.pop("stages")
        rep.pop("seconds", None)
        runs.append((out, json.dumps(rep, sort_keys=True, default=str), stages))
    pd.testing.assert_frame_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]
    for stages, w in ((runs[0][2], 1), (runs[1][2], 2)):
        by = {r["stage"]: r for r in stages["stages"]}
        for name in ("encode", "metrics", "release", "audit"):
            assert by[name]["parallel_items"] >= 1, name
            assert 1 <= by[name]["threads"] <= w, name
        assert by["encode"]["threads"] == w  # six columns: one thread each, up to w
        assert 0.0 <= stages["serial_share"] <= 1.0


def test_pool_statistics_and_pools_are_the_same_on_any_thread_count() -> None:
    from locpriv.tabular.microagg._kernels.partition_stats import pool_stats, pool_stats_range
    from locpriv.tabular.microagg.partitioned import _face_distance, _repair_pools, split_blocks
    from locpriv.tabular.quality._kernels.chunks import group_order

    X, labels = _data(5)
    g = int(labels.max()) + 1
    face = np.random.default_rng(6).random(X.shape[0])
    cen = means_kernel(X, labels, g)[0]
    err, near = pool_stats(X, labels, cen, face, g)
    order, start = group_order(labels, g)
    rerr, rnear = np.empty(g), np.empty(g)
    pool_stats_range(X, order, start, cen, face, 0, g, rerr, rnear)
    np.testing.assert_array_equal(rerr, err)  # each group's errors summed in row order
    np.testing.assert_array_equal(rnear, near)
    blocks = split_blocks(X, 4096)
    labels = np.unique(labels, return_inverse=True)[1].astype(np.int64)  # no empty group
    got = []
    for t in (1, 3):
        with kernel_threads(t):
            f = _face_distance(X, blocks)
            got.append((f, _repair_pools(X, labels, f, 0.3, 2048, seed=9)))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    assert len(got[0][1]) == len(got[1][1]) > 1
    for a, b in zip(got[0][1], got[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("n", "block"), [(30_011, 700), (9000, 100), (500, 1000)])
def test_split_by_levels_gives_the_kd_tree_leaves_on_any_thread_count(n: int, block: int) -> None:
    from locpriv.tabular.microagg._kernels.mdav_blocks import kd_blocks
    from locpriv.tabular.microagg.partitioned import split_blocks

    X = np.random.default_rng(n).random((n, 6))
    X[:, 2] = np.round(X[:, 2] * 3)  # ties at the medians
    X[:, 4] = X[:, 1]  # equal widths: the first widest column is cut
    perm, starts = kd_blocks(X, block)
    ref = [np.sort(perm[starts[b] : starts[b + 1]]) for b in range(starts.size - 1)]
    for t in (1, 3):
        with kernel_threads(t):
            got = split_blocks(X, block)
        assert len(got) == len(ref)
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b)


def test_items_with_large_temporaries_run_on_fewer_threads() -> None:
    from locpriv.tabular.threads import ITEM_MEMORY

    with stage_log() as log, kernel_threads(8):
        with log.stage("big"):
            out = map_items(lambda x: x + 1, list(range(10)), item_bytes=ITEM_MEMORY // 2)
        with log.stage("small"):
            map_items(lambda x: x + 1, list(range(10)), item_bytes=1024)
    assert out == list(range(1, 11))
    big, small = log.report()["stages"]
    assert big["threads"] == 2 and small["threads"] == 8
