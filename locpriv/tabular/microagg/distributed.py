"""The partitioned method's block tasks on local worker threads or processes, or a dask.distributed
cluster.

:func:`workers_session` runs them on ``workers`` threads of this process (the default,
``kind="threads"``) or spawned processes (``kind="processes"``); the CLI's default is one per
core: blocks are independent, and the release does not depend on where they ran.

* **Threads** (:func:`thread_runner`) share the key matrix: a task carries its row indices and
  copies its records itself (:class:`LocalRows`). The block tasks spend their time in numba
  kernels compiled with ``nogil=True``, which release the GIL, so the threads run on every core;
  a thread adds only its block's working set (a few MB), not an interpreter and the kernels.
* **Processes** (:func:`process_runner`) get the key matrix once, in shared memory
  (:class:`SharedMatrix`): a task carries only its row indices (8 bytes a record instead of
  8·d) and the worker reads its records from the shared pages, so the parent no longer pickles
  each block (it falls back to pickling where ``/dev/shm`` lacks the room). Each process holds
  its own interpreter, libraries and numba kernels (about 420 MB of its own, measured at 1M x 13).

:func:`dask_runner` is a :class:`~locpriv.tabular.microagg.partitioned.Runner`: each block's records
are scattered to the cluster and its task (:func:`~locpriv.tabular.microagg.partitioned.group_block`
or :func:`~locpriv.tabular.microagg.partitioned.regroup_block`, pure functions of their arguments)
runs on a worker; results come back in block order. Blocks and seeds are formed on the client from
the data alone, so the release equals the local run's for the same seed. The workers need locpriv
installed (the same version); the client keeps the key matrix and writes the output file.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError
from locpriv.tabular.microagg.partitioned import Progress, Runner

__all__ = [
    "WORKER_KINDS",
    "LocalRows",
    "SharedMatrix",
    "check_workers_kind",
    "connect",
    "dask_runner",
    "process_runner",
    "release_free_memory",
    "session",
    "thread_runner",
    "workers_session",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
_BATCH = 64  # tasks in flight per batch: bounds the client's memory for scattered blocks
CONNECT_TIMEOUT_S = 10.0
SHM_DIR = "/dev/shm"  # POSIX shared memory's file system (only its free room is read)
SHM_HEADROOM = 2.0
"""Shared memory is used only where its file system has this many times the matrix free: a
tmpfs written past its size kills the writer with SIGBUS (Docker's default /dev/shm is 64 MB)."""

WORKER_KINDS = ("threads", "processes")
"""Kinds of local workers (:func:`workers_session`); the first is the default."""

# the segment this worker process last attached: (name, segment, matrix view); one at a time,
# so a worker that outlives a run keeps no more than one matrix mapped
_ATTACHED: list[tuple[str, Any, FloatArray]] = []


class SharedMatrix:
    """A picklable handle of a float64 matrix in POSIX shared memory (``name``, ``shape``).
    :meth:`take` runs in a worker: it maps the segment (once per process) and copies the given
    rows out, equal bit for bit to ``X[rows]`` of the parent's matrix."""

    def __init__(self, name: str, shape: tuple[int, int]) -> None:
        self.name = name
        self.shape = shape

    def take(self, rows: npt.NDArray[np.intp]) -> FloatArray:
        """``X[rows]`` (a C-contiguous copy)."""
        if not _ATTACHED or _ATTACHED[0][0] != self.name:
            while _ATTACHED:
                _, old, _ = _ATTACHED.pop()
                old.close()
            seg = shared_memory.SharedMemory(name=self.name)
            view: FloatArray = np.ndarray(self.shape, dtype=np.float64, buffer=seg.buf)
            _ATTACHED.append((self.name, seg, view))
        out: FloatArray = _ATTACHED[0][2][rows]
        return out


class LocalRows:
    """The key matrix of this process as a :class:`~locpriv.tabular.microagg.partitioned.RowSource`
    for worker threads: :meth:`take` copies the given rows in the thread that runs the task, so
    tasks waiting in the queue hold row indices only, never a copy of their block."""

    def __init__(self, X: FloatArray) -> None:
        self.X = X

    def take(self, rows: npt.NDArray[np.intp]) -> FloatArray:
        """``X[rows]`` (a C-contiguous copy)."""
        out: FloatArray = self.X[rows]
        return out


def _shm_room(nbytes: int) -> bool:
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize >= SHM_HEADROOM * nbytes


class _Executor:
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


class _PoolRunner(_Executor):
    """An :class:`_Executor` on worker processes: the key matrix goes to them in shared
    memory."""

    @contextmanager
    def shared(self, X: FloatArray) -> Iterator[SharedMatrix | None]:
        """``X`` copied into a fresh shared-memory segment for the ``with`` body (unlinked on
        exit), or ``None`` (pickle the blocks) where shared memory lacks the room."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.nbytes == 0 or not _shm_room(X.nbytes):
            yield None
            return
        seg = shared_memory.SharedMemory(create=True, size=X.nbytes)
        try:
            np.ndarray(X.shape, dtype=np.float64, buffer=seg.buf)[...] = X
            yield SharedMatrix(seg.name, (int(X.shape[0]), int(X.shape[1])))
        finally:
            seg.close()
            seg.unlink()


class _ThreadRunner(_Executor):
    """An :class:`_Executor` on a thread pool: the tasks read the parent's matrix directly."""

    @contextmanager
    def shared(self, X: FloatArray) -> Iterator[LocalRows]:
        """``X`` itself, read by the threads (no copy, no segment)."""
        yield LocalRows(X)


def thread_runner(pool: Any, workers: int | None = None) -> Runner:
    """A runner on a ``concurrent.futures.ThreadPoolExecutor``: as :func:`process_runner`, but
    each task copies its records from the parent's key matrix in its own thread
    (:class:`LocalRows`). The tasks' numba kernels release the GIL (``nogil=True``)."""
    w = workers if workers is not None else int(getattr(pool, "_max_workers", 1) or 1)
    return _ThreadRunner(pool, max(1, int(w)))


def process_runner(pool: Any, workers: int | None = None) -> Runner:
    """A runner on a ``concurrent.futures`` executor: every task submitted at once (a block's
    arguments are built lazily, as its task is submitted), results in block order. ``workers``
    (default: the executor's ``_max_workers``, else 1) is the stage report's core count."""
    w = workers if workers is not None else int(getattr(pool, "_max_workers", 1) or 1)
    return _PoolRunner(pool, max(1, int(w)))


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim(0)``, every
    arena; a no-op elsewhere). Each worker thread allocates in its own malloc arena, which keeps
    the block tasks' freed buffers mapped after the threads are done (measured: +275 MB of
    resident memory after 16 threads at 1M x 13, held into the release, the parent's peak)."""
    try:  # the symbols already loaded into this process (no library search, no subprocess)
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)


def check_workers_kind(kind: object) -> str:
    """``kind`` if it is one of :data:`WORKER_KINDS`, else a one-line ConfigError."""
    if not isinstance(kind, str) or kind not in WORKER_KINDS:
        raise ConfigError(f"workers_kind must be one of {', '.join(WORKER_KINDS)}; got {kind!r}")
    return kind


@contextmanager
def workers_session(workers: int, kind: str = WORKER_KINDS[0]) -> Iterator[Runner]:
    """A runner on ``workers`` local workers of ``kind``: ``"threads"`` (:func:`thread_runner`,
    the default: threads of this process, shut down after their tasks) or ``"processes"``
    (:func:`process_runner` on fresh processes, spawned: no state is inherited; the numba
    kernels load from their on-disk cache; shut down without waiting for them to exit).
    Pending tasks of a failed run are cancelled. The release is the same for every kind."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    check_workers_kind(kind)
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
    if kind == "threads":
        threads = ThreadPoolExecutor(max_workers=int(workers), thread_name_prefix="locpriv-block")
        try:
            yield thread_runner(threads, int(workers))
        finally:
            threads.shutdown(wait=True, cancel_futures=True)
            release_free_memory()
        return
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    try:
        yield process_runner(pool, workers)
    finally:
        # every result is in: the workers exit in the background (tearing down an interpreter
        # with numba loaded took 2.6 s on a busy 2-core machine, a serial wait for nothing)
        pool.shutdown(wait=False, cancel_futures=True)


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
