"""Incognito's result (:func:`locpriv.tabular.generalisation.fulldomain.incognito`) as a
:class:`GeneralisedRelease`.

Public API::

    incognito_release(leaves, hierarchies, S, k, p, *, columns=None) -> GeneralisedRelease

No record is suppressed (Incognito here has no MaxSup); ``release.levels`` is the minimal
acceptable node of least DM, ``release.info`` lists every minimal node.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from locpriv.tabular.checks import as_codes
from locpriv.tabular.generalisation.fulldomain import incognito
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.generalisation.lattice import Lattice
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels


def incognito_release(
    leaves: npt.ArrayLike,
    hierarchies: Sequence[LevelHierarchy],
    S: npt.ArrayLike,
    k: int,
    p: int,
    *,
    columns: Sequence[str] | None = None,
) -> GeneralisedRelease:
    """Incognito's p-sensitive k-anonymous full-domain generalisation, as a release."""
    t0 = time.perf_counter()
    res = incognito(leaves, tuple(hierarchies), S, k, p)
    codes = as_codes(S, np.asarray(leaves).shape[0])
    check = ModelCheck(PrivacyModels(k=k, l=p), codes if p > 1 else None)
    lat = Lattice(leaves, hierarchies, check, 0, columns=columns)
    info: dict[str, object] = {
        "method": "incognito",
        "minimal": [list(m) for m in res.minimal],
        "nodes_checked": res.checked,
        "lattice_size": lat.size,
        "seconds": time.perf_counter() - t0,
    }
    return lat.release(res.levels, info)
