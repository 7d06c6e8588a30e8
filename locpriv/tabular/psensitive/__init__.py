"""p-sensitive k-anonymity by microaggregation: feasibility conditions and k-increase
(:mod:`.kincrease`), the seeded heuristics of Solanas et al. (:mod:`.seeded`),
EnhancedPKClustering as printed (:mod:`.enhanced_pk`), GreedyPKClustering (:mod:`.greedy_pk`),
locpriv's SEC-split variant (:mod:`.sec_pk`) and the large-neighbourhood search ``best-p``
(:mod:`.psearch`); numba kernels in :mod:`._kernels`."""
