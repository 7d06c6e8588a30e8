"""Simulated location fixes that lie off the truth, as real receivers' do.

A fix scatters around where the device really is by a normal ``scatter_m`` per axis (GPS
5-10 m outdoors, Wi-Fi and cells tens of metres); a phone's report says how far off it may be
(``accuracy_m``, the 68 % radius: :data:`ACCURACY_PER_SCATTER` times the scatter), or says
nothing (nan: the anonymizer then assumes ``session_fix_error_m``). Exact fixes say 0. The
adversary of the attacks knows where everyone really is; only the reports scatter.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]

ACCURACY_PER_SCATTER = 1.5
"""A report's ``accuracy_m`` over the per-axis scatter of its fix: the radius holding 68 % of
a two-dimensional normal's fixes is 1.51 sigma."""


class Fixes:
    """Reports of true positions scattered by ``scatter_m`` per axis (metres) from ``rng``;
    ``says_accuracy``: each report gives its accuracy (else none, nan)."""

    def __init__(self, scatter_m: float, rng: np.random.Generator, *, says_accuracy: bool) -> None:
        if not (math.isfinite(scatter_m) and scatter_m >= 0):
            raise ValueError(f"scatter_m must be finite and >= 0, got {scatter_m}")
        self.scatter_m = scatter_m
        self.rng = rng
        said = ACCURACY_PER_SCATTER * scatter_m if says_accuracy else math.nan
        self.accuracy_m = 0.0 if scatter_m == 0 else said
        """What each report says of its accuracy (m): 0 for exact fixes, nan for unsaid."""

    def report(self, xy: F64) -> tuple[F64, F64]:
        """Fixes of the true positions ``xy`` (n, 2) in metres, and their accuracy (n,)."""
        fixes = np.asarray(xy, dtype=np.float64)
        if self.scatter_m > 0:
            fixes = fixes + self.rng.normal(0.0, self.scatter_m, fixes.shape)
        return fixes, np.full(len(fixes), self.accuracy_m)
