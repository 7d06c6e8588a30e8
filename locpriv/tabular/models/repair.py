"""Repair of a partition so that every class satisfies the privacy models.

:func:`repair` works after any grouping method (microaggregation, Mondrian, a lattice node):
while a class violates the models of its :class:`~locpriv.tabular.models.spec.ModelCheck`, it
is merged with the class whose centroid (in the encoded key space ``X``, the space the grouping
measured distances in) is nearest. A merge never splits a class, so a grouping that was
k-anonymous stays so; k-anonymity, distinct, entropy and recursive l-diversity and t-closeness
are all preserved by merging two acceptable classes (Machanavajjhala et al. 2007, Li et al.
2007: monotonicity), so the result satisfies the models whatever the order of merges.

The merged partition is always found when the whole table, taken as one class, satisfies the
models (it is the last resort); otherwise :class:`~locpriv.errors.InfeasibleError` names the
field (``k``, ``l``, ``entropy_l``, ``recursive``; never ``t``, as the whole table is at EMD 0
from itself) before any merge.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.errors import DataError, InfeasibleError
from locpriv.tabular.models.spec import ModelCheck

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def infeasible_fields(check: ModelCheck, rows: IntArray) -> list[str]:
    """The model fields that even one class holding all of ``rows`` violates."""
    return check.violations(rows)


def require_feasible(check: ModelCheck, rows: IntArray) -> None:
    """Raise :class:`InfeasibleError` naming the first field that ``rows`` as one class
    violates (no partition of them can then satisfy the models)."""
    bad = infeasible_fields(check, rows)
    if bad:
        md = check.models
        value = {
            "k": md.k,
            "l": md.l,
            "entropy_l": md.entropy_l,
            "recursive": md.recursive,
            "t": md.t,
        }[bad[0]]
        raise InfeasibleError(
            f"{bad[0]}={value!r} cannot be met: the {rows.size} records taken as one class"
            f" violate it (field {bad[0]})"
        )


def repair(X: npt.ArrayLike, labels: npt.ArrayLike, check: ModelCheck) -> IntArray:
    """Labels (``0..g'-1``, ``-1`` kept for suppressed records) of a coarsening of the
    partition ``labels`` in which every class satisfies ``check``'s models.

    ``X``: n × d key values on the grouping's scale (distances between class centroids decide
    the merges). Classes are repaired smallest first; each violating class is merged into the
    class with the nearest centroid (ties: the lower label), the merged class is checked again
    (it stays in the queue while it violates). Cost: O(merges · g · d) plus one check of each
    merged class. Raises :class:`InfeasibleError` (see :func:`require_feasible`) when no
    partition can satisfy the models.
    """
    lab = np.asarray(labels, dtype=np.int64).copy()
    Xa = np.asarray(X, dtype=np.float64)
    Xa = Xa.reshape(len(Xa), -1)
    if lab.ndim != 1 or lab.size != Xa.shape[0]:
        raise DataError(f"labels: {lab.size} entries for {Xa.shape[0]} records")
    if check.S.shape[1] and check.S.shape[0] != lab.size:
        raise DataError(f"confidential codes: {check.S.shape[0]} rows for {lab.size} records")
    keep = lab >= 0
    if not keep.any():
        return lab
    ok = check.classes_ok(lab)
    if ok.all():
        return _dense(lab)
    require_feasible(check, np.flatnonzero(keep))
    g = ok.size
    kept = np.flatnonzero(keep)
    order = np.argsort(lab[kept], kind="stable")
    bounds = np.searchsorted(lab[kept][order], np.arange(g + 1))
    members = [kept[order[bounds[c] : bounds[c + 1]]] for c in range(g)]
    size = np.array([m.size for m in members], dtype=np.float64)
    alive = size > 0
    sums = np.zeros((g, Xa.shape[1]))
    np.add.at(sums, lab[kept], Xa[kept])
    cent = sums / np.maximum(size, 1)[:, None]
    bad = ~ok & alive
    while bad.any():
        cand = np.flatnonzero(bad)
        c = int(cand[np.argmin(size[cand])])
        d = np.einsum("ij,ij->i", cent - cent[c], cent - cent[c])
        d[~alive] = np.inf
        d[c] = np.inf
        into = int(np.argmin(d))
        if not np.isfinite(d[into]):  # one class left that violates: cannot happen after
            require_feasible(check, members[c])  # the feasibility check, kept as a guard
            break
        members[into] = np.concatenate([members[into], members[c]])
        sums[into] += sums[c]
        size[into] += size[c]
        cent[into] = sums[into] / size[into]
        lab[members[c]] = into
        members[c] = members[c][:0]
        alive[c] = False
        bad[c] = False
        bad[into] = not check.rows_ok(members[into])
    return _dense(lab)


def _dense(lab: IntArray) -> IntArray:
    """Relabel the used classes ``0..g'-1`` in order of their old labels (``-1`` kept)."""
    keep = lab >= 0
    out = lab.copy()
    _, out[keep] = np.unique(lab[keep], return_inverse=True)
    return out
