"""Scikit-learn style estimator for k-anonymity / p-sensitive k-anonymity by microaggregation.

``X`` is the numerical key-attribute matrix (n × d, original units); ``S`` the confidential
attributes (n × m, any hashable values; codes are derived). Parameters are stored untouched in
``__init__`` and validated in :meth:`Microaggregator.fit`.

Methods (``method=``): ``"mdav"`` (fixed-size MDAV, k-anonymity only), ``"best"`` (the improved
variable-size heuristic, k-anonymity only), ``"k-increase"``, ``"mdav-seed"``, ``"random-seed"``,
``"enhanced-pk"``, ``"best-p"`` (large-neighbourhood search from the best greedy p-sensitive
partition); ``None`` runs the candidates that meet the request and keeps the lowest SSE
(p <= 1: ``"best"``; p >= 2: the p-sensitive methods, ``"best-p"`` last, starting from the
best of the others).
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, DataError
from locpriv.tabular import metrics
from locpriv.tabular.categorical import zscore
from locpriv.tabular.codes import as_codes
from locpriv.tabular.enhanced_pk import enhanced_pk_clustering
from locpriv.tabular.psearch import best_p_sensitive
from locpriv.tabular.psensitive import (
    Conditions,
    k_increase,
    require_feasible,
)
from locpriv.tabular.seeded import seeded_groups
from locpriv.tabular.validate import achieved_p

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

K_ANON_METHODS = ("mdav", "best")
P_METHODS = ("k-increase", "mdav-seed", "random-seed", "enhanced-pk", "best-p")
METHODS = K_ANON_METHODS + P_METHODS


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
) -> tuple[IntArray, int]:
    """Labels of one method on the scaled key matrix ``Z``; returns ``(labels, k_used)``.
    ``start``: a p-sensitive k-anonymous partition for ``"best-p"`` to start from."""
    if method == "mdav":
        from locpriv.tabular.mdav import mdav

        return np.asarray(mdav(Z, k), dtype=np.int64), k
    if method == "best":
        try:
            improve = importlib.import_module("locpriv.tabular.improve")
        except ImportError:  # pragma: no cover - the improved heuristic is not installed
            logger.warning("best_partition unavailable; using MDAV")
            from locpriv.tabular.mdav import mdav

            return np.asarray(mdav(Z, k), dtype=np.int64), k
        labels = improve.best_partition(Z, k, seed=seed, time_budget_s=time_budget_s)
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
    if method == "enhanced-pk":
        return enhanced_pk_clustering(Z, codes, k, p), k
    if method == "best-p":
        labels = best_p_sensitive(
            Z, codes, k, p, seed=seed, time_budget_s=time_budget_s, start=start
        )
        return labels, k
    raise ConfigError(f"method must be one of {', '.join(METHODS)}; got {method!r}")


def candidates(method: str | None, p: int) -> tuple[str, ...]:
    """The methods to try for a request (validated)."""
    if method is None:
        return ("best",) if p <= 1 else P_METHODS
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
    """

    def __init__(
        self,
        k: int = 3,
        p: int = 1,
        method: str | None = None,
        *,
        seed: int = 0,
        standardize: bool = True,
        time_budget_s: float | None = None,
        progress: Callable[[float], None] | None = None,
    ) -> None:
        self.k = k
        self.p = p
        self.method = method
        self.seed = seed
        self.standardize = standardize
        self.time_budget_s = time_budget_s
        self.progress = progress

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (scikit-learn convention)."""
        return {
            "k": self.k,
            "p": self.p,
            "method": self.method,
            "seed": self.seed,
            "standardize": self.standardize,
            "time_budget_s": self.time_budget_s,
            "progress": self.progress,
        }

    def fit(self, X: npt.ArrayLike, S: npt.ArrayLike | None = None) -> Self:
        """Partition the records; ``Z`` = z-scored ``X`` unless ``standardize=False``."""
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] == 0:
            raise DataError(f"X must be 2-D with at least one column, got shape {Xa.shape}")
        if not np.isfinite(Xa).all():
            col = int(np.flatnonzero(~np.isfinite(Xa).all(axis=0))[0])
            raise DataError(f"X column {col} has NaN or infinite values")
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
        """Fit on an already scaled distance matrix ``Z`` (e.g. with categorical encodings)."""
        if not isinstance(self.k, int | np.integer) or isinstance(self.k, bool):
            raise ConfigError(f"k must be an integer, got {self.k!r}")
        if not isinstance(self.p, int | np.integer) or isinstance(self.p, bool):
            raise ConfigError(f"p must be an integer, got {self.p!r}")
        k, p = int(self.k), int(self.p)
        n = Z.shape[0]
        codes = as_codes(S, n) if S is not None else None
        if p > 1 and codes is None:
            raise ConfigError("p > 1 needs confidential attributes")
        if codes is not None:
            self.conditions_: Conditions | None = require_feasible(codes, k, p, names)
        else:
            self.conditions_ = None
            require_feasible(np.zeros((n, 0), dtype=np.int64), k, 1)
        t0 = time.perf_counter()
        best: tuple[float, str, IntArray, int] | None = None
        tried: dict[str, float] = {}
        todo = candidates(self.method, p)
        for i, name in enumerate(todo):
            sub = None
            if self.progress is not None:
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
                seed=self.seed,
                time_budget_s=self.time_budget_s,
                progress=sub,
                start=best[2] if name == "best-p" and best is not None else None,
            )
            err = metrics.sse(Z, labels)
            tried[name] = err
            if best is None or err < best[0]:
                best = (err, name, labels, k_used)
            if self.progress is not None:
                self.progress((i + 1) / len(todo))
        assert best is not None
        err, name, labels, k_used = best
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
            "seconds": time.perf_counter() - t0,
        }
        if self.conditions_ is not None:
            self.report_["max_clusters"] = self.conditions_.max_clusters
            self.report_["i_value"] = self.conditions_.i_value
        return self

    def fit_transform(self, X: npt.ArrayLike, S: npt.ArrayLike | None = None) -> FloatArray:
        """Fit, then return ``X`` with every record replaced by its group mean."""
        self.fit(X, S)
        out: FloatArray = self.centroids_[self.labels_]
        return out
