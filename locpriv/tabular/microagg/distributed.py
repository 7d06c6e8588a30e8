"""The partitioned method's block tasks on local worker processes or a dask.distributed cluster.

:func:`process_runner` runs them on ``workers`` processes of this machine (the CLI's default is
one per core: blocks are independent, and the release does not depend on where they ran).

:func:`dask_runner` is a :class:`~locpriv.tabular.microagg.partitioned.Runner`: each block's records
are scattered to the cluster and its task (:func:`~locpriv.tabular.microagg.partitioned.group_block`
or :func:`~locpriv.tabular.microagg.partitioned.regroup_block`, pure functions of their arguments)
runs on a worker; results come back in block order. Blocks and seeds are formed on the client from
the data alone, so the release equals the local run's for the same seed. The workers need locpriv
installed (the same version); the client keeps the key matrix and writes the output file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError
from locpriv.tabular.microagg.partitioned import Progress, Runner

__all__ = ["connect", "dask_runner", "process_runner", "session", "workers_session"]

IntArray = npt.NDArray[np.int64]
_BATCH = 64  # tasks in flight per batch: bounds the client's memory for scattered blocks
CONNECT_TIMEOUT_S = 10.0


class _PoolRunner:
    """A :class:`~locpriv.tabular.microagg.partitioned.Runner` on a ``concurrent.futures``
    executor."""

    def __init__(self, pool: Any, workers: int) -> None:
        self.pool = pool
        self.workers = workers

    def __call__(
        self,
        fn: Callable[..., Any],
        make_args: Callable[[int], tuple[Any, ...]],
        count: int,
        progress: Progress | None,
    ) -> list[Any]:
        futures = [self.pool.submit(fn, *make_args(i)) for i in range(count)]
        out: list[Any] = []
        for i, fut in enumerate(futures):
            out.append(fut.result())
            if progress is not None:
                progress((i + 1) / count)
        return out


def process_runner(pool: Any, workers: int | None = None) -> Runner:
    """A runner on a ``concurrent.futures`` executor: every task submitted at once (a block's
    arguments are built lazily, as its task is submitted), results in block order. ``workers``
    (default: the executor's ``_max_workers``, else 1) is the stage report's core count."""
    w = workers if workers is not None else int(getattr(pool, "_max_workers", 1) or 1)
    return _PoolRunner(pool, max(1, int(w)))


@contextmanager
def workers_session(workers: int) -> Iterator[Runner]:
    """:func:`process_runner` on ``workers`` fresh processes (spawned: no state is inherited;
    the numba kernels load from their on-disk cache), shut down afterwards."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        yield process_runner(pool, workers)


def connect(scheduler: Any) -> Any:
    """A ``dask.distributed.Client`` for ``scheduler``: a client (returned as is) or a scheduler
    address such as ``tcp://HOST:8786``. One-line ConfigError when dask.distributed is not
    installed or the scheduler cannot be reached."""
    try:
        from dask.distributed import Client
    except ImportError:  # pragma: no cover - the dist extra is installed in development
        raise ConfigError(
            "a scheduler needs dask.distributed: pip install 'locpriv[dist]'"
        ) from None
    if isinstance(scheduler, Client):
        return scheduler
    if not isinstance(scheduler, str) or not scheduler:
        raise ConfigError(f"scheduler must be an address like tcp://HOST:8786, got {scheduler!r}")
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT_S)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"cannot reach the dask scheduler at {scheduler}: {exc}") from None


class _DaskRunner:
    """A :class:`~locpriv.tabular.microagg.partitioned.Runner` on a dask.distributed client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        try:
            info = client.scheduler_info()
            self.workers = max(1, sum(int(w.get("nthreads", 1)) for w in info["workers"].values()))
        except (KeyError, AttributeError, TypeError, OSError):  # pragma: no cover - defensive
            self.workers = 1

    def __call__(
        self,
        fn: Callable[..., Any],
        make_args: Callable[[int], tuple[Any, ...]],
        count: int,
        progress: Progress | None,
    ) -> list[Any]:
        from dask.distributed import wait

        client = self.client
        out: list[Any] = []
        for lo in range(0, count, _BATCH):
            futures = []
            for i in range(lo, min(count, lo + _BATCH)):
                args = [
                    client.scatter(a, hash=False) if isinstance(a, np.ndarray) else a
                    for a in make_args(i)
                ]
                futures.append(client.submit(fn, *args, pure=False))
            wait(futures)  # type: ignore[no-untyped-call]
            out.extend(client.gather(futures))
            if progress is not None:
                progress(len(out) / count)
        return out


def dask_runner(client: Any) -> Runner:
    """A runner that executes the tasks on ``client``'s cluster, in batches of 64 blocks; its
    ``workers`` (the stage report's core count) is the cluster's total of worker threads."""
    return _DaskRunner(client)


@contextmanager
def session(scheduler: Any) -> Iterator[Runner]:
    """:func:`dask_runner` on ``scheduler`` (an address or a client); a client made here from an
    address is closed on exit, a given one is left open."""
    client = connect(scheduler)
    try:
        yield dask_runner(client)
    finally:
        if client is not scheduler:
            client.close()
