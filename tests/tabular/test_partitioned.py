"""The partitioned method on small data cut into many blocks: k-anonymity, p-sensitivity, the
border repair, determinism, the default switch-over, and the CLI's streamed Parquet path."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow.parquet as pq
import pytest

from locpriv.cli import main
from locpriv.errors import ConfigError
from locpriv.tabular import mdav
from locpriv.tabular.io.cli import ProgressBar
from locpriv.tabular.io.estimators import candidates
from locpriv.tabular.microagg.partitioned import (
    DEFAULT_FROM_N,
    Progress,
    partitioned,
    run_local,
    split_blocks,
    stage_log,
)
from locpriv.tabular.psensitive.kincrease import group_is_p_sensitive
from locpriv.tabular.quality.metrics import sse
from locpriv.tabular.quality.validate import table_k, table_p
from tests.tabular._mdav_helpers import CENSUS, needs_census, zscore

QI = [f"x{j}" for j in range(4)]


def _uniform_file(tmp_path: Path, n: int = 3000, seed: int = 1, d: int = 4) -> Path:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.random((n, d)), columns=[f"x{j}" for j in range(d)])
    df.insert(0, "id", np.arange(n))
    # a skewed confidential attribute with 8 values
    df["s"] = rng.choice(8, size=n, p=[0.4, 0.2, 0.1, 0.1, 0.08, 0.06, 0.04, 0.02])
    df["note"] = [f"r{i}" for i in range(n)]
    df["grade"] = pd.Categorical(rng.choice(["a", "b", "c"], n), categories=["c", "b", "a"])
    path = tmp_path / "in.parquet"
    df.to_parquet(path, index=False, row_group_size=700)  # several row groups
    return path


def _read(path: Path) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    df = pd.read_parquet(path)
    keys = [c for c in df.columns if c.startswith("x")]
    return df[keys].to_numpy(dtype=np.float64), df["s"].to_numpy(dtype=np.int64)


def test_blocks_are_a_partition_of_the_rows_and_respect_the_size(tmp_path: Path) -> None:
    X, _ = _read(_uniform_file(tmp_path))
    blocks = split_blocks(X, 256)
    assert len(blocks) == 16  # 3000 -> 1500 -> ... -> 187/188: four median cuts
    rows = np.concatenate(blocks)
    assert sorted(rows.tolist()) == list(range(3000))
    assert max(b.size for b in blocks) <= 256


@pytest.mark.parametrize("k", [3, 5])
def test_k_anonymous_groups_of_k_to_2k_minus_1(tmp_path: Path, k: int) -> None:
    X, _ = _read(_uniform_file(tmp_path))
    labels = partitioned(X, k, block_size=256, seed=3)
    sizes = np.bincount(labels)
    assert labels.min() == 0 and sizes.min() >= k and sizes.max() <= 2 * k - 1


@pytest.mark.parametrize(("k", "p"), [(3, 2), (4, 3)])
def test_p_sensitive_on_skewed_values(tmp_path: Path, k: int, p: int) -> None:
    X, s = _read(_uniform_file(tmp_path))
    labels = partitioned(X, k, s, p, block_size=256, seed=3)
    assert np.bincount(labels).min() >= k
    assert group_is_p_sensitive(labels, s[:, None], p)


def test_a_block_without_p_values_joins_its_neighbours(tmp_path: Path) -> None:
    """Records sorted so that the blocks of the left half hold one value only: those blocks
    cannot form p-sensitive groups; their records join the nearest groups, all p-sensitive."""
    X, _ = _read(_uniform_file(tmp_path))
    s = np.where(X[:, 0] < np.median(X[:, 0]), 0, np.arange(X.shape[0]) % 5)
    labels = partitioned(X, 3, s, 2, block_size=256, seed=0)
    assert np.bincount(labels).min() >= 3
    assert group_is_p_sensitive(labels, s[:, None], 2)


@pytest.mark.parametrize("d", [4, 13])
def test_border_repair_lowers_the_information_loss(tmp_path: Path, d: int) -> None:
    X, s = _read(_uniform_file(tmp_path, d=d))
    plain = partitioned(X, 3, block_size=256, repair_rounds=0)
    repaired = partitioned(X, 3, block_size=256)
    assert sse(X, repaired) < 0.995 * sse(X, plain)
    plain_p = partitioned(X, 3, s, 2, block_size=256, repair_rounds=0)
    repaired_p = partitioned(X, 3, s, 2, block_size=256)
    assert group_is_p_sensitive(repaired_p, s[:, None], 2)
    if d == 13:  # in 4-D the seeded heuristic finds nothing better across the faces
        assert sse(X, repaired_p) < 0.99 * sse(X, plain_p)
    else:
        assert sse(X, repaired_p) <= sse(X, plain_p)


def _reversed_runner(
    fn: Callable[..., Any], make_args: Callable[[int], tuple[Any, ...]], count: int, progress: Any
) -> list[Any]:
    """Runs the tasks last to first (as a cluster may finish them), returns them in order."""
    out = [fn(*make_args(i)) for i in reversed(range(count))]
    return out[::-1]


def test_the_result_depends_on_the_seed_only_not_on_the_task_order(tmp_path: Path) -> None:
    X, s = _read(_uniform_file(tmp_path))
    a = partitioned(X, 3, s, 2, block_size=256, seed=7)
    b = partitioned(X, 3, s, 2, block_size=256, seed=7, runner=_reversed_runner)
    np.testing.assert_array_equal(a, b)
    c = partitioned(X, 3, block_size=256, seed=7, runner=run_local)
    d = partitioned(X, 3, block_size=256, seed=7, runner=_reversed_runner)
    np.testing.assert_array_equal(c, d)


@pytest.mark.parametrize("kind", ["threads", "processes"])
@pytest.mark.parametrize("p", [1, 2])
def test_local_workers_give_the_local_release(tmp_path: Path, kind: str, p: int) -> None:
    """Blocks run on two worker threads or two spawned worker processes: the same labels as in
    this process, for k-anonymity and p-sensitivity."""
    from locpriv.tabular.microagg.distributed import workers_session

    X, s = _read(_uniform_file(tmp_path))
    S = s if p > 1 else None
    local = partitioned(X, 3, S, p, block_size=256, seed=7)
    seen: list[float] = []
    with workers_session(2, kind) as runner:
        remote = partitioned(
            X, 3, S, p, block_size=256, seed=7, runner=runner, progress=seen.append
        )
    np.testing.assert_array_equal(local, remote)
    assert seen and seen[-1] == pytest.approx(1.0)


def test_worker_threads_share_the_matrix_and_every_kernel_releases_the_gil(
    tmp_path: Path,
) -> None:
    """Thread workers read the parent's matrix (no copy until a task takes its rows), and every
    numba kernel of the block and pool tasks (MDAV, the k-d tree, the neighbour graph, the
    local search, the p-sensitive heuristic and its nearest-neighbour queries, the SSE and the
    distinct counts) is compiled with ``nogil=True``, so worker threads run on every core."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    from locpriv.tabular.microagg.distributed import LocalRows, workers_session

    X, _ = _read(_uniform_file(tmp_path))
    with workers_session(3, "threads") as runner, runner.shared(X) as src:  # type: ignore[attr-defined]
        assert isinstance(src, LocalRows) and src.X is X
        rows = np.array([5, 0, 17, 17, len(X) - 1], dtype=np.intp)
        np.testing.assert_array_equal(src.take(rows), X[rows])
    seen = 0
    for pkg in (
        "locpriv.tabular._kernels",
        "locpriv.tabular.microagg._kernels",
        "locpriv.tabular.psensitive._kernels",
        "locpriv.tabular.quality._kernels",
    ):
        path = importlib.import_module(pkg).__path__
        for info in pkgutil.iter_modules(path):
            mod = importlib.import_module(f"{pkg}.{info.name}")
            for name, obj in vars(mod).items():
                if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                    assert obj.targetoptions.get("nogil") is True, f"{mod.__name__}.{name}"
                    seen += 1
    assert seen >= 60  # every kernel module was found


def test_thread_session_hands_free_heap_pages_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the threads are done (also on an error), the arenas' free pages go back to the
    system (malloc_trim), so the blocks' buffers do not stay resident into the release."""
    from locpriv.tabular.microagg import distributed

    distributed.release_free_memory()  # callable here (glibc) and harmless
    calls: list[int] = []
    monkeypatch.setattr(distributed, "release_free_memory", lambda: calls.append(1))
    with distributed.workers_session(2, "threads") as runner:
        assert runner(pow, lambda i: (i, 2), 5, None) == [0, 1, 4, 9, 16]
    assert calls == [1]
    with pytest.raises(ZeroDivisionError), distributed.workers_session(2, "threads") as runner:
        runner(divmod, lambda i: (1, i), 3, None)
    assert calls == [1, 1]


def test_workers_kind_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from locpriv.tabular.io.frame import anonymize
    from locpriv.tabular.microagg.distributed import workers_session

    bad = pytest.raises(ConfigError, match="workers_kind must be one of threads, processes")
    with bad, workers_session(2, "fibres"):
        pass  # pragma: no cover
    with pytest.raises(ConfigError, match="workers must be an integer >= 1"), workers_session(0):
        pass  # pragma: no cover
    df = pd.DataFrame(np.random.default_rng(0).random((40, 2)), columns=["a", "b"])
    with pytest.raises(ConfigError, match="workers_kind must be one of"):
        anonymize(df, ["a", "b"], k=3, workers_kind="gpu")
    src = _uniform_file(tmp_path)
    argv = ["anonymize", str(src), str(tmp_path / "o.csv"), "--qi", ",".join(QI)]
    with pytest.raises(SystemExit):
        main([*argv, "--workers-kind", "fibres"])
    assert "--workers-kind" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_workers_read_their_blocks_from_shared_memory_or_pickled_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key matrix goes to the workers in one shared-memory segment (tasks carry row
    indices); where /dev/shm lacks the room the blocks are pickled. Both give the local
    release, and no segment outlives the run."""
    from locpriv.tabular.microagg import distributed
    from locpriv.tabular.microagg.distributed import SharedMatrix, workers_session

    X, s = _read(_uniform_file(tmp_path))
    local = partitioned(X, 3, s, 2, block_size=256, seed=7)
    with workers_session(2, "processes") as runner:
        with runner.shared(X) as src:  # type: ignore[attr-defined]
            assert isinstance(src, SharedMatrix)
            segment = Path(distributed.SHM_DIR) / src.name.lstrip("/")
            assert segment.stat().st_size >= X.nbytes
            rows = np.array([5, 0, 17, 17, len(X) - 1], dtype=np.intp)
            np.testing.assert_array_equal(src.take(rows), X[rows])
        assert not segment.exists()  # unlinked on exit
        shared = partitioned(X, 3, s, 2, block_size=256, seed=7, runner=runner)
        monkeypatch.setattr(distributed, "SHM_HEADROOM", float("inf"))  # no room: pickled
        with runner.shared(X) as src:  # type: ignore[attr-defined]
            assert src is None
        pickled = partitioned(X, 3, s, 2, block_size=256, seed=7, runner=runner)
    assert not list(Path(distributed.SHM_DIR).glob(segment.name))
    np.testing.assert_array_equal(local, shared)
    np.testing.assert_array_equal(local, pickled)


def test_cli_release_does_not_depend_on_the_worker_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _uniform_file(tmp_path)
    outs = []
    for workers, kind in (("1", "threads"), ("2", "threads"), ("2", "processes")):
        dst = tmp_path / f"out{workers}{kind}.parquet"
        argv = ["anonymize", str(src), str(dst), "--qi", ",".join(QI), "--sensitive", "s"]
        argv += ["--k", "3", "--method", "partitioned", "--block-size", "256", "--seed", "5"]
        argv += ["--workers", workers, "--workers-kind", kind]
        assert main(argv) == 0, capsys.readouterr().err
        outs.append(pd.read_parquet(dst))
    pd.testing.assert_frame_equal(outs[0], outs[1])
    pd.testing.assert_frame_equal(outs[0], outs[2])


@needs_census
def test_below_mdav_on_census_like_skewed_data(tmp_path: Path) -> None:
    """Census rows resampled with 5 % multiplicative noise (skewed, heavy-tailed, correlated),
    4000 records in blocks of 512: the partitioned method's IL is below exact MDAV's."""
    census = pd.read_csv(CENSUS).to_numpy(dtype=np.float64)
    rng = np.random.default_rng(5)
    rows = census[rng.integers(0, census.shape[0], 4000)]
    noisy = rows * rng.lognormal(0.0, 0.05, rows.shape)
    path = tmp_path / "census_like.csv"
    pd.DataFrame(noisy).to_csv(path, index=False)
    Z = zscore(pd.read_csv(path).to_numpy(dtype=np.float64))
    ours = sse(Z, partitioned(Z, 3, block_size=512))
    assert ours < 0.97 * sse(Z, np.asarray(mdav(Z, 3), dtype=np.int64))


def test_default_switches_to_partitioned_from_the_documented_size() -> None:
    assert DEFAULT_FROM_N == 200_000  # as docs/tabular.md and the CLI's help say
    assert candidates(None, 1, DEFAULT_FROM_N) == ("partitioned",)
    assert candidates(None, 2, DEFAULT_FROM_N) == ("partitioned",)
    assert candidates(None, 1, DEFAULT_FROM_N - 1) == ("mdav",)  # within the stated budget
    assert "partitioned" not in candidates(None, 2, DEFAULT_FROM_N - 1)
    assert candidates("mdav", 1, 10 * DEFAULT_FROM_N) == ("mdav",)  # the textbook stays


def test_cli_streams_parquet_and_keeps_the_other_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _uniform_file(tmp_path)
    dst, rep = tmp_path / "out.parquet", tmp_path / "report.json"
    argv = ["anonymize", str(src), str(dst), "--qi", ",".join(QI), "--sensitive", "s"]
    argv += ["--k", "3", "--p", "2", "--method", "partitioned", "--block-size", "256"]
    assert main([*argv, "--seed", "9", "--report", str(rep)]) == 0, capsys.readouterr().err
    out, before = pd.read_parquet(dst), pd.read_parquet(src)
    assert table_k(out, QI) >= 3 and table_p(out, QI, ["s"])["s"] >= 2
    assert out["id"].tolist() != before["id"].tolist()  # shuffled, through the two passes
    assert pq.ParquetFile(dst).num_row_groups == 5  # row groups of the input's size (700)
    back = out.sort_values("id").reset_index(drop=True)
    for col in ("id", "s", "note", "grade"):
        assert back[col].tolist() == before[col].tolist()
    assert list(out["grade"].cat.categories) == ["c", "b", "a"]  # pandas types kept
    report = json.loads(rep.read_text())
    assert report["method"] == "partitioned" and report["min_group_size"] >= 3
    assert report["order"] == {
        "shuffled": True,
        "seed": 9,
        "source": "seed",
        "note": report["order"]["note"],
    }
    np.testing.assert_allclose(out[QI].mean(), before[QI].mean(), rtol=1e-9)
    # the streamed file is the in-memory release of the same seed, row for row
    csv = tmp_path / "out.csv"
    argv[2] = str(csv)
    assert main([*argv, "--seed", "9"]) == 0, capsys.readouterr().err
    mem = pd.read_csv(csv)
    pd.testing.assert_frame_equal(
        out.drop(columns="grade"), mem.drop(columns="grade"), check_dtype=False
    )
    assert out["grade"].astype(str).tolist() == mem["grade"].tolist()
    # --keep-order streams the input's order and --drop removes columns
    argv[2] = str(dst)
    assert main([*argv, "--keep-order", "--drop", "note,id"]) == 0
    assert "ROW ORDER KEPT" in capsys.readouterr().err
    kept = pd.read_parquet(dst)
    assert list(kept.columns) == [c for c in before.columns if c not in ("note", "id")]
    assert kept["s"].tolist() == before["s"].tolist()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("missing", "column 'x9' not found"),
        ("nan", "column 'x1' has missing values"),
        ("p", "has 1 distinct values, fewer than p=2"),
    ],
)
def test_bad_input_one_line_and_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, message: str
) -> None:
    src = _uniform_file(tmp_path)
    df = pd.read_parquet(src)
    qi = ",".join(QI)
    if change == "missing":
        qi += ",x9"
    elif change == "nan":
        df.loc[1234, "x1"] = np.nan
    else:
        df["s"] = 0
    df.to_parquet(src, index=False)
    dst = tmp_path / "out.parquet"
    argv = ["anonymize", str(src), str(dst), "--qi", qi, "--sensitive", "s", "--k", "3"]
    assert main([*argv, "--p", "2", "--method", "partitioned", "--block-size", "256"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("locpriv anonymize: error:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]  # no output, no temp


def test_progress_bar_draws_each_stage_on_a_tty(tmp_path: Path) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = ProgressBar(stream, delay_s=0.0)
    X, _ = _read(_uniform_file(tmp_path))
    progress: Progress = bar
    partitioned(X, 3, block_size=256, progress=progress)
    bar.close()
    lines = stream.getvalue().split("\n")
    stages = [line.rsplit("\r", 1)[-1].split()[1] for line in lines if line]
    assert stages == ["blocks", "repair", "repair"]
    assert all("100.0%" in line.rsplit("\r", 1)[-1] for line in lines if line)


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_stage_report_times_every_stage_and_the_workers_cpu(tmp_path: Path, kind: str) -> None:
    """Pure bookkeeping: the stage log lists every stage once, counts the tasks and the CPU
    seconds measured inside the worker processes (threads: the parent's own CPU), and leaves
    the release unchanged."""
    from locpriv.tabular.microagg.distributed import workers_session

    X, s = _read(_uniform_file(tmp_path))
    plain = partitioned(X, 3, s, 2, block_size=256, seed=7)
    with workers_session(2, kind) as runner, stage_log() as log:
        logged = partitioned(X, 3, s, 2, block_size=256, seed=7, runner=runner)
    np.testing.assert_array_equal(plain, logged)
    rep = log.report()
    names = [r["stage"] for r in rep["stages"]]
    assert names == [
        "share",  # the key matrix into shared memory, once (threads: handed over as is)
        "split",
        "blocks",
        "merge blocks",
        "join leftovers",
        "face distances",
        *[f"repair {r} {part}" for r in (1, 2) for part in ("pools", "tasks", "merge")],
        "check",
    ]
    by = {r["stage"]: r for r in rep["stages"]}
    assert rep["workers"] == 2
    assert by["blocks"]["tasks"] == len(split_blocks(X, 256))
    assert by["repair 1 tasks"]["tasks"] >= 1
    # the blocks ran in the workers: their CPU is counted, and the parent mostly waited
    assert by["blocks"]["cpu_seconds"] > 0.0
    for r in rep["stages"]:
        assert r["seconds"] >= 0.0 and r["busy"] >= 0.0, r
        if r["seconds"] > 0.05:  # below, the two clocks' offsets dominate the ratio
            assert r["busy"] <= 1.2, r
        assert (r["tasks"] > 0) == (r["stage"] in ("blocks", "repair 1 tasks", "repair 2 tasks"))
    assert rep["seconds"] == pytest.approx(sum(r["seconds"] for r in rep["stages"]))
    # the stages without tasks, less their work on the parent's threads (parallel sections)
    serial = (
        sum(r["seconds"] - r["parallel_seconds"] for r in rep["stages"] if r["tasks"] == 0)
        / rep["seconds"]
    )
    assert rep["serial_share"] == pytest.approx(serial)
    assert by["face distances"]["parallel_items"] == by["blocks"]["tasks"]  # one item a block
    assert 0.0 <= rep["serial_cpu_share"] <= 1.0
    table = log.table()
    assert "face distances" in table and "serial share" in table


def test_stage_log_in_process_counts_no_task_cpu_twice() -> None:
    """In this process the tasks' CPU is already the parent's: the busy share stays <= 1 at one
    worker (a worker's CPU would be added, the parent's own is not added again)."""
    X = np.random.default_rng(3).random((2000, 3))
    with stage_log() as log:
        partitioned(X, 3, block_size=256, seed=1)
    for r in log.report()["stages"]:
        if r["seconds"] > 0.05:
            assert r["busy"] <= 1.2, r  # one core: the tasks' CPU is not counted twice
    assert log.workers == 1


def test_cli_report_has_the_stage_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _uniform_file(tmp_path)
    rep_path = tmp_path / "report.json"
    argv = ["anonymize", str(src), str(tmp_path / "out.parquet"), "--qi", ",".join(QI)]
    argv += ["--k", "3", "--method", "partitioned", "--block-size", "256"]
    assert main([*argv, "--workers", "2", "--report", str(rep_path)]) == 0, capsys.readouterr()
    stages = json.loads(rep_path.read_text())["stages"]
    names = [r["stage"] for r in stages["stages"]]
    # the frame's encoding and released figures are stages too: all the parent's work is shown
    assert names[:4] == ["encode", "share", "split", "blocks"]
    assert names[-2:] == ["metrics", "release"]
    assert stages["workers"] == 2 and 0.0 <= stages["serial_share"] <= 1.0


def test_anonymize_report_times_the_whole_call() -> None:
    """anonymize's stage report covers the call from the encoding to the output frame, so the
    stages' seconds add up to nearly the call's own time."""
    from locpriv.tabular.io.frame import anonymize

    rng = np.random.default_rng(5)
    df = pd.DataFrame(rng.random((3000, 3)), columns=["a", "b", "c"])
    df["s"] = np.arange(3000) % 4
    anonymize(df, ["a", "b", "c"], "s", 3, 2, "partitioned", seed=1, block_size=512)  # compile
    t0, c0 = time.perf_counter(), time.process_time()
    out, rep = anonymize(df, ["a", "b", "c"], "s", 3, 2, "partitioned", seed=1, block_size=512)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    names = [r["stage"] for r in rep["stages"]["stages"]]
    assert names[0] == "encode" and names[-4:] == ["metrics", "release", "audit", "output"]
    assert rep["stages"]["seconds"] <= wall
    # CPU seconds, not wall: other jobs on the machine stretch the gaps between the stages'
    # wall clocks, never this process's own work outside them
    inside = sum(r["parent_cpu_seconds"] for r in rep["stages"]["stages"])
    assert inside >= 0.8 * cpu, (inside, cpu)
    assert len(out) == len(df)
