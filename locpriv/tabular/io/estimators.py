"""Scikit-learn style estimator for k-anonymity / p-sensitive k-anonymity by microaggregation.

``X`` is the numerical key-attribute matrix (n × d, original units); ``S`` the confidential
attributes (n × m, any hashable values; codes are derived). Parameters are stored untouched in
``__init__`` and validated in :meth:`Microaggregator.fit`.

Methods (``method=``): ``"mdav"`` (fixed-size MDAV, k-anonymity only), ``"best"`` (the improved
variable-size heuristic, k-anonymity only), ``"k-increase"``, ``"mdav-seed"``, ``"random-seed"``,
``"sec-pk"``, ``"enhanced-pk"`` (Truta et al.'s EnhancedPKClustering as printed), ``"best-p"``
(large-neighbourhood search from the best greedy p-sensitive partition), ``"partitioned"`` (any
p; linear time, :mod:`locpriv.tabular.microagg.partitioned`); ``None`` runs ``"partitioned"`` from
``DEFAULT_FROM_N`` (200,000) records, below it a default within ``DEFAULT_BUDGET`` times
MDAV's time: p <= 1 ``"mdav"``; p >= 2 the greedy p-sensitive methods of ``P_DEFAULT``, keeping
the lowest SSE. ``"best"`` and ``"best-p"`` (tens of times MDAV's time) run only when named, as
does ``"enhanced-pk"`` (it maximises the number of groups, not SSE, and its time grows as n²).

Randomness: ``seed=None`` runs the methods with seed 0 and, where rows are released (a frame
through :meth:`Microaggregator.fit_transform`), shuffles them with a permutation drawn from the
operating system's entropy; an explicit ``seed`` drives both (reproducible).
"""

from __future__ import annotations

import inspect
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular.checks import as_codes
from locpriv.tabular.io.encoding import zscore
from locpriv.tabular.microagg.distributed import WORKER_KINDS, check_workers_kind
from locpriv.tabular.microagg.improve import best_partition
from locpriv.tabular.microagg.mdav import mdav
from locpriv.tabular.microagg.partitioned import (
    BLOCK_SIZE,
    DEFAULT_FROM_N,
    Runner,
    current_stage_log,
    partitioned,
    stage_log,
)
from locpriv.tabular.models import ModelCheck, PrivacyModels
from locpriv.tabular.models.repair import repair, require_satisfiable
from locpriv.tabular.models.stratified import MAX_N as T_FIRST_MAX_N
from locpriv.tabular.models.stratified import t_first
from locpriv.tabular.psensitive.enhanced_pk import enhanced_pk_clustering
from locpriv.tabular.psensitive.kincrease import (
    Conditions,
    k_increase,
    require_feasible,
)
from locpriv.tabular.psensitive.psearch import best_p_sensitive
from locpriv.tabular.psensitive.sec_pk import sec_pk_clustering
from locpriv.tabular.psensitive.seeded import seeded_groups
from locpriv.tabular.quality import metrics
from locpriv.tabular.quality.validate import achieved_p
from locpriv.tabular.threads import kernel_threads, threads

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

K_ANON_METHODS = ("mdav", "best")
P_DEFAULT = ("k-increase", "mdav-seed", "sec-pk")  # the default's SSE race (p >= 2)
P_METHODS = ("k-increase", "mdav-seed", "random-seed", "sec-pk", "enhanced-pk", "best-p")
SCALE_METHODS = ("partitioned",)  # any p; the default from DEFAULT_FROM_N records
METHODS = K_ANON_METHODS + P_METHODS + SCALE_METHODS
DEFAULT_BUDGET = 5.0
"""The default method's stated time budget, in multiples of MDAV's time on the same data: p = 1
runs MDAV (1×); p >= 2 runs ``P_DEFAULT`` (their kernels 3.1-4.3× MDAV's in
benchmarks/bench_tabular.py's grid; the whole fit 4.0× at 100k × 13, up to 7.6× of a 0.05 s
MDAV at 10k rows, where fixed costs weigh).
``best`` (tens of times MDAV) and ``best-p`` are explicit choices."""
ORDER_WARNING = (
    "ROW ORDER KEPT (keep_order): the released rows are in the input's order; a file sorted by"
    " any attribute lets an attacker link rows by position, far above 1/k"
)


SOURCE_ROWS = "source_rows"
"""Key of ``DataFrame.attrs`` under which a released frame carries its permutation (the input
row of each released row, as little-endian int64 bytes: immutable, so pandas can copy and
compare attrs, e.g. in ``pd.concat``). Read it with :func:`source_rows_of`; it stays on this
machine (a file written from the frame does not carry it)."""


def with_source_rows(frame: Any, order: IntArray | None) -> Any:
    """``frame`` (a released DataFrame) with ``attrs[SOURCE_ROWS]`` set to ``order`` (``None``:
    the input order)."""
    rows = np.arange(len(frame), dtype=np.int64) if order is None else np.asarray(order)
    frame.attrs[SOURCE_ROWS] = rows.astype("<i8").tobytes()
    return frame


def source_rows_of(frame: Any) -> IntArray | None:
    """The input row of each row of a released frame (:data:`SOURCE_ROWS`), or ``None`` when
    the frame does not carry it or carries it for a different number of rows. Pandas copies
    attrs through row selections too: whoever uses it must check it against the rows
    (:func:`locpriv.tabular.risk.assess.source_rows` does)."""
    raw = frame.attrs.get(SOURCE_ROWS)
    if raw is None:
        return None
    if isinstance(raw, bytes | bytearray):
        rows: IntArray = np.frombuffer(raw, dtype="<i8").astype(np.int64)
    else:
        rows = np.asarray(raw, dtype=np.int64)
    if rows.shape != (len(frame),):
        return None
    return rows


def row_order(
    n: int, seed: int | None, keep_order: bool, level: int | None = None
) -> tuple[IntArray | None, dict[str, Any]]:
    """The permutation that orders the ``n`` released rows (``out[j] = in[perm[j]]``) and the
    report's ``order`` entry. ``seed=None`` draws it from the operating system's entropy (not
    reproducible, not recorded); an explicit seed reproduces it (and is recorded: whoever holds
    the seed can undo the shuffle, so it belongs with the report, not with the release).
    ``keep_order`` returns ``None`` and a report entry that says so loudly. ``level``: another
    release of the same records from the same seed (the k of a nested release) gets its own,
    independent permutation (the same one would link the two files row by row)."""
    if keep_order:
        return None, {"shuffled": False, "seed": None, "warning": ORDER_WARNING}
    if seed is None:
        perm = np.random.default_rng().permutation(n).astype(np.int64)
        return perm, {"shuffled": True, "seed": None, "source": "os-entropy"}
    entropy = [int(seed), 0x0D3E] if level is None else [int(seed), 0x0D3E, int(level)]
    perm = np.random.default_rng(entropy).permutation(n).astype(np.int64)
    note = "the seed reproduces the row order: keep it with the report, never with the release"
    return perm, {"shuffled": True, "seed": int(seed), "source": "seed", "note": note}


def run_method(
    method: str,
    Z: FloatArray,
    codes: IntArray | None,
    k: int,
    p: int,
    *,
    seed: int = 0,
    time_budget_s: float | None = None,
    progress: Callable[[float], None] | None = None,
    start: IntArray | None = None,
    block_size: int = BLOCK_SIZE,
    runner: Runner | None = None,
) -> tuple[IntArray, int]:
    """Labels of one method on the scaled key matrix ``Z``; returns ``(labels, k_used)``.
    ``start``: a p-sensitive k-anonymous partition for ``"best-p"`` to start from;
    ``block_size`` and ``runner``: see :func:`~locpriv.tabular.microagg.partitioned.partitioned`."""
    if method == "partitioned":
        labels = partitioned(
            Z, k, codes, p, seed=seed, block_size=block_size, runner=runner, progress=progress
        )
        return labels, k
    if method == "mdav":
        return np.asarray(mdav(Z, k), dtype=np.int64), k
    if method == "best":
        labels = best_partition(Z, k, seed=seed, time_budget_s=time_budget_s)
        return np.asarray(labels, dtype=np.int64), k
    if codes is None:
        raise ConfigError(f"method {method!r} needs confidential attributes")
    if method == "k-increase":
        return k_increase(Z, codes, k, p, progress=progress)
    if method == "mdav-seed":
        return seeded_groups(Z, codes, k, p, seed_mode="mdav"), k
    if method == "random-seed":
        rng = np.random.default_rng(seed)
        return seeded_groups(Z, codes, k, p, seed_mode="random", rng=rng), k
    if method == "sec-pk":
        return sec_pk_clustering(Z, codes, k, p), k
    if method == "enhanced-pk":
        return enhanced_pk_clustering(Z, codes, k, p), k
    if method == "best-p":
        labels = best_p_sensitive(
            Z, codes, k, p, seed=seed, time_budget_s=time_budget_s, start=start
        )
        return labels, k
    raise ConfigError(f"method must be one of {', '.join(METHODS)}; got {method!r}")


def _dense_matrix(X: npt.ArrayLike) -> FloatArray:
    """``X`` as a finite 2-D float64 array with at least one column; one-line DataError else."""
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise DataError("sparse input is not supported: pass a dense array (X.toarray())")
    arr = np.asarray(X)
    if arr.dtype.kind == "c":
        raise DataError("Complex data not supported: X must be real")
    if arr.dtype.kind == "O":  # numbers stored as objects are numbers; numpy's TypeError
        try:  # names a value that is no number at all (a dict, ...)
            arr = arr.astype(np.float64)
        except ValueError as exc:  # a string that is no number
            raise DataError(f"X must be numeric: {exc}") from None
    if not (arr.dtype == np.bool_ or arr.dtype.kind in "iuf"):
        raise DataError(f"X must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise DataError(f"X must be 2-D (records x attributes), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise DataError(f"X has 0 sample(s) (shape={arr.shape}): nothing to anonymise")
    if arr.shape[1] == 0:
        raise DataError(f"X has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    Xa = np.asarray(arr, dtype=np.float64)
    if not np.isfinite(Xa).all():
        col = int(np.flatnonzero(~np.isfinite(Xa).all(axis=0))[0])
        raise DataError(f"X column {col} has NaN or infinite values")
    return Xa


def candidates(method: str | None, p: int, n: int = 0) -> tuple[str, ...]:
    """The methods to try for a request of ``n`` records (validated). Without a method:
    ``"partitioned"`` from :data:`~locpriv.tabular.microagg.partitioned.DEFAULT_FROM_N` records
    (below, ``"mdav"`` for p = 1, the greedy p-sensitive methods of ``P_DEFAULT`` for p >= 2: within
    :data:`DEFAULT_BUDGET` times MDAV's time)."""
    if method is None:
        if n >= DEFAULT_FROM_N:
            return SCALE_METHODS
        return ("mdav",) if p <= 1 else P_DEFAULT
    if method not in METHODS:
        raise ConfigError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if method in K_ANON_METHODS and p > 1:
        raise ConfigError(f"method {method!r} gives k-anonymity only; use p=1 or a p-method")
    return (method,)


class Microaggregator:
    """k-anonymity (p=1) or p-sensitive k-anonymity by joint microaggregation.

    Fitted attributes: ``labels_`` (group of each record, 0..g-1), ``centroids_`` (g × d group
    means in original units), ``n_groups_``, ``method_`` (the method kept), ``k_used_``,
    ``sse_`` / ``sst_`` / ``il_`` (IL % = 100·SSE/SST, on the scaled matrix), ``conditions_``
    (Truta & Vinay diagnostics or None), ``p_achieved_`` (per confidential attribute),
    ``report_`` (a JSON-ready dict).

    ``block_size``, ``scheduler``, ``workers`` and ``workers_kind`` concern the
    ``"partitioned"`` method: records per block, and a dask.distributed scheduler address or
    ``Client`` that runs the blocks, or a number of local workers, used from two blocks on, of
    ``workers_kind`` ``"threads"`` (default: threads of this process sharing the key matrix) or
    ``"processes"`` (spawned processes; same result either way; see
    :mod:`locpriv.tabular.microagg.distributed`).

    ``entropy_l``, ``recursive=(c, l)`` and ``t`` add entropy / recursive (c, l)-diversity and
    t-closeness over every confidential attribute (``ordered``: one flag per attribute, True =
    ordered EMD; default all nominal). The grouping is then repaired
    (:func:`locpriv.tabular.models.repair.repair`), and with ``t`` a t-closeness-first grouping
    (:mod:`locpriv.tabular.models.stratified`) is repaired too and kept when its SSE is lower;
    ``report_["models"]`` records which. Invalid values are a ConfigError naming the field, a
    model no partition satisfies an InfeasibleError naming it.

    :meth:`fit_transform` of a pandas DataFrame returns the released rows in a random order
    (``report_["order"]``; ``seed=None`` draws it from the operating system's entropy) unless
    ``keep_order=True``, which warns. Arrays keep their order (scikit-learn's contract: row i
    of the output belongs to row i of ``X``).
    """

    def __init__(
        self,
        k: int = 3,
        p: int = 1,
        method: str | None = None,
        *,
        seed: int | None = None,
        standardize: bool = True,
        time_budget_s: float | None = None,
        progress: Callable[[float], None] | None = None,
        block_size: int = BLOCK_SIZE,
        scheduler: Any = None,
        workers: int = 1,
        workers_kind: str = WORKER_KINDS[0],
        keep_order: bool = False,
        entropy_l: float = 1.0,
        recursive: tuple[float, int] | None = None,
        t: float | None = None,
        ordered: Sequence[bool] | None = None,
    ) -> None:
        self.k = k
        self.p = p
        self.entropy_l = entropy_l
        self.recursive = recursive
        self.t = t
        self.ordered = ordered
        self.method = method
        self.seed = seed
        self.standardize = standardize
        self.time_budget_s = time_budget_s
        self.progress = progress
        self.block_size = block_size
        self.scheduler = scheduler
        self.workers = workers
        self.workers_kind = workers_kind
        self.keep_order = keep_order

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters by name (scikit-learn convention). With ``deep``, a
        parameter that has ``get_params`` also contributes its own as ``name__param``."""
        out: dict[str, Any] = {}
        for name in inspect.signature(type(self).__init__).parameters:
            if name == "self":
                continue
            value = getattr(self, name)
            out[name] = value
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{key}", v) for key, v in value.get_params().items())
        return out

    def set_params(self, **params: Any) -> Self:
        """Set constructor parameters (``name`` or nested ``name__param``); returns ``self``.
        An unknown name is a :class:`~locpriv.errors.ConfigError`; values are validated by
        :meth:`fit`, as scikit-learn does."""
        valid = self.get_params(deep=False)
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ConfigError(
                    f"invalid parameter {name!r} for Microaggregator; valid: {sorted(valid)}"
                )
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
                valid[name] = value
        for name, sub_params in nested.items():
            valid[name].set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        defaults = {
            name: prm.default
            for name, prm in inspect.signature(type(self).__init__).parameters.items()
            if name != "self"
        }
        changed = [
            f"{name}={value!r}"
            for name, value in self.get_params(deep=False).items()
            if value is not defaults[name] and value != defaults[name]
        ]
        return f"Microaggregator({', '.join(changed)})"

    def __sklearn_tags__(self) -> Any:
        """Tags for scikit-learn's common checks: a transformer of finite 2-D numeric data whose
        optional second argument (``S``, the confidential attributes) is not a target.
        Only scikit-learn calls this, so it is importable then (it is not a dependency)."""
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags(),
            input_tags=InputTags(allow_nan=False),
        )

    def fit(self, X: npt.ArrayLike, S: npt.ArrayLike | None = None) -> Self:
        """Partition the records; ``Z`` = z-scored ``X`` unless ``standardize=False``."""
        Xa = _dense_matrix(X)
        Z = zscore(Xa) if self.standardize else Xa
        return self.fit_scaled(Z, S, X_original=Xa)

    def fit_scaled(
        self,
        Z: FloatArray,
        S: npt.ArrayLike | None = None,
        *,
        X_original: FloatArray | None = None,
        names: list[str] | None = None,
    ) -> Self:
        """Fit on an already scaled distance matrix ``Z`` (e.g. with categorical encodings).
        The parent's column- and group-wise work (the figures; :mod:`locpriv.tabular.threads`)
        runs on ``workers`` threads."""
        with kernel_threads(max(int(self.workers), threads())):
            return self._fit_scaled(Z, S, X_original=X_original, names=names)

    def _fit_scaled(
        self,
        Z: FloatArray,
        S: npt.ArrayLike | None,
        *,
        X_original: FloatArray | None,
        names: list[str] | None,
    ) -> Self:
        if not isinstance(self.k, int | np.integer) or isinstance(self.k, bool):
            raise ConfigError(f"k must be an integer, got {self.k!r}")
        if not isinstance(self.p, int | np.integer) or isinstance(self.p, bool):
            raise ConfigError(f"p must be an integer, got {self.p!r}")
        k, p = int(self.k), int(self.p)
        check_workers_kind(self.workers_kind)
        n = Z.shape[0]
        if n < k:
            raise InfeasibleError(f"k={k} exceeds the number of records (n_samples={n})")
        self.n_features_in_: int = (X_original if X_original is not None else Z).shape[1]
        codes = as_codes(S, n) if S is not None else None
        if p > 1 and codes is None:
            raise ConfigError("p > 1 needs confidential attributes")
        models = self._models(k, p)
        if codes is not None:
            self.conditions_: Conditions | None = require_feasible(codes, k, p, names)
        else:
            self.conditions_ = None
            require_feasible(np.zeros((n, 0), dtype=np.int64), k, 1)
        check = None
        if models is not None:
            check = ModelCheck(models, codes, self.ordered)
            require_satisfiable(check, np.arange(n, dtype=np.int64))
        t0 = time.perf_counter()
        todo = candidates(self.method, p, n)
        with ExitStack() as stack:
            log = current_stage_log() or stack.enter_context(stage_log())
            runner = None
            if self.scheduler is not None and "partitioned" in todo:
                from locpriv.tabular.microagg.distributed import session

                runner = stack.enter_context(session(self.scheduler))
            elif int(self.workers) > 1 and "partitioned" in todo and n >= 2 * self.block_size:
                # one block would leave the pool idle: it pays from two blocks on
                from locpriv.tabular.microagg.distributed import workers_session

                runner = stack.enter_context(workers_session(int(self.workers), self.workers_kind))
            best, tried = self._run_candidates(Z, codes, k, p, todo, runner)
        err, name, labels, k_used = best
        merged, start = 0, name
        model_sse: dict[str, float] = {}  # SSE of each repaired grouping
        if check is not None:
            r0, rc0 = time.perf_counter(), time.process_time()
            before = int(labels.max()) + 1
            labels = repair(Z, labels, check)
            merged = before - (int(labels.max()) + 1)
            err = metrics.sse(Z, labels)
            model_sse[name] = err
            if check.models.t is not None and codes is not None and n <= T_FIRST_MAX_N:
                # t-closeness first (stratified on the first confidential attribute), repaired
                alt = t_first(
                    Z, codes[:, 0], k, check.models.t, check.ordered[0], seed=self._seed()
                )
                alt_before = int(alt.max()) + 1
                alt = repair(Z, alt, check)
                alt_err = metrics.sse(Z, alt)
                model_sse["t-closeness-first"] = alt_err
                if alt_err < err:
                    labels, err, start = alt, alt_err, "t-closeness-first"
                    merged = alt_before - (int(alt.max()) + 1)
            log.add("models", time.perf_counter() - r0, time.process_time() - rc0)
        m0, c0 = time.perf_counter(), time.process_time()
        self.labels_: IntArray = labels
        self.method_: str = name
        self.k_used_: int = k_used
        self.n_groups_: int = int(labels.max()) + 1
        Xo = X_original if X_original is not None else Z
        self.centroids_: FloatArray = metrics.group_means(Xo, labels)
        self.sse_: float = err
        self.sst_: float = metrics.sst(Z)
        self.il_: float = 100.0 * err / self.sst_ if self.sst_ > 0 else 0.0
        self.p_achieved_: list[int] = achieved_p(labels, codes) if codes is not None else []
        sizes = np.bincount(labels)
        attr_names = names or [str(j) for j in range(len(self.p_achieved_))]
        self.report_: dict[str, Any] = {
            "method": name,
            "k": k,
            "p": p,
            "n": int(n),
            "groups": self.n_groups_,
            "min_group_size": int(sizes.min()),
            "max_group_size": int(sizes.max()),
            "il_percent": self.il_,
            "sse": err,
            "sst": self.sst_,
            "dm": metrics.discernibility(labels),
            "avg": metrics.avg_class_size(labels, k),
            "truta_il": metrics.truta_il_normalised(Z, labels),
            "p_achieved": dict(zip(attr_names, self.p_achieved_, strict=True)),
            "group_sizes": {str(s): c for s, c in metrics.size_histogram(labels).items()},
            "k_used": k_used,
            "candidates_sse": tried,
            "models": {
                "entropy_l": float(self.entropy_l),
                "recursive": list(self.recursive) if self.recursive is not None else None,
                "t": self.t,
                "ordered": list(check.ordered) if check is not None else [],
                "merged_groups": merged,
                "grouping": start,
                "sse_repaired": model_sse,
            },
            "seconds": time.perf_counter() - t0,
        }
        log.add("metrics", time.perf_counter() - m0, time.process_time() - c0)
        self.report_["stages"] = log.report()  # seconds and cores busy per stage
        if self.conditions_ is not None:
            self.report_["max_clusters"] = self.conditions_.max_clusters
            self.report_["i_value"] = self.conditions_.i_value
        return self

    def _seed(self) -> int:
        return 0 if self.seed is None else int(self.seed)

    def _models(self, k: int, p: int) -> PrivacyModels | None:
        """The privacy models beyond k and p (entropy / recursive l-diversity, t-closeness)
        as one :class:`PrivacyModels`, or None when none is on (the methods then suffice)."""
        rec = self.recursive
        if rec is not None and not isinstance(rec, tuple):
            try:
                rec = tuple(rec)  # a list (from JSON or the command line) is a pair too
            except TypeError:
                raise ConfigError(f"recursive must be a pair (c, l), got {rec!r}") from None
        models = PrivacyModels(
            k=k,
            l=p,
            entropy_l=self.entropy_l,
            recursive=rec,
            t=self.t,
        )
        if models.entropy_l > 1 or models.recursive is not None or models.t is not None:
            return models
        return None

    def _run_candidates(  # noqa: PLR0917
        self,
        Z: FloatArray,
        codes: IntArray | None,
        k: int,
        p: int,
        todo: tuple[str, ...],
        runner: Runner | None,
    ) -> tuple[tuple[float, str, IntArray, int], dict[str, float]]:
        """Run every candidate method; the lowest-SSE result and every candidate's SSE."""
        best: tuple[float, str, IntArray, int] | None = None
        tried: dict[str, float] = {}
        for i, name in enumerate(todo):
            sub = self.progress if len(todo) == 1 else None  # one method: its stages too
            if self.progress is not None and len(todo) > 1:
                outer, base, span = self.progress, i / len(todo), 1.0 / len(todo)

                def sub(
                    f: float,
                    outer: Callable[[float], None] = outer,
                    base: float = base,
                    span: float = span,
                ) -> None:
                    outer(base + span * f)

            labels, k_used = run_method(
                name,
                Z,
                codes,
                k,
                p,
                seed=0 if self.seed is None else int(self.seed),
                time_budget_s=self.time_budget_s,
                progress=sub,
                start=best[2] if name == "best-p" and best is not None else None,
                block_size=self.block_size,
                runner=runner,
            )
            err = metrics.sse(Z, labels)
            tried[name] = err
            if best is None or err < best[0]:
                best = (err, name, labels, k_used)
            if self.progress is not None:
                self.progress((i + 1) / len(todo))
        assert best is not None
        return best, tried

    def fit_transform(self, X: Any, S: npt.ArrayLike | None = None) -> Any:
        """Fit, then return ``X`` with every record replaced by its group mean.

        An array comes back in its rows' order. A pandas DataFrame comes back as a DataFrame
        (same columns, a fresh RangeIndex) whose rows are in a random order (see
        :func:`row_order`; ``report_["order"]``), unless ``keep_order=True`` (warns)."""
        self.fit(X, S)
        out: FloatArray = self.centroids_[self.labels_]
        if not (hasattr(X, "columns") and hasattr(X, "iloc")):
            return out
        import pandas as pd

        frame = pd.DataFrame(out, columns=X.columns, index=X.index)
        perm, order = row_order(len(frame), self.seed, bool(self.keep_order))
        self.report_["order"] = order
        if perm is None:
            warnings.warn(ORDER_WARNING, UserWarning, stacklevel=2)
            return with_source_rows(frame, None)
        return with_source_rows(frame.iloc[perm].reset_index(drop=True), perm)
