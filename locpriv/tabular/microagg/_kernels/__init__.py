"""numba kernels of :mod:`locpriv.tabular.microagg` (private: the public functions check their
inputs and call these). One module per concern:

==================  ===========================================================================
``mdav_common``     primitives of the two exact MDAV kernels (distance sweeps, sorted inserts,
                    the pivot search for the record furthest from the centroid)
``mdav_sweep``      exact MDAV by pruned vectorised sweeps (many independent dimensions)
``mdav_blocks``     exact MDAV on k-d tree blocks with bounding boxes (few effective dimensions)
``local_search``    moves, swaps and pair re-splits of the partition improver
``neighbours``      the improver's k-nearest-neighbour graph (exact, or a projection forest)
``vmdav``           V-MDAV
``univariate``      the dynamic programme of optimal univariate microaggregation
``partition_stats`` group statistics, relabelling and face distances of the partitioned
                    method's serial stages (bit-identical to the numpy code they replaced)
==================  ===========================================================================

numba's on-disk cache (``cache=True``) only notices changes to the file that defines a function:
after editing a kernel that others inline or call, delete the ``__pycache__/*.nb*`` files of the
kernel folders to force a recompile of its callers.
"""
