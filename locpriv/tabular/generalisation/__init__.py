"""k-anonymity by generalisation and suppression: every released key value is true (an
ancestor in the attribute's hierarchy, or an interval holding the value).

Methods: full-domain searches over the generalisation lattice and Mondrian's multidimensional
partitioning; each returns a :class:`~locpriv.tabular.generalisation.release.GeneralisedRelease`.
"""
