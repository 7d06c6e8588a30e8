"""numba kernels of :mod:`locpriv.tabular.psensitive.kincrease` (private). One module per concern:

==================  ===========================================================================
``seeded``          Solanas et al.'s seeded heuristic (``mdav-seed``, ``random-seed``)
``enhanced_pk``     EnhancedPKClustering as printed (its cluster state and scans: ``epk_state``)
``sec_pk``          ``sec-pk``, locpriv's SEC-split variant
==================  ===========================================================================

They use the nearest-neighbour kernels of :mod:`locpriv.tabular._kernels`. numba's on-disk cache
only notices changes to the file that defines a function (see that package's note).
"""
