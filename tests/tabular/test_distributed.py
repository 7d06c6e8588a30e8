"""The partitioned method on a real dask.distributed LocalCluster (two worker processes): the
release equals the local run's, through the Python API (a Client) and the CLI (--scheduler)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster, get_task_stream

from locpriv.cli import main
from locpriv.tabular import anonymize
from locpriv.tabular.psensitive.kincrease import group_is_p_sensitive

QI = [f"x{j}" for j in range(5)]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def table_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(11)
    n = 2500
    df = pd.DataFrame(rng.random((n, 5)), columns=QI)
    df["s"] = rng.integers(0, 8, n)
    df["id"] = np.arange(n)
    path = tmp_path / "in.parquet"
    df.to_parquet(path, index=False, row_group_size=1000)
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("p", [1, 2])
def test_cluster_release_equals_the_local_release(client: Any, table_file: Path, p: int) -> None:
    df = pd.read_parquet(table_file)
    kw: dict[str, Any] = {"method": "partitioned", "block_size": 256, "seed": 4, "drop": "id"}
    local, rep_local = anonymize(df, QI, ["s"], 3, p, **kw)
    with get_task_stream(client) as stream:
        remote, rep_remote = anonymize(df, QI, ["s"], 3, p, scheduler=client, **kw)
    assert len(stream.data) >= 2  # the blocks did run on the cluster, not locally
    pd.testing.assert_frame_equal(local, remote)
    assert rep_local["sse"] == rep_remote["sse"] and rep_remote["min_group_size"] >= 3
    groups = remote.groupby(QI).ngroup().to_numpy()
    assert group_is_p_sensitive(groups, remote[["s"]].to_numpy(), p)
    assert len(client.scheduler_info()["workers"]) == 2


@pytest.mark.timeout(120)
def test_cli_scheduler_writes_the_local_release(
    client: Any, table_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["anonymize", str(table_file), "", "--qi", ",".join(QI), "--sensitive", "s"]
    argv += ["--k", "3", "--p", "2", "--method", "partitioned", "--block-size", "256"]
    argv += ["--seed", "3"]
    outs = {}
    for name, extra in (("local", []), ("cluster", ["--scheduler", client.scheduler.address])):
        argv[2] = str(tmp_path / f"{name}.parquet")
        with get_task_stream(client) as stream:
            assert main([*argv, *extra]) == 0, capsys.readouterr().err
        # the CLI's own connection ran the blocks on the cluster (and only when asked to)
        assert (len(stream.data) >= 2) == (name == "cluster"), (name, len(stream.data))
        outs[name] = pd.read_parquet(argv[2])
    pd.testing.assert_frame_equal(outs["local"], outs["cluster"])


def test_unreachable_scheduler_is_one_line_and_no_output(
    table_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setattr("locpriv.tabular.microagg.distributed.CONNECT_TIMEOUT_S", 1.0)
    dst = tmp_path / "out.parquet"
    argv = ["anonymize", str(table_file), str(dst), "--qi", ",".join(QI), "--k", "3"]
    argv += ["--method", "partitioned", "--scheduler", "tcp://127.0.0.1:9"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the dask scheduler" in err[0]
    assert not dst.exists()


@pytest.mark.timeout(120)
def test_cluster_report_counts_the_workers_and_their_cpu(client: Any, table_file: Path) -> None:
    df = pd.read_parquet(table_file)
    kw: dict[str, Any] = {"method": "partitioned", "block_size": 256, "seed": 4, "drop": ["id"]}
    _, rep = anonymize(df, QI, ["s"], 3, 1, scheduler=client, **kw)
    stages = rep["stages"]
    assert stages["workers"] == 2  # two single-threaded workers
    by = {r["stage"]: r for r in stages["stages"]}
    assert by["blocks"]["tasks"] >= 2 and by["blocks"]["cpu_seconds"] > 0.0
    assert 0.0 <= stages["serial_share"] <= 1.0
