"""Partitioned microaggregation for large data sets (method ``"partitioned"``).

Exact MDAV costs O(n²); this method costs O(n) for a fixed block size. The records are cut into
blocks of at most ``block_size`` records by a k-d split (median cuts on the widest column, the
tree of :func:`locpriv.tabular.microagg._kernels.mdav_blocks.kd_blocks`), which keeps neighbours
together, and each block is microaggregated on its own:

* k-anonymity (p = 1): MDAV, then local search (record moves and swaps towards the groups of
  each record's 12 nearest neighbours, :func:`~locpriv.tabular.microagg.improve.improve_partition`),
  so groups have k..2k-1 records;
* p-sensitive k-anonymity (p >= 2): Solanas et al.'s heuristic with the MDAV seed
  (:func:`~locpriv.tabular.psensitive.seeded.seeded_groups`). A block whose records cannot form a
  p-sensitive group (fewer than k records or p values) is left over: its records join the group
  with the nearest centroid, which keeps that group k-anonymous and p-sensitive.

**Border repair.** A block groups the records at its cut faces without their neighbours across
the face, so its worst groups lie there. Each of ``repair_rounds`` rounds dissolves the
``repair_share`` of groups with the highest squared error per record and pools them; the pool is
cut into blocks again by a k-d split of those groups' centroids in a rotated basis (the new cuts
cross the old faces instead of falling on them) and each pool block is regrouped by the same
block method. New groups replace the old ones of a pool block only when their SSE is lower and
every new group has k records (and p distinct values of every confidential attribute), so a
round never raises the information loss and never breaks the guarantees.

Every block and pool block is an independent pure task whose random seed derives from
(seed, round, block); blocks are formed from the data alone. The release therefore does not depend
on where or in which order the tasks run: :mod:`locpriv.tabular.microagg.distributed` runs them on a
dask.distributed cluster with the same result as the local run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from scipy.spatial import cKDTree

from locpriv.errors import ConfigError, InfeasibleError
from locpriv.tabular._kernels.block_index import kd_cut as _kd_cut
from locpriv.tabular._kernels.block_index import kd_width as _kd_width
from locpriv.tabular.checks import as_codes, check_k, check_matrix
from locpriv.tabular.microagg._kernels.mdav_blocks import kd_blocks
from locpriv.tabular.microagg._kernels.neighbours import knn_approx, knn_exact
from locpriv.tabular.microagg._kernels.partition_stats import canonical as _canonical_kernel
from locpriv.tabular.microagg._kernels.partition_stats import face_distance_range as _face_range
from locpriv.tabular.microagg._kernels.partition_stats import pool_stats_range as _pool_range
from locpriv.tabular.microagg._kernels.partition_stats import rows_by_bucket as _bucket_kernel
from locpriv.tabular.microagg.improve import _canonical, improve_partition
from locpriv.tabular.microagg.mdav import mdav
from locpriv.tabular.psensitive.kincrease import group_is_p_sensitive, require_feasible
from locpriv.tabular.psensitive.seeded import seeded_groups
from locpriv.tabular.quality._kernels.chunks import group_order, means_range
from locpriv.tabular.quality.metrics import group_means, ranges, sse
from locpriv.tabular.threads import map_items

__all__ = [
    "BLOCK_SIZE",
    "DEFAULT_FROM_N",
    "RowSource",
    "Runner",
    "StageLog",
    "current_stage_log",
    "group_block",
    "partitioned",
    "regroup_block",
    "run_local",
    "split_blocks",
    "stage_log",
    "take_rows",
    "timed_task",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
IntpArray = npt.NDArray[np.intp]

BLOCK_SIZE = 32768
"""Default records per block (see docs/tabular.md for the trade-off measured on 13-D data)."""
DEFAULT_FROM_N = 200_000
"""Records from which ``method=None`` (the CLI's default) runs the partitioned method."""
REPAIR_ROUNDS = 2
REPAIR_SHARE = 0.3
_NEIGHBOURS = 12  # neighbour graph of the local search: 12 nearest records,
_TREES = 3  # from a random-projection forest of 3 trees
_LEAF = 48  # with leaves of 48 records,
_EXACT_MAX = 4000  # exact up to this many records
_SWEEPS = 6  # at most 6 sweeps of moves and swaps


class Progress(Protocol):
    """Progress callback: a fraction in [0, 1] of the current stage."""

    def __call__(self, fraction: float, /) -> None: ...


class Runner(Protocol):
    """Runs ``fn(*make_args(i))`` for ``i`` in ``range(count)``; returns the results in order.
    A runner may carry a ``workers`` attribute (the tasks it runs at once; 1 if absent), the
    denominator of the stage report's share of cores busy."""

    def __call__(
        self,
        fn: Callable[..., Any],
        make_args: Callable[[int], tuple[Any, ...]],
        count: int,
        progress: Progress | None,
    ) -> list[Any]: ...


def run_local(
    fn: Callable[..., Any],
    make_args: Callable[[int], tuple[Any, ...]],
    count: int,
    progress: Progress | None,
) -> list[Any]:
    """The in-process :class:`Runner`: one task after the other (arguments built lazily)."""
    out: list[Any] = []
    for i in range(count):
        out.append(fn(*make_args(i)))
        if progress is not None:
            progress((i + 1) / count)
    return out


class StageLog:
    """Wall seconds and CPU seconds per stage of a run (pure bookkeeping: nothing it records
    feeds back into the release).

    A stage's CPU seconds are the parent process's own (``time.process_time``, all its threads;
    also recorded alone as ``parent_cpu_seconds``: in a stage of tasks run elsewhere, the cost
    of sending them) plus those of the tasks that ran in other processes, measured inside the
    worker around the task (:func:`timed_task`). ``busy`` = CPU seconds / (wall seconds x
    ``workers``): the share of the cores given to the run that the stage kept busy; a stage run
    by the parent alone on one thread has ``busy`` <= 1 / workers. A stage's column-wise work
    run by :func:`locpriv.tabular.threads.map_items` is a *parallel section*
    (:meth:`parallel_done`): the row adds ``parallel_seconds``, ``parallel_cpu_seconds``,
    ``parallel_items`` (the fewest items of its sections: the most threads they can use),
    ``parallel_by_items`` (wall seconds of its sections by their number of items) and
    ``threads`` (the most threads they ran on); a section of one item (the first cut of the
    k-d split) runs on one thread and stays serial: it is only in ``parallel_by_items``.
    ``serial_share`` (:meth:`serial_share`) is the share of the wall time spent in stages
    without tasks, less their parallel sections: Amdahl's serial fraction at 1 worker.
    """

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, int(workers))
        self.rows: list[dict[str, Any]] = []
        self._task_cpu = 0.0
        self._tasks = 0
        self._par: list[tuple[float, float, int, int]] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the ``with`` body as stage ``name`` (a repeated name adds a row)."""
        w0, c0 = time.perf_counter(), time.process_time()
        self._task_cpu, self._tasks, self._par = 0.0, 0, []
        try:
            yield
        finally:
            wall = time.perf_counter() - w0
            own = time.process_time() - c0
            self.rows.append(
                {
                    "stage": name,
                    "seconds": wall,
                    "cpu_seconds": own + self._task_cpu,
                    "parent_cpu_seconds": own,
                    "tasks": self._tasks,
                    **self._parallel_fields(),
                }
            )

    def add(self, name: str, seconds: float, cpu_seconds: float) -> None:
        """Record a stage timed by the caller (wall and parent CPU seconds, no tasks; the
        parallel sections recorded since the previous stage are its own)."""
        self.rows.append(
            {
                "stage": name,
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "parent_cpu_seconds": cpu_seconds,
                "tasks": 0,
                **self._parallel_fields(),
            }
        )

    def parallel_done(self, seconds: float, cpu_seconds: float, items: int, threads: int) -> None:
        """Record a parallel section of the current stage: ``items`` independent items run on
        ``threads`` threads in ``seconds`` wall and ``cpu_seconds`` CPU seconds (part of the
        stage's own, not added to them)."""
        self._par.append((seconds, cpu_seconds, int(items), int(threads)))

    def _parallel_fields(self) -> dict[str, Any]:
        every, self._par = self._par, []
        by_items: dict[str, float] = {}
        for sec, _, items, _ in every:
            by_items[str(items)] = by_items.get(str(items), 0.0) + sec
        par = [p for p in every if p[2] > 1]  # a section of one item runs on one thread
        return {
            "parallel_seconds": sum(p[0] for p in par),
            "parallel_cpu_seconds": sum(p[1] for p in par),
            "parallel_items": min((p[2] for p in par), default=0),
            "parallel_by_items": by_items,
            "threads": max((p[3] for p in par), default=1),
        }

    def tasks_done(self, results: list[tuple[Any, float, int]]) -> list[Any]:
        """Unwrap :func:`timed_task` results, adding the CPU seconds of those run by other
        processes to the current stage; returns the tasks' own results in order."""
        me = os.getpid()
        self._tasks += len(results)
        self._task_cpu += sum(cpu for _, cpu, pid in results if pid != me)
        return [out for out, _, _ in results]

    def _busy(self, row: dict[str, Any]) -> float:
        wall = float(row["seconds"])
        return float(row["cpu_seconds"]) / (wall * self.workers) if wall > 0 else 0.0

    def serial_share(self) -> float:
        """Share of the wall time in stages that ran no task (the parent alone), less their
        parallel sections (:meth:`parallel_done`)."""
        total = sum(r["seconds"] for r in self.rows)
        serial = sum(
            r["seconds"] - r.get("parallel_seconds", 0.0) for r in self.rows if r["tasks"] == 0
        )
        return max(serial, 0.0) / total if total > 0 else 0.0

    def serial_cpu_share(self) -> float:
        """Share of the CPU seconds spent in stages that ran no task, less their parallel
        sections: the serial fraction as the work measures it, which other jobs on the machine
        distort less than wall time."""
        total = sum(r["cpu_seconds"] for r in self.rows)
        serial = sum(
            r["cpu_seconds"] - r.get("parallel_cpu_seconds", 0.0)
            for r in self.rows
            if r["tasks"] == 0
        )
        return max(serial, 0.0) / total if total > 0 else 0.0

    def report(self) -> dict[str, Any]:
        """The JSON form: ``{"workers", "stages": [...], "seconds", "serial_share",
        "serial_cpu_share"}``."""
        return {
            "workers": self.workers,
            "stages": [{**r, "busy": self._busy(r)} for r in self.rows],
            "seconds": sum(r["seconds"] for r in self.rows),
            "serial_share": self.serial_share(),
            "serial_cpu_share": self.serial_cpu_share(),
        }

    def table(self) -> str:
        """A short text table of the stages (seconds, share of cores busy, tasks)."""
        lines = [f"{'stage':<22} {'seconds':>9} {'busy':>6} {'tasks':>6}"]
        for r in self.rows:
            busy = 100 * self._busy(r)
            lines.append(f"{r['stage']:<22} {r['seconds']:>9.3f} {busy:>5.0f}% {r['tasks']:>6}")
        lines.append(
            f"{'total':<22} {sum(r['seconds'] for r in self.rows):>9.3f} "
            f"(serial share {100 * self.serial_share():.1f} %, {self.workers} workers)"
        )
        return "\n".join(lines)


_CURRENT: ContextVar[StageLog | None] = ContextVar("locpriv_stage_log", default=None)


@contextmanager
def stage_log(workers: int = 1) -> Iterator[StageLog]:
    """A :class:`StageLog` that :func:`partitioned` (and callers such as the estimator) record
    into while the ``with`` block runs in this context."""
    log = StageLog(workers)
    token = _CURRENT.set(log)
    try:
        yield log
    finally:
        _CURRENT.reset(token)


def current_stage_log() -> StageLog | None:
    """The :class:`StageLog` of the enclosing :func:`stage_log`, if any."""
    return _CURRENT.get()


def timed_task(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, int]:
    """Run one task; ``(result, CPU seconds of this process during it, process id)``. The CPU
    time is ``time.process_time`` (every thread: numba's parallel kernels included), valid as
    the task's own because a worker runs one task at a time."""
    c0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - c0, os.getpid()


class RowSource(Protocol):
    """Records of the key matrix that a worker reads itself (a runner's ``shared(X)``
    context yields one, e.g. :class:`~locpriv.tabular.microagg.distributed.SharedMatrix`)."""

    def take(self, rows: IntpArray, /) -> FloatArray: ...


def take_rows(fn: Callable[..., Any], source: RowSource, rows: IntpArray, *rest: Any) -> Any:
    """A task whose records are read in the worker: ``fn(source.take(rows), *rest)``, the same
    call as ``fn(X[rows], *rest)`` in the parent."""
    return fn(source.take(rows), *rest)


def task_seed(seed: int, round_: int, block: int) -> int:
    """The seed of one task: a function of (seed, round, block) only."""
    return int(np.random.SeedSequence([seed, round_, block]).generate_state(1)[0])


def split_blocks(X: FloatArray, block_size: int) -> list[IntpArray]:
    """Row indices (ascending) of the leaves of a k-d tree over ``X``: median cuts on the widest
    column until a leaf has at most ``block_size`` records. Depends on ``X`` only.

    The tree of :func:`kd_blocks`, cut level by level on the parent's threads
    (:func:`~locpriv.tabular.threads.map_items`): the widths of every node's columns (nodes x
    columns items), then the nodes' cuts (one item each). A node's cut depends on its own
    records alone, so the leaves are :func:`kd_blocks`' for any thread count."""
    B = max(int(block_size), 1)
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    XT = np.empty((d, n))

    def transpose(r: tuple[int, int]) -> None:
        XT[:, r[0] : r[1]] = X[r[0] : r[1]].T

    map_items(transpose, ranges(n))
    perm = np.arange(n, dtype=np.int64)
    key, tmp = np.empty(n), np.empty(n, dtype=np.int64)
    level, leaves = [(0, n)], []
    while level:
        leaves += [r for r in level if r[1] - r[0] <= B]
        cut = [r for r in level if r[1] - r[0] > B]
        if not cut:
            break
        widths = map_items(
            lambda rj: _kd_width(XT, perm, rj[0][0], rj[0][1], rj[1]),
            [(r, j) for r in cut for j in range(d)],
        )
        jw = [_first_widest(widths[i * d : (i + 1) * d]) for i in range(len(cut))]
        mids = map_items(
            lambda rj: _kd_cut(XT, perm, rj[0][0], rj[0][1], rj[1], key, tmp),
            list(zip(cut, jw, strict=True)),
        )
        level = [h for r, m in zip(cut, mids, strict=True) for h in ((r[0], m), (m, r[1]))]
    return map_items(lambda r: np.sort(perm[r[0] : r[1]]).astype(np.intp), sorted(leaves))


def _first_widest(widths: list[float]) -> int:
    """The first column of the greatest width, as :func:`kd_blocks` chooses it."""
    jw, best = 0, -1.0
    for j, w in enumerate(widths):
        if w > best:
            jw, best = j, w
    return jw


def _neighbour_graph(W: FloatArray, seed: int) -> IntArray:
    L = min(_NEIGHBOURS, W.shape[0] - 1)
    if W.shape[0] <= _EXACT_MAX:
        out: IntArray = knn_exact(W, L)
    else:
        out = knn_approx(W, L, _TREES, _LEAF, seed)
    return out


def group_block(  # noqa: PLR0917 - a task: runners call it positionally
    W: FloatArray,
    codes: IntArray | None,
    k: int,
    p: int,
    seed: int,
    start: IntArray | None = None,
) -> IntArray:
    """Labels ``0..g-1`` of one block (a pure task); all ``-1`` when the block cannot hold a
    group (fewer than ``k`` records, or with ``p >= 2`` fewer than ``p`` values of an attribute).
    With ``start`` (p = 1), the local search also runs from that partition and the lower-SSE
    result is returned.
    """
    n = W.shape[0]
    diverse = (
        codes is None
        or p <= 1
        or all(np.unique(codes[:, j]).size >= p for j in range(codes.shape[1]))
    )
    if n < k or not diverse:
        return np.full(n, -1, dtype=np.int64)
    # work in the leaf order of a fine k-d tree: neighbours lie near each other in memory
    # (a fifth less time than the given order); labels are mapped back at the end
    order, _ = kd_blocks(np.ascontiguousarray(W, dtype=np.float64), 32)
    Wo = np.ascontiguousarray(W[order])
    if codes is None or p <= 1:
        lab = mdav(Wo, k)
        if n >= 4 * k:
            rng = np.random.default_rng(seed)
            nbr = _neighbour_graph(Wo, seed)
            lab = improve_partition(Wo, lab, k, rng=rng, max_iter=_SWEEPS, pairs=False, _nbr=nbr)
            if start is not None:
                alt = improve_partition(
                    Wo, start[order], k, rng=rng, max_iter=_SWEEPS, pairs=False, _nbr=nbr
                )
                if sse(Wo, alt) < sse(Wo, lab):
                    lab = alt
    else:
        lab = seeded_groups(Wo, np.ascontiguousarray(codes[order]), k, p, seed_mode="mdav")
    out = np.empty(n, dtype=np.int64)
    out[order] = lab
    return out


def regroup_block(  # noqa: PLR0917 - a task: runners call it positionally
    W: FloatArray, codes: IntArray | None, old: IntArray, k: int, p: int, seed: int
) -> IntArray | None:
    """New labels for a pool block (whole groups ``old``), or ``None`` to keep the old ones: the
    new groups must all have >= k records (and p values) and a lower SSE."""
    new = group_block(W, codes, k, p, seed, old)
    if new.size == 0 or int(new.min()) < 0 or int(np.bincount(new).min()) < k:
        return None
    if codes is not None and p > 1 and not group_is_p_sensitive(new, codes, p):
        return None  # pragma: no cover - the heuristic guarantees it; the check is independent
    if sse(W, new) < sse(W, old) * (1.0 - 1e-12):
        return new
    return None


def _face_distance(X: FloatArray, blocks: list[IntpArray]) -> FloatArray:
    """Each record's distance to the nearest cut face of its block (a face of the block's box
    inside the data's box; the data's own boundary is no cut). One numba pass per block."""
    rows = np.concatenate(blocks).astype(np.int64)
    starts = np.zeros(len(blocks) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([b.size for b in blocks])
    X = np.ascontiguousarray(X, dtype=np.float64)
    lo, hi = X.min(axis=0), X.max(axis=0)
    out: FloatArray = np.empty(X.shape[0])
    # one item per block, on the parent's threads (a record's value depends on its block)
    map_items(
        lambda b: _face_range(X, rows, starts, lo, hi, b, b + 1, out), list(range(len(blocks)))
    )
    return out


def _relabel(labels: IntArray) -> IntArray:
    """Labels (>= 0) renumbered by each group's first record (= ``_canonical``, one pass)."""
    out: IntArray = _canonical_kernel(labels, int(labels.max()) + 1)
    return out


def _repair_pools(  # noqa: PLR0917
    X: FloatArray,
    labels: IntArray,
    face: FloatArray,
    share: float,
    block_size: int,
    seed: int,
) -> list[IntpArray]:
    """Row indices (ascending) of the pool blocks of one repair round: the groups at the cut
    faces (their nearest member closer to a face than twice the group's rms radius), the worst
    first (highest squared error per record), at most ``share`` of all groups; cut by a k-d split
    of their centroids in a rotated basis into blocks of about ``block_size`` records."""
    g = int(labels.max()) + 1
    X = np.ascontiguousarray(X, dtype=np.float64)
    # ranges of groups on the parent's threads, each group's sums in row order (as bincount's)
    order, start = group_order(labels, g)
    cen, err, near = np.empty((g, X.shape[1])), np.empty(g), np.empty(g)

    def stats(r: tuple[int, int]) -> None:
        means_range(X, order, start, r[0], r[1], cen)
        _pool_range(X, order, start, cen, face, r[0], r[1], err, near)

    map_items(stats, ranges(g))
    cnt = np.diff(start)
    per = err / cnt
    at_face = np.flatnonzero(near < 2.0 * np.sqrt(per))
    m = min(int(share * g), at_face.size)
    if m < 2:
        return []
    bad = at_face[np.argsort(-per[at_face], kind="stable")[:m]]
    d = X.shape[1]
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    C = np.ascontiguousarray(cen[bad] @ Q)
    per_block = max(2, block_size * m // max(1, int(cnt[bad].sum())))
    cells = split_blocks(C, per_block)  # kd_blocks' leaves, cut on the parent's threads
    where = np.full(g, -1, dtype=np.int64)
    for b, cell in enumerate(cells):
        where[bad[cell]] = b
    rows, at = _bucket_kernel(where[labels], len(cells))  # each pool's rows, ascending
    pools = [rows[at[b] : at[b + 1]] for b in range(len(cells))]
    return [idx.astype(np.intp) for idx in pools if idx.size]


def _join_nearest(X: FloatArray, labels: IntArray) -> None:
    """Records labelled -1 join the group with the nearest centroid (in place)."""
    left = np.flatnonzero(labels < 0)
    if left.size == 0:
        return
    g = int(labels.max()) + 1
    have = labels >= 0
    cen = group_means(X[have], labels[have], g)
    _, nearest = cKDTree(cen).query(X[left])
    labels[left] = np.asarray(nearest, dtype=np.int64)


def _check_release(labels: IntArray, codes: IntArray | None, k: int, p: int) -> None:
    """The independent check of every group; a failure is a bug, never a silent release."""
    if int(labels.min()) < 0 or int(np.bincount(labels).min()) < k:
        raise InfeasibleError(
            f"partitioned: a group has fewer than k={k} records"
        )  # pragma: no cover
    if codes is not None and p > 1 and not group_is_p_sensitive(labels, codes, p):
        raise InfeasibleError(
            f"partitioned: a group has fewer than p={p} values"
        )  # pragma: no cover


def _pool_args(  # noqa: PLR0917
    load: Callable[[Callable[..., Any], IntpArray], tuple[Any, ...]],
    codes: IntArray | None,
    pools: list[IntpArray],
    labels: IntArray,
    k: int,
    p: int,
    seed: int,
    round_: int,
) -> Callable[[int], tuple[Any, ...]]:
    """The task of pool block b (:func:`regroup_block`), ``load`` giving its records."""

    def make(b: int) -> tuple[Any, ...]:
        rows = pools[b]
        sub = None if codes is None else np.ascontiguousarray(codes[rows])
        old = _canonical(labels[rows]).astype(np.int64)
        return (*load(regroup_block, rows), sub, old, k, p, task_seed(seed, round_, b))

    return make


def partitioned(
    X: npt.ArrayLike,
    k: int,
    S: npt.ArrayLike | None = None,
    p: int = 1,
    *,
    seed: int = 0,
    block_size: int = BLOCK_SIZE,
    repair_rounds: int = REPAIR_ROUNDS,
    repair_share: float = REPAIR_SHARE,
    runner: Runner | None = None,
    progress: Progress | None = None,
) -> IntArray:
    """Labels ``0..g-1`` (numbered by each group's first record) of a k-anonymous partition of
    ``X`` (p-sensitive on the confidential attributes ``S`` when ``p >= 2``); see the module
    docstring. ``runner`` runs the block tasks (default: in this process, one after the other;
    :func:`locpriv.tabular.microagg.distributed.dask_runner` on a cluster, same result).
    ``progress`` receives the fraction done of each stage and, if it has a ``stage(name)`` method,
    the stage names (``blocks``, ``repair 1``, ...). Deterministic for a given ``seed``. Inside a
    :func:`stage_log` block the wall and CPU seconds of every stage are recorded there.
    """
    Xf = check_matrix(X)
    n = Xf.shape[0]
    kk = check_k(k, n)
    codes = as_codes(S, n) if S is not None else None
    pp = max(1, int(p))
    if pp > 1:
        if codes is None:
            raise ConfigError(f"p={pp} needs confidential attributes")
        require_feasible(codes, kk, pp)
    if int(block_size) < 4 * kk:
        raise ConfigError(f"block_size must be at least 4k = {4 * kk}, got {block_size}")
    run = runner if runner is not None else run_local
    log = current_stage_log() or StageLog()
    log.workers = max(1, int(getattr(run, "workers", 1)))

    shared: Callable[[FloatArray], Any] | None = getattr(run, "shared", None)
    with ExitStack() as stack:
        source: RowSource | None = None
        if shared is not None:
            with log.stage("share"):
                source = stack.enter_context(shared(Xf))

        def load(fn: Callable[..., Any], rows: IntpArray) -> tuple[Any, ...]:
            """A task's callable and its records (or where the worker reads them)."""
            return (fn, Xf[rows]) if source is None else (take_rows, fn, source, rows)

        return _run_partitioned(
            Xf,
            codes,
            kk,
            pp,
            seed,
            block_size,
            repair_rounds,
            repair_share,
            run,
            progress,
            log,
            load,
        )


def _run_partitioned(  # noqa: PLR0917 - the body of partitioned, its checks done
    Xf: FloatArray,
    codes: IntArray | None,
    kk: int,
    pp: int,
    seed: int,
    block_size: int,
    repair_rounds: int,
    repair_share: float,
    run: Runner,
    progress: Progress | None,
    log: StageLog,
    load: Callable[[Callable[..., Any], IntpArray], tuple[Any, ...]],
) -> IntArray:
    n = Xf.shape[0]
    step: Callable[[str], None] = getattr(progress, "stage", lambda name: None)

    def sub(rows: IntpArray) -> IntArray | None:
        return None if codes is None else np.ascontiguousarray(codes[rows])

    def tasks(make: Callable[[int], tuple[Any, ...]], count: int) -> list[IntArray | None]:
        got = run(timed_task, make, count, progress)
        return log.tasks_done(got)

    step("blocks")
    with log.stage("split"):
        blocks = split_blocks(Xf, block_size)
    with log.stage("blocks"):
        got = tasks(
            lambda b: (
                *load(group_block, blocks[b]),
                sub(blocks[b]),
                kk,
                pp,
                task_seed(seed, 0, b),
            ),
            len(blocks),
        )
    with log.stage("merge blocks"):
        labels = np.full(n, -1, dtype=np.int64)
        nxt = 0
        for rows, lab in zip(blocks, got, strict=True):
            assert lab is not None
            done = lab >= 0
            labels[rows[done]] = lab[done] + nxt
            nxt += int(lab.max()) + 1 if done.any() else 0
        if nxt == 0:  # no block could hold a group: one block of everything (feasible, checked)
            labels = group_block(Xf, codes, kk, pp, task_seed(seed, 0, 0))
    with log.stage("join leftovers"):
        _join_nearest(Xf, labels)
        labels = _relabel(labels)
    with log.stage("face distances"):
        face = _face_distance(Xf, blocks)
    for r in range(1, int(repair_rounds) + 1):
        step(f"repair {r}")
        with log.stage(f"repair {r} pools"):
            pools = _repair_pools(
                Xf, labels, face, float(repair_share), int(block_size), task_seed(seed, r, 1 << 30)
            )
        with log.stage(f"repair {r} tasks"):
            new = tasks(_pool_args(load, codes, pools, labels, kk, pp, seed, r), len(pools))
        with log.stage(f"repair {r} merge"):
            nxt = int(labels.max()) + 1
            for rows, lab in zip(pools, new, strict=True):
                if lab is not None:
                    labels[rows] = lab + nxt
                    nxt += int(lab.max()) + 1
            labels = _relabel(labels)
    with log.stage("check"):
        _check_release(labels, codes, kk, pp)
    return labels
