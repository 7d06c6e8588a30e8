"""Nested full-domain releases: the release at a smaller k inside a coarser lattice node.

Two full-domain releases of the same records whose nodes are ordered (``finer <= coarser`` in
every key attribute) and that suppress nothing are *nested*: every class of the finer release
lies inside one class of the coarser (an ancestor's group holds its descendants' groups), so an
attacker who intersects the two files' classes is left with the finer release's classes, of at
least the smaller k. :func:`within_node` finds the release at the smaller k: the acceptable node
of least ``loss`` among the nodes below ``bound`` (the coarser release's node), by checking them
all (the sub-lattice of a release is small: the product of its levels + 1).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

import numpy.typing as npt

from locpriv.errors import ConfigError, InfeasibleError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.generalisation.lattice import Lattice, Node
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.models.spec import ModelCheck
from locpriv.tabular.quality.loss import loss_name


def within_node(
    leaves: npt.ArrayLike,
    hierarchies: Sequence[LevelHierarchy],
    check: ModelCheck,
    bound: Sequence[int],
    *,
    loss: str = "gil",
    columns: Sequence[str] | None = None,
) -> GeneralisedRelease:
    """Release at the acceptable node ``<= bound`` of least ``loss`` (no suppression; ties: the
    lexicographically first node, up to a relative 1e-9). Raises ``InfeasibleError`` when no
    node below ``bound`` is acceptable (``bound`` itself is, for a release at a larger k under
    the same models)."""
    which = loss_name(loss)
    t0 = time.perf_counter()
    lat = Lattice(leaves, hierarchies, check, 0, columns=columns)
    top = tuple(int(b) for b in bound)
    if len(top) != lat.q or any(not 0 <= b <= h for b, h in zip(top, lat.heights, strict=True)):
        raise ConfigError(f"{list(top)} is not a node of this lattice")
    best: Node | None = None
    best_val = 0.0
    checked = 0
    for node in itertools.product(*(range(b + 1) for b in top)):
        checked += 1
        if not lat.acceptable(node):
            continue
        val = lat.loss(node, which)
        if best is None or val < best_val - 1e-9 * (1.0 + abs(best_val)):
            best, best_val = node, val
    if best is None:
        raise InfeasibleError(f"no node below {list(top)} satisfies the privacy models")
    info: dict[str, object] = {
        "method": "nested",
        "within": list(top),
        "loss": which,
        "loss_value": best_val,
        "sublattice_size": checked,
        **lat.facts(),
    }
    info["seconds"] = time.perf_counter() - t0
    return lat.release(best, info)
