"""Samarati's binary search on the height of the generalisation lattice, with MaxSup.

Samarati (2001), as Ciriani et al. (2007, Sect. 4.1) describe it: the *height* of a node is the
sum of its levels; when some node of height h is acceptable (within MaxSup suppressed records),
some node of every greater height is too (generalise one more step). So the lowest height with an
acceptable node is found by a binary search over heights ``0..H``: heights ``⌊H/2⌋``, then
``⌊H/4⌋`` or ``⌊3H/4⌋``, and so on. The answer is the k-minimal generalisation for the
*minimum absolute distance* preference; among that height's acceptable nodes the one of least
``loss`` is returned (ties: the lexicographically first node).

When the privacy models are not monotone with suppression (entropy/recursive l-diversity,
t-closeness with MaxSup > 0), the premise fails and the heights are scanned upwards instead, so
the returned height is still the minimal one.

Public API::

    samarati(leaves, hierarchies, check, max_suppression, *, loss="gil", columns=None)
        -> GeneralisedRelease

``leaves``: n × q leaf codes; ``hierarchies``: q :class:`LevelHierarchy`; ``check``:
:class:`ModelCheck`; ``max_suppression``: count (int) or share of n (float); ``loss``: one of
``prec, dm, cavg, entropy, gil``. ``release.levels`` is the node, ``release.info`` holds
``height``, ``loss``, ``loss_value``, ``nodes_checked``, ``lattice_size``, ``seconds``. Raises
``InfeasibleError`` when even the top node is not acceptable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy.typing as npt

from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.generalisation.lattice import Lattice, Node
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.models.spec import ModelCheck
from locpriv.tabular.quality.loss import loss_name


def _any_acceptable(lat: Lattice, height: int) -> bool:
    return any(lat.acceptable(node) for node in lat.nodes_at(height))


def minimal_height(lat: Lattice) -> int:
    """The lowest height holding an acceptable node (the top must be acceptable)."""
    top = sum(lat.heights)
    if not lat.monotone:
        return next(h for h in range(top + 1) if _any_acceptable(lat, h))
    lo, hi = 0, top  # invariant: some node at height hi is acceptable, none below lo
    while lo < hi:
        mid = (lo + hi) // 2
        if _any_acceptable(lat, mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def samarati(
    leaves: npt.ArrayLike,
    hierarchies: Sequence[LevelHierarchy],
    check: ModelCheck,
    max_suppression: int | float,
    *,
    loss: str = "gil",
    columns: Sequence[str] | None = None,
) -> GeneralisedRelease:
    """Release at an acceptable node of minimal height, the least ``loss`` among them."""
    which = loss_name(loss)
    t0 = time.perf_counter()
    lat = Lattice(leaves, hierarchies, check, max_suppression, columns=columns)
    lat.require_top()
    height = minimal_height(lat)
    cands = [node for node in lat.nodes_at(height) if lat.acceptable(node)]
    best: Node = min(cands, key=lambda node: (lat.loss(node, which), node))
    info: dict[str, object] = {
        "method": "samarati",
        "height": height,
        "loss": which,
        "loss_value": lat.loss(best, which),
        "candidates": len(cands),
        **lat.facts(),
    }
    info["seconds"] = time.perf_counter() - t0
    return lat.release(best, info)
