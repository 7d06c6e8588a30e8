"""k-anonymity by generalisation and suppression: every released key value is true (an
ancestor in the attribute's hierarchy, or an interval holding the value).

Methods: full-domain searches over the generalisation lattice and Mondrian's multidimensional
partitioning; each returns a :class:`~locpriv.tabular.generalisation.release.GeneralisedRelease`.

Full-domain searches: :mod:`.lattice` (nodes, their evaluation with tuple suppression and
MaxSup, predictive tagging), :mod:`.samarati` (binary search on height), :mod:`.optimal` (exact
minimum of a loss of :mod:`locpriv.tabular.quality.loss`), :mod:`.incognito` (Incognito's result
as a release).
"""
