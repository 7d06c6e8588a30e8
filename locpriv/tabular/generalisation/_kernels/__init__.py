"""numba kernels of :mod:`locpriv.tabular.generalisation` (private: the public functions check
their inputs and call these).

==================  ===========================================================================
``mondrian``        Mondrian over numeric key attributes under k-anonymity alone (strict and
                    relaxed), the fast path of
                    :func:`~locpriv.tabular.generalisation.mondrian.mondrian`
``classes``         the equivalence classes of a lattice node, by hashing the ancestor codes of
                    the distinct original rows
==================  ===========================================================================
"""
