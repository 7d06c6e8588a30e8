"""Full-domain generalisation (global recoding) for p-sensitive k-anonymity, Incognito-style.

Every key attribute is recoded to one level of its hierarchy for all records (a *node* of the
generalisation lattice: one level per attribute). A node is acceptable when every equivalence
class (records with equal recoded keys) has at least k records and at least p distinct values of
every confidential attribute; no record is suppressed. Both properties survive any further
generalisation, and survive dropping key attributes, so the search is Incognito's (LeFevre,
DeWitt & Ramakrishnan 2005), adapted to p-sensitivity as Truta, Campan & Meyer (2007) did:

* subsets of the key attributes are searched by increasing size; a node of a subset is a
  candidate only if its projection on every smaller subset was acceptable (the subset property);
* within a subset, candidates are visited by increasing height; a node above an acceptable node
  is acceptable without a check (generalisation property), every other candidate is checked.

:func:`incognito` returns the minimal acceptable nodes of the full key set and the one with the
lowest discernibility (DM) among them, with its equivalence classes as labels.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from locpriv.errors import InfeasibleError
from locpriv.tabular.checks import as_codes
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy

IntArray = npt.NDArray[np.int64]
Node = tuple[int, ...]


@dataclass(frozen=True)
class FullDomainResult:
    """Result of :func:`incognito`."""

    levels: Node
    """Chosen level of each key attribute (0 = original values)."""
    labels: IntArray
    """Equivalence class of each record at ``levels``, 0..g-1."""
    minimal: tuple[Node, ...]
    """Every minimal acceptable node (none below it is acceptable)."""
    checked: int
    """Nodes whose classes were computed (the rest were decided by the two properties)."""


def _down(node: Node, i: int) -> Node:
    """``node`` one level lower in attribute ``i``."""
    return (*node[:i], node[i] - 1, *node[i + 1 :])


def _classes(nodes: list[IntArray], sizes: list[int]) -> IntArray:
    """Class id of each record from its node ids (mixed-radix key, then dense ids)."""
    key = np.zeros(len(nodes[0]), dtype=np.int64)
    for col, size in zip(nodes, sizes, strict=True):
        key = key * size + col
    out: IntArray = np.unique(key, return_inverse=True)[1].astype(np.int64)
    return out


def _acceptable(cls: IntArray, codes: IntArray, k: int, p: int) -> bool:
    g = int(cls.max()) + 1
    if np.bincount(cls, minlength=g).min() < k:
        return False
    for col in codes.T:
        nv = int(col.max()) + 1
        pairs = np.unique(cls * nv + col)
        if np.bincount(pairs // nv, minlength=g).min() < p:
            return False
    return True


def incognito(
    leaves: npt.ArrayLike,
    hierarchies: tuple[LevelHierarchy, ...],
    S: npt.ArrayLike,
    k: int,
    p: int,
) -> FullDomainResult:
    """Minimal full-domain generalisations making the table p-sensitive k-anonymous.

    ``leaves``: n × q leaf codes of the key attributes (:meth:`LevelHierarchy.codes`);
    ``hierarchies``: one per column; ``S``: n confidential values, or n × r. Raises
    ``InfeasibleError`` when even the root of every hierarchy (one class) is not acceptable.
    """
    lv = np.asarray(leaves, dtype=np.int64)
    n, q = lv.shape
    codes = as_codes(S, n)
    anc = [h.ancestors()[:, lv[:, j]] for j, h in enumerate(hierarchies)]  # level × n each
    sizes = [[len(lab) for lab in h.labels] for h in hierarchies]
    if not _acceptable(np.zeros(n, dtype=np.int64), codes, k, p):
        raise InfeasibleError(f"no full-domain generalisation is {p}-sensitive {k}-anonymous")
    checked = 0
    good: dict[tuple[int, ...], set[Node]] = {}
    for size in range(1, q + 1):
        for attrs in itertools.combinations(range(q), size):
            ranges = [range(hierarchies[a].height + 1) for a in attrs]
            cands: list[Node] = list(itertools.product(*ranges))
            if size > 1:  # subset property: every projection one attribute smaller was acceptable
                subs = [(d, attrs[:d] + attrs[d + 1 :]) for d in range(size)]
                cands = [
                    nd for nd in cands if all(nd[:d] + nd[d + 1 :] in good[s] for d, s in subs)
                ]
            ok: set[Node] = set()
            for node in sorted(cands, key=sum):
                if any(_down(node, i) in ok for i in range(size) if node[i]):
                    ok.add(node)
                    continue
                cls = _classes(
                    [anc[a][lev] for a, lev in zip(attrs, node, strict=True)],
                    [sizes[a][lev] for a, lev in zip(attrs, node, strict=True)],
                )
                checked += 1
                if _acceptable(cls, codes, k, p):
                    ok.add(node)
            good[attrs] = ok
    full = good[tuple(range(q))]
    minimal = tuple(
        sorted(
            node for node in full if not any(_down(node, i) in full for i in range(q) if node[i])
        )
    )

    def labels_at(node: Node) -> IntArray:
        return _classes([anc[a][node[a]] for a in range(q)], [sizes[a][node[a]] for a in range(q)])

    def dm(node: Node) -> int:
        return int(np.sum(np.bincount(labels_at(node)).astype(np.int64) ** 2))

    best = min(minimal, key=lambda node: (dm(node), node))
    return FullDomainResult(levels=best, labels=labels_at(best), minimal=minimal, checked=checked)
