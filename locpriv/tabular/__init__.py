"""Batch core: k-anonymity and related privacy models for microdata, by microaggregation and by
generalisation and suppression.

Folders by concern: methods by family (:mod:`.microagg`: MDAV, V-MDAV, local search, univariate,
partitioned; :mod:`.psensitive`: the p-sensitive heuristics; :mod:`.generalisation`: full-domain
searches, Mondrian, hierarchies), privacy models (:mod:`.models`), risk (:mod:`.risk`), utility
and audits (:mod:`.quality`), files, fronts and report (:mod:`.io`), and the seeds' algorithms
transcribed line by line (:mod:`.traces`); shared input checks in :mod:`.checks` and shared
nearest-neighbour kernels in :mod:`._kernels` (family kernels sit in each family's ``_kernels``).
The public names below are importable from ``locpriv.tabular``; no public name shadows a module:
``locpriv.tabular.mdav`` is the MDAV function, whose module is ``locpriv.tabular.microagg.mdav``.
"""

from __future__ import annotations

from locpriv.tabular.io.estimators import METHODS, Microaggregator
from locpriv.tabular.io.frame import anonymize
from locpriv.tabular.io.generalised import GEN_METHODS, generalise
from locpriv.tabular.microagg.mdav import mdav
from locpriv.tabular.models.extended import Hierarchy
from locpriv.tabular.psensitive.enhanced_pk import enhanced_pk_clustering
from locpriv.tabular.psensitive.kincrease import (
    Conditions,
    conditions,
    k_increase,
    require_feasible,
)
from locpriv.tabular.psensitive.psearch import best_p_sensitive
from locpriv.tabular.psensitive.seeded import mdav_seed, random_seed, seeded_groups
from locpriv.tabular.quality.metrics import (
    avg_class_size,
    discernibility,
    il_percent,
    size_histogram,
    sse,
    sst,
    truta_il,
)
from locpriv.tabular.quality.validate import (
    achieved_p,
    homogeneous_groups,
    is_k_anonymous,
    is_p_sensitive,
)

__all__ = [
    "GEN_METHODS",
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
    "generalise",
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
