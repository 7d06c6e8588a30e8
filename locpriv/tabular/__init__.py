"""Batch core: k-anonymity and p-sensitive k-anonymity of microdata by microaggregation.

Modules by concern: k-anonymity (:mod:`.microaggregation` for MDAV, :mod:`.improve`,
:mod:`.univariate`), p-sensitive methods (:mod:`.psensitive`, :mod:`.seeded`,
:mod:`.enhanced_pk`, :mod:`.sec_pk`, :mod:`.psearch`, :mod:`.hierarchy`), input checks
(:mod:`.checks`), key encoding (:mod:`.categorical`), metrics (:mod:`.metrics`), audit of
partitions and releases (:mod:`.validate`), the estimator (:mod:`.estimators`), the pandas
front (:mod:`.frame`), files (:mod:`.io`) and the command (:mod:`.cli`); the numba kernels are
in the private subpackage :mod:`._kernels`. No public name shadows a module:
``locpriv.tabular.mdav`` is the MDAV function, whose module is
``locpriv.tabular.microaggregation``.
"""

from __future__ import annotations

from locpriv.tabular.enhanced_pk import enhanced_pk_clustering
from locpriv.tabular.estimators import METHODS, Microaggregator
from locpriv.tabular.frame import anonymize
from locpriv.tabular.hierarchy import Hierarchy
from locpriv.tabular.metrics import (
    avg_class_size,
    discernibility,
    il_percent,
    size_histogram,
    sse,
    sst,
    truta_il,
)
from locpriv.tabular.microaggregation import mdav
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
