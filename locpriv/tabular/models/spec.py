"""The privacy models of a release and their check over equivalence classes.

A *class* is a set of records that share their released key values. Suppressed records belong
to no class and are not checked. Every model here is decided class by class from the
confidential codes ``S`` (n × m ints, ``0..c_j-1``) of the class's records, plus, for
t-closeness, the distribution of ``S`` over the whole table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


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

    @property
    def needs_confidential(self) -> bool:
        """Whether any model beyond k-anonymity is on (then ``S`` is required)."""
        return self.l > 1 or self.entropy_l > 1 or self.recursive is not None or self.t is not None


class ModelCheck:
    """Decides :class:`PrivacyModels` for classes of one data set.

    ``S``: n × m confidential codes (``None`` when only k is asked); ``ordered[j]``: whether
    attribute j's codes are ordered (numeric or ordinal: ordered EMD for t-closeness).
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
        self.ordered = tuple(ordered) if ordered is not None else (False,) * self.S.shape[1]
        if models.entropy_l > 1 or models.recursive is not None or models.t is not None:
            raise ConfigError("entropy/recursive l-diversity and t-closeness: not yet built")

    def classes_ok(self, labels: npt.ArrayLike) -> BoolArray:
        """One flag per class ``0..g-1`` of ``labels`` (``-1`` = suppressed, ignored)."""
        lab = np.asarray(labels, dtype=np.int64)
        keep = lab >= 0
        g = int(lab.max()) + 1 if keep.any() else 0
        ok: BoolArray = np.bincount(lab[keep], minlength=g) >= self.models.k
        if self.models.l > 1:
            for col in self.S[keep].T:
                nv = int(col.max()) + 1
                pairs = np.unique(lab[keep] * nv + col)
                ok &= np.bincount(pairs // nv, minlength=g) >= self.models.l
        return ok

    def rows_ok(self, rows: npt.ArrayLike) -> bool:
        """Whether the records ``rows`` (indices into ``S``) would form an acceptable class."""
        idx = np.asarray(rows, dtype=np.int64)
        if len(idx) < self.models.k:
            return False
        if self.S.shape[1] == 0:
            return True
        return all(len(np.unique(col)) >= self.models.l for col in self.S[idx].T)
