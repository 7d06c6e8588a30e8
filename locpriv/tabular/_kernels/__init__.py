"""Shared numba kernels of :mod:`locpriv.tabular`: the nearest-neighbour queries used by both the
microaggregation and the p-sensitive families (private: the public functions check their inputs
and call these). Family kernels live next to their methods
(:mod:`locpriv.tabular.microagg._kernels`, :mod:`locpriv.tabular.psensitive._kernels`).

==================  ===========================================================================
``knn``             chunked, partial-distance-pruned k-nearest passes and the pivot shell of the
                    p-sensitive methods
``knn_grid``        the grid index of those queries (d <= 2)
``block_index``     the block index of those queries (d > 2): k-d tree order, build, removal
``block_query``     the k-nearest queries on the block index
==================  ===========================================================================

Maintenance note: numba's on-disk cache (``cache=True``) only notices changes to the file that
defines a function, so after editing a kernel that others inline or call, delete the
``__pycache__/*.nb*`` files of every kernel folder to force a recompile of its callers.
"""
