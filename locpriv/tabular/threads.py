"""Threads for the parent's column-wise work between the block tasks (encoding, release
figures, metrics, audit).

The stages that run no task (Amdahl's serial part of the partitioned method, docs/tabular.md,
*Using many cores*) are mostly loops over the key columns, each column independent. They run
here as one item per column on ``threads`` Python threads: the work inside an item is numpy
(which releases the GIL in its sorts, ufuncs and reductions) or ``nogil`` numba kernels, so the
items run at once on as many cores. The results come back in item order and every item is
computed exactly as one thread would compute it (nothing is summed across items inside an
item), so a release and its figures are the same for any thread count.

``threads`` is set for a call by :func:`kernel_threads` (``anonymize`` and the estimator set it
to their ``workers``: the cores the caller gave the run); 1 by default, so code that runs inside
a block task (in a worker) never starts threads. No numba ``parallel=True`` kernel is used:
numba's threading layers differ in thread- and fork-safety, Python threads over ``nogil``
kernels do not.

Each :func:`map_items` call records its wall and CPU seconds, its thread count and its number of
items in the current stage log (:meth:`StageLog.parallel_done`), so the stage report counts
that time as parallel work and the projection of many workers divides it by at most the number
of items.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["kernel_threads", "map_items", "row_ranges", "threads"]

T = TypeVar("T")
R = TypeVar("R")

_THREADS: ContextVar[int] = ContextVar("locpriv_kernel_threads", default=1)


@contextmanager
def kernel_threads(n: int) -> Iterator[int]:
    """Let :func:`map_items` use ``n`` (>= 1) threads in this context; yields ``n``."""
    n = max(1, int(n))
    token = _THREADS.set(n)
    try:
        yield n
    finally:
        _THREADS.reset(token)


def threads() -> int:
    """The threads :func:`map_items` uses in this context (1 outside :func:`kernel_threads`)."""
    return _THREADS.get()


CHUNK = 4096
"""Rows (or groups) per item of the row- and group-wise work (at most :data:`MAX_ITEMS`)."""
MAX_ITEMS = 64


def row_ranges(total: int) -> list[tuple[int, int]]:
    """``0..total`` cut into consecutive ranges of at least :data:`CHUNK` (at most
    :data:`MAX_ITEMS` of them): the items of row- or group-wise work, whose results never
    depend on the cut."""
    parts = max(1, min(MAX_ITEMS, total // CHUNK))
    cuts = [total * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(cuts))


ITEM_MEMORY = 1 << 30
"""Bytes of temporaries that the items of one :func:`map_items` call may hold at once (1 GiB):
items that each need ``item_bytes`` run on at most ``ITEM_MEMORY // item_bytes`` threads, so
column-wise work on 10^7 rows does not multiply the parent's peak memory by the threads."""


def map_items(fn: Callable[[T], R], items: Sequence[T], item_bytes: int = 0) -> list[R]:
    """``[fn(x) for x in items]``, on :func:`threads` threads when there are several items
    (at most ``ITEM_MEMORY // item_bytes`` when an item needs ``item_bytes`` of temporaries);
    the results in item order. The wall and CPU seconds are recorded in the current stage log
    as a parallel section of ``len(items)`` items on the threads used."""
    from locpriv.tabular.microagg.partitioned import current_stage_log  # no import cycle

    t = min(threads(), len(items))
    if item_bytes > 0:
        t = min(t, max(1, ITEM_MEMORY // int(item_bytes)))
    w0, c0 = time.perf_counter(), time.process_time()
    if t <= 1:
        out = [fn(x) for x in items]
    else:
        with ThreadPoolExecutor(max_workers=t, thread_name_prefix="locpriv-col") as pool:
            out = list(pool.map(fn, items))
    log = current_stage_log()
    if log is not None:
        log.parallel_done(time.perf_counter() - w0, time.process_time() - c0, len(items), max(t, 1))
    return out
