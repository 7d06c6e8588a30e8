"""numba kernels of :mod:`locpriv.tabular` (private: the public functions check their inputs
and call these). One module per concern, named for what it holds:

==================  ===========================================================================
``mdav_common``     primitives of the two exact MDAV kernels (distance sweeps, sorted inserts,
                    the pivot search for the record furthest from the centroid)
``mdav_sweep``      exact MDAV by pruned vectorised sweeps (many independent dimensions)
``mdav_blocks``     exact MDAV on k-d tree blocks with bounding boxes (few effective dimensions)
``knn``             chunked, partial-distance-pruned k-nearest passes and the pivot shell of the
                    p-sensitive methods
``knn_grid``        the grid index of those queries (d <= 2)
``block_index``     the block index of those queries (d > 2): k-d tree order, build, removal
``block_query``     the k-nearest queries on the block index
``seeded``          Solanas et al.'s seeded heuristic (``mdav-seed``, ``random-seed``)
``enhanced_pk``     EnhancedPKClustering as printed (its cluster state and scans: ``epk_state``)
``sec_pk``          ``sec-pk``, locpriv's SEC-split variant
``local_search``    moves, swaps and pair re-splits of the partition improver
``neighbours``      the improver's k-nearest-neighbour graph (exact, or a projection forest)
``vmdav``           V-MDAV
``univariate``      the dynamic programme of optimal univariate microaggregation
``partition_stats`` group statistics, relabelling and face distances of the partitioned
                    method's serial stages (bit-identical to the numpy code they replaced)
==================  ===========================================================================

Maintenance note: numba's on-disk cache (``cache=True``) only notices changes to the file that
defines a function, so after editing a kernel that others inline or call, delete
``locpriv/tabular/_kernels/__pycache__/*.nb*`` to force a recompile of its callers.
"""
