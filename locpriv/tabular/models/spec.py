"""The privacy models of a release and their check over equivalence classes.

A *class* is a set of records that share their released key values. Suppressed records belong
to no class and are not checked. Every model here is decided class by class from the
confidential codes ``S`` (n × m ints, ``0..c_j-1``) of the class's records, plus, for
t-closeness, the distribution of ``S`` over the whole table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError
from locpriv.tabular.models import closeness, diversity
from locpriv.tabular.models.closeness import table_distribution
from locpriv.tabular.models.counts import pair_counts

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PrivacyModels:
    """What every class of a release must satisfy (defaults: plain k-anonymity, k = 2).

    ``k``: records per class. ``l``: distinct values of every confidential attribute per class
    (distinct l-diversity; the seeds' p-sensitivity, ``p = l``). ``entropy_l``: entropy
    l-diversity, ``exp(H) >= entropy_l`` with ``H`` the natural-log entropy of each confidential
    attribute in the class (1 = off). ``recursive``: recursive (c, l)-diversity ``(c, l)``
    (None = off). ``t``: t-closeness, the Earth Mover's Distance between a class's and the
    table's distribution of each confidential attribute at most ``t`` (None = off; ordered
    distance for attributes listed as ordered, equal distance for the others, as Li et al. 2007).
    """

    k: int = 2
    l: int = 1  # noqa: E741 - the literature's name
    entropy_l: float = 1.0
    recursive: tuple[float, int] | None = None
    t: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"k must be an integer >= 1, got {self.k!r}")
        if isinstance(self.l, bool) or not isinstance(self.l, int) or self.l < 1:
            raise ConfigError(f"l must be an integer >= 1, got {self.l!r}")
        if not _real(self.entropy_l) or not self.entropy_l >= 1:
            raise ConfigError(f"entropy_l must be a real number >= 1, got {self.entropy_l!r}")
        if self.recursive is not None:
            try:
                c, rl = self.recursive
            except (TypeError, ValueError):
                raise ConfigError(
                    f"recursive must be a pair (c, l), got {self.recursive!r}"
                ) from None
            if not _real(c) or not c > 0:
                raise ConfigError(f"recursive: c must be a real number > 0, got {c!r}")
            if isinstance(rl, bool) or not isinstance(rl, int | np.integer) or rl < 1:
                raise ConfigError(f"recursive: l must be an integer >= 1, got {rl!r}")
        if self.t is not None and (not _real(self.t) or not 0 <= self.t <= 1):
            raise ConfigError(f"t must be a real number in [0, 1], got {self.t!r}")

    @property
    def needs_confidential(self) -> bool:
        """Whether any model beyond k-anonymity is on (then ``S`` is required)."""
        return self.l > 1 or self.entropy_l > 1 or self.recursive is not None or self.t is not None


def _real(x: object) -> bool:
    """A finite real number (bools are not)."""
    return (
        not isinstance(x, bool)
        and isinstance(x, int | float | np.integer | np.floating)
        and bool(np.isfinite(x))
    )


def _gap(ok: BoolArray, raw: npt.NDArray[np.floating[Any]]) -> FloatArray:
    """0 where ``ok``, else ``raw`` floored at a tiny positive value (never 0)."""
    out: FloatArray = np.where(ok, 0.0, np.maximum(raw, 1e-12))
    return out


class ModelCheck:
    """Decides :class:`PrivacyModels` for classes of one data set.

    ``S``: n × m confidential codes (``None`` when only k is asked; held as the ranks of each
    column's distinct codes, so unused codes between them do not count as values);
    ``ordered[j]``: whether attribute j's codes are ordered (numeric or ordinal: ordered EMD
    for t-closeness).
    """

    def __init__(
        self,
        models: PrivacyModels,
        S: npt.ArrayLike | None = None,
        ordered: Sequence[bool] | None = None,
    ) -> None:
        self.models = models
        if S is None:
            if models.needs_confidential:
                raise ConfigError("l-diversity and t-closeness need confidential attributes")
            self.S: IntArray = np.zeros((0, 0), dtype=np.int64)
        else:
            arr = np.asarray(S, dtype=np.int64)
            self.S = arr.reshape(len(arr), -1)
        m = self.S.shape[1]
        if models.needs_confidential and m == 0:
            raise ConfigError("l-diversity and t-closeness need confidential attributes")
        self.ordered = tuple(bool(o) for o in ordered) if ordered is not None else (False,) * m
        if len(self.ordered) != m:
            raise ConfigError(f"ordered: {len(self.ordered)} flags for {m} confidential attributes")
        if self.S.size and int(self.S.min()) < 0:
            raise ConfigError("confidential codes must be >= 0")
        # codes as ranks of the values present (order and equality kept): the ordered EMD's
        # ground distance is |i - j| / (m - 1) over the table's m distinct values (Li et al.),
        # not over unused codes in between (as the table validators and pycanon compute it)
        if self.S.size:
            self.S = np.column_stack(
                [np.unique(col, return_inverse=True)[1].reshape(-1) for col in self.S.T]
            ).astype(np.int64)
        #: m_j: the number of codes of attribute j (its domain, 0..m_j-1)
        self.domain = [int(col.max()) + 1 if col.size else 1 for col in self.S.T]
        #: Q_j: attribute j's distribution over the whole table (t-closeness)
        self.table = [
            table_distribution(col, mj) for col, mj in zip(self.S.T, self.domain, strict=True)
        ]

    def _shortfalls(self, lab: IntArray, g: int, rows: IntArray | None) -> dict[str, FloatArray]:
        """Per model field: how far each class ``0..g-1`` of the records ``rows`` (all when
        None) labelled ``lab`` falls short of it: 0 exactly when the class satisfies the field,
        else a positive relative gap (summed over the confidential attributes): ``(k - n)/k``,
        ``(l - distinct)/l``, ``(ln l - H)/ln l``, ``(r_1 - c·tail)/n``, ``EMD - t``."""
        md = self.models
        size = np.bincount(lab, minlength=g)
        out: dict[str, FloatArray] = {"k": _gap(size >= md.k, (md.k - size) / md.k)}
        if not md.needs_confidential:
            return out
        sub = self.S if rows is None else self.S[rows]
        n = np.maximum(size, 1)
        for j, col in enumerate(sub.T):
            cells = pair_counts(lab, col, g, self.domain[j])
            parts: list[tuple[str, FloatArray]] = []
            if md.l > 1:
                dist = diversity.distinct(cells)
                parts.append(("l", _gap(dist >= md.l, (md.l - dist) / md.l)))
            if md.entropy_l > 1:
                log_l = float(np.log(md.entropy_l))
                h = diversity.entropy(cells)
                parts.append(("entropy_l", _gap(h >= log_l - diversity.ENTROPY_TOL, 1 - h / log_l)))
            if md.recursive is not None:
                c, rl = md.recursive
                top, tail = diversity.recursive_parts(cells, int(rl))
                parts.append(("recursive", _gap(top < c * tail, (top - c * tail) / n)))
            if md.t is not None:
                emd_of = closeness.emd_ordered if self.ordered[j] else closeness.emd_equal
                emd = emd_of(cells, self.table[j])
                parts.append(("t", _gap(emd <= md.t + closeness.EMD_TOL, emd - md.t)))
            for name, gap in parts:
                out[name] = out[name] + gap if name in out else gap
        return out

    def _flags(self, lab: IntArray, g: int, rows: IntArray | None) -> dict[str, BoolArray]:
        """Per model field: one flag per class (see :meth:`_shortfalls`)."""
        return {name: gap == 0 for name, gap in self._shortfalls(lab, g, rows).items()}

    def shortfall(self, rows: npt.ArrayLike) -> float:
        """How far the records ``rows`` as one class fall short of the models: 0 exactly when
        they satisfy them all, else the sum of the fields' relative gaps (a progress measure
        for repairs, not a unit)."""
        idx = np.asarray(rows, dtype=np.int64)
        gaps = self._shortfalls(np.zeros(idx.size, dtype=np.int64), 1, idx)
        return float(sum(float(gap[0]) for gap in gaps.values()))

    def classes_ok(self, labels: npt.ArrayLike) -> BoolArray:
        """One flag per class ``0..g-1`` of ``labels`` (``-1`` = suppressed, ignored)."""
        lab = np.asarray(labels, dtype=np.int64)
        keep = lab >= 0
        g = int(lab.max()) + 1 if keep.any() else 0
        rows = None if keep.all() else np.flatnonzero(keep)
        flags = self._flags(lab if rows is None else lab[rows], g, rows)
        ok: BoolArray = np.logical_and.reduce(list(flags.values()))
        return ok

    def violations(self, rows: npt.ArrayLike) -> list[str]:
        """The model fields (``k``, ``l``, ``entropy_l``, ``recursive``, ``t``) that the records
        ``rows`` (indices into ``S``) would violate as one class; empty when acceptable."""
        idx = np.asarray(rows, dtype=np.int64)
        flags = self._flags(np.zeros(idx.size, dtype=np.int64), 1, idx)
        return [name for name, f in flags.items() if not bool(f[0])]

    def rows_ok(self, rows: npt.ArrayLike) -> bool:
        """Whether the records ``rows`` (indices into ``S``) would form an acceptable class."""
        idx = np.asarray(rows, dtype=np.int64)
        if len(idx) < self.models.k:
            return False
        flags = self._flags(np.zeros(idx.size, dtype=np.int64), 1, idx)
        return all(bool(f[0]) for f in flags.values())
