"""numba kernels of the generalisation methods (private)."""
