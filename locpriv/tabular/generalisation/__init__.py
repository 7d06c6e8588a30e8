"""k-anonymity by generalisation and suppression: every released key value is true (an
ancestor in the attribute's hierarchy, or an interval holding the value).

Methods: full-domain searches over the generalisation lattice and Mondrian's multidimensional
partitioning; each returns a :class:`~locpriv.tabular.generalisation.release.GeneralisedRelease`.

Full-domain searches: :mod:`.lattice` (nodes, their evaluation with tuple suppression and
MaxSup, predictive tagging), :mod:`.samarati` (binary search on height), :mod:`.optimal` (exact
minimum of a loss of :mod:`locpriv.tabular.quality.loss`), :mod:`.incognito` (Incognito's result
as a release).

Names exported here (those that do not shadow a module of this package): the release
(:class:`GeneralisedRelease`), hierarchies (:class:`LevelHierarchy`, :class:`KeyTable`, ARX CSV
:func:`read_hierarchy` / :func:`write_hierarchy`, generated :func:`build_hierarchy`), the key
table of a frame (:func:`key_table`) and :func:`incognito_release`. The methods ``samarati``,
``optimal`` and ``mondrian`` share their modules' names, so they are exported from
:mod:`locpriv.tabular` instead (``locpriv.tabular.samarati`` is the function,
``locpriv.tabular.generalisation.samarati`` its module).
"""

from __future__ import annotations

from locpriv.tabular.generalisation.arx import read_hierarchy, write_hierarchy
from locpriv.tabular.generalisation.builders import build_hierarchy
from locpriv.tabular.generalisation.hierarchy import KeyTable, LevelHierarchy
from locpriv.tabular.generalisation.incognito import incognito_release
from locpriv.tabular.generalisation.keys import key_table
from locpriv.tabular.generalisation.release import GeneralisedRelease

__all__ = [
    "GeneralisedRelease",
    "KeyTable",
    "LevelHierarchy",
    "build_hierarchy",
    "incognito_release",
    "key_table",
    "read_hierarchy",
    "write_hierarchy",
]
