"""Batch core: k-anonymity and related privacy models for microdata, by microaggregation and by
generalisation and suppression.

Folders by concern: methods by family (:mod:`.microagg`: MDAV, V-MDAV, local search, univariate,
partitioned; :mod:`.psensitive`: the p-sensitive heuristics; :mod:`.generalisation`: full-domain
searches, Mondrian, hierarchies), privacy models (:mod:`.models`), risk (:mod:`.risk`), utility
and audits (:mod:`.quality`), files, fronts and report (:mod:`.io`), and the seeds' algorithms
transcribed line by line (:mod:`.traces`); shared input checks in :mod:`.checks` and shared
nearest-neighbour kernels in :mod:`._kernels` (family kernels sit in each family's ``_kernels``).
The public names below are importable from ``locpriv.tabular``; no public name shadows a module:
``locpriv.tabular.mdav`` is the MDAV function, whose module is ``locpriv.tabular.microagg.mdav``;
likewise ``samarati``, ``optimal``, ``mondrian`` (modules in :mod:`.generalisation`) and
``repair`` (module in :mod:`.models`).
"""

from __future__ import annotations

from locpriv.tabular.generalisation import (
    GeneralisedRelease,
    KeyTable,
    LevelHierarchy,
    build_hierarchy,
    incognito_release,
    key_table,
    read_hierarchy,
    write_hierarchy,
)
from locpriv.tabular.generalisation.mondrian import mondrian
from locpriv.tabular.generalisation.optimal import optimal
from locpriv.tabular.generalisation.samarati import samarati
from locpriv.tabular.io.estimators import METHODS, Microaggregator
from locpriv.tabular.io.frame import anonymize
from locpriv.tabular.io.generalised import GEN_METHODS, generalise
from locpriv.tabular.microagg.mdav import mdav
from locpriv.tabular.models import ModelCheck, PrivacyModels
from locpriv.tabular.models.extended import Hierarchy
from locpriv.tabular.models.repair import repair
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
    "GeneralisedRelease",
    "Hierarchy",
    "KeyTable",
    "LevelHierarchy",
    "Microaggregator",
    "ModelCheck",
    "PrivacyModels",
    "achieved_p",
    "anonymize",
    "avg_class_size",
    "best_p_sensitive",
    "build_hierarchy",
    "conditions",
    "discernibility",
    "enhanced_pk_clustering",
    "generalise",
    "homogeneous_groups",
    "il_percent",
    "incognito_release",
    "is_k_anonymous",
    "is_p_sensitive",
    "k_increase",
    "key_table",
    "mdav",
    "mdav_seed",
    "mondrian",
    "optimal",
    "random_seed",
    "read_hierarchy",
    "repair",
    "require_feasible",
    "samarati",
    "seeded_groups",
    "size_histogram",
    "sse",
    "sst",
    "truta_il",
    "write_hierarchy",
]
