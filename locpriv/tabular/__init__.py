"""Batch core: k-anonymity and p-sensitive k-anonymity of microdata by microaggregation.

``from locpriv.tabular import mdav`` gives the MDAV *function* (it shadows the submodule
attribute of the same name; the module stays importable as ``locpriv.tabular.mdav`` through
``sys.modules`` / ``importlib``). That is the only shadowed name: EnhancedPKClustering is exported
as :func:`enhanced_pk_clustering`, so ``locpriv.tabular.enhanced_pk`` is the submodule.
"""

from __future__ import annotations

from locpriv.tabular.enhanced_pk import enhanced_pk_clustering
from locpriv.tabular.estimators import METHODS, Microaggregator
from locpriv.tabular.hierarchy import Hierarchy
from locpriv.tabular.io import anonymize
from locpriv.tabular.mdav import mdav
from locpriv.tabular.metrics import (
    avg_class_size,
    discernibility,
    il_percent,
    size_histogram,
    sse,
    sst,
    truta_il,
)
from locpriv.tabular.psearch import best_p_sensitive
from locpriv.tabular.psensitive import (
    Conditions,
    conditions,
    k_increase,
    require_feasible,
)
from locpriv.tabular.seeded import mdav_seed, random_seed, seeded_groups
from locpriv.tabular.validate import (
    achieved_p,
    homogeneous_groups,
    is_k_anonymous,
    is_p_sensitive,
)

__all__ = [
    "METHODS",
    "Conditions",
    "Hierarchy",
    "Microaggregator",
    "achieved_p",
    "anonymize",
    "avg_class_size",
    "best_p_sensitive",
    "conditions",
    "discernibility",
    "enhanced_pk_clustering",
    "homogeneous_groups",
    "il_percent",
    "is_k_anonymous",
    "is_p_sensitive",
    "k_increase",
    "mdav",
    "mdav_seed",
    "random_seed",
    "require_feasible",
    "seeded_groups",
    "size_histogram",
    "sse",
    "sst",
    "truta_il",
]
