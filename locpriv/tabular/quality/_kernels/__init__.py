"""numba kernels of :mod:`locpriv.tabular.quality` (private: the public functions check their
inputs and call these).

==================  ===========================================================================
``counting``        distinct confidential values per group (one counting sort by group, then
                    one pass per attribute)
==================  ===========================================================================
"""
