"""The one kernel that records location reports in :class:`~locpriv.core.cloak.users.UserTable`.

``record(slots, xs, ys, now, table arrays...)`` applies report ``i`` (``xs[i], ys[i]`` metres,
at ``now`` seconds) to slot ``slots[i]``, rows in order (a slot given twice takes both
reports, one after the other): it shifts the latest report to the previous one, folds it
into the velocity origin (:data:`VELOCITY_MEMORY_S`, :data:`VELOCITY_ACCURACY_FACTOR`), reads
the chord speed (:data:`SPEED_BASELINE_S`, :data:`FIX_SCATTER_M`, :data:`SPEED_MEMORY_S`),
moves the settle point of a user who left it (:data:`STILL_RADIUS_M`) and writes the new
latest report. A slot whose ``t`` is not finite takes its first report. One compiled loop
serves a single update and a batch alike, a few microseconds a report
(``benchmarks/bench_cloak.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

STILL_RADIUS_M = 25.0
"""A user whose reports stay within this many metres of where she settled counts as still
(``UserTable.still_t``): a walker leaves it within a minute, a GPS fix's scatter does not."""

STILL_ACCURACY_FACTOR = 2.5
"""A fix whose report gives its accuracy (m) counts as staying within this many times that
of where she settled, if more than :data:`STILL_RADIUS_M`: two fixes of a phone that does
not move lie farther apart than 2.5 accuracies (3.75 sigma, the accuracy being the 68 %
radius) about 3 % of the time, where fixes scattered by 20 m would leave 25 m most times."""

SPEED_MEMORY_S = 900.0
"""Half-life, seconds of moving, of ``UserTable.vmax``, the fastest a user has been seen
to move: a cyclist who slows down keeps most of hers for minutes, and nobody loses hers while
she stays put (a parked car may drive off at any moment)."""

FIX_SCATTER_M = 10.0
"""How far, metres, one fix may lie from the truth (GPS scatter): each end of a chord may be
off by this much, so a chord's speed is read from its length less twice this."""

VELOCITY_MEMORY_S = 10.0
"""Memory, seconds, of the point a user's velocity is read from (``UserTable.ox, oy, ot``).
A report that stayed her latest at least this long becomes that point when the next one
comes (with reports this far apart, her velocity is the chord from the report before the
latest, no lag); one replaced sooner (a fresh fix asked for a second after a periodic one,
a stream of fixes) only joins it, position and time, with weight ``1 - exp(-dt /
VELOCITY_MEMORY_S)``, ``dt`` how long it stayed the latest. The velocity ``(x - ox) / (t -
ot)`` is exact for a user moving in a straight line at constant speed either way; over a
second's baseline a fix's scatter (10 m) would read as 10 m/s, and under a stream of fixes
the baseline is about this memory and the average smooths their scatter. (Averaging every
report instead, 30 s apart too, lagged a walk that had just begun by 5 % and narrowed 3 of
240 sessions of parties that leave together at 3 m/s, against 1.)"""

VELOCITY_ACCURACY_FACTOR = 8.0
"""Where a report says its fix's accuracy (m), the velocity origin remembers at least this
many seconds per metre of it (``max(VELOCITY_MEMORY_S, factor * accuracy)``), and every
report joins the origin that way, however long it stayed the latest: fixes that scatter by
10 m (an accuracy of 15 m) are averaged over about two minutes, so the chord a velocity is
read from is long beside their scatter. Reading the chord from the report before the latest
at 30 s (less twice the accuracy, :class:`~locpriv.core.cloak.cloaker.Cloaker`'s motion)
left a walker at about a third of her speed, and choosing session members by forecasts that
short cost the city 6.18x the undefended median with 10 m of scatter, against 5.78x with
this (docs/algorithms.md, "Where the city's price of 10 m of scatter lies"). Exact fixes,
and reports that say nothing, keep :data:`VELOCITY_MEMORY_S` as it was."""

SPEED_BASELINE_S = 30.0
"""Least time, seconds, between the two reports whose chord gives a speed: over shorter
chords a fix's scatter would hide a car's speed (10 m in 1 s) or make one of a still phone."""


@numba.njit(cache=True, nogil=True)
def record(  # type: ignore[no-untyped-def]  # noqa: PLR0917  # pragma: no cover - numba
    slots, xs, ys, errs, now, x, y, t, px, py, pt, ox, oy, ot, ax, ay, at, vmax, sx, sy, still_t
):
    """Apply reports ``(xs[i], ys[i])`` at ``now`` to ``slots[i]``, in order (see module)."""
    for i in range(slots.shape[0]):
        s = slots[i]
        nx = xs[i]
        ny = ys[i]
        new = not math.isfinite(t[s])
        if new:
            vmax[s] = 0.0
            pt[s] = -math.inf
            ot[s] = -math.inf
        else:
            if t[s] < now:  # the latest report becomes the previous one
                px[s] = x[s]
                py[s] = y[s]
                pt[s] = t[s]
                # ... and joins the velocity origin, weighted by how long it was the latest
                # (over a memory that grows with the accuracy her report says)
                memory = VELOCITY_MEMORY_S
                if errs[i] == errs[i]:
                    memory = max(memory, VELOCITY_ACCURACY_FACTOR * errs[i])
                if math.isfinite(ot[s]) and (
                    now - t[s] < VELOCITY_MEMORY_S or memory > VELOCITY_MEMORY_S
                ):
                    w = 1.0 - math.exp(-(now - t[s]) / memory)
                    ox[s] += w * (x[s] - ox[s])
                    oy[s] += w * (y[s] - oy[s])
                    ot[s] += w * (t[s] - ot[s])
                else:
                    ox[s] = x[s]
                    oy[s] = y[s]
                    ot[s] = t[s]
            dt = now - at[s]
            if dt >= SPEED_BASELINE_S:  # a chord long enough in time gives a speed
                chord = max(math.hypot(nx - ax[s], ny - ay[s]) - 2 * FIX_SCATTER_M, 0.0) / dt
                kept = np.exp2(-dt / SPEED_MEMORY_S) if chord > 0 else 1.0  # none at rest
                vmax[s] = max(chord, vmax[s] * kept)
        if new or now - at[s] >= SPEED_BASELINE_S:  # the next chord starts here
            ax[s] = nx
            ay[s] = ny
            at[s] = now
        radius = STILL_RADIUS_M
        if errs[i] == errs[i]:  # said (not nan): a stay holds what the fixes scatter by
            radius = max(radius, STILL_ACCURACY_FACTOR * errs[i])
        if new or math.hypot(nx - sx[s], ny - sy[s]) > radius:
            sx[s] = nx
            sy[s] = ny
            still_t[s] = now
        x[s] = nx
        y[s] = ny
        t[s] = now
