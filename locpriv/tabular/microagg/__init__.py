"""k-anonymity by microaggregation: exact MDAV (:mod:`.mdav`), V-MDAV and local search
(:mod:`.improve`), optimal univariate microaggregation (:mod:`.univariate`), and the partitioned
method for large tables (:mod:`.partitioned`) with its runners (:mod:`.distributed`); numba
kernels in :mod:`._kernels`."""
