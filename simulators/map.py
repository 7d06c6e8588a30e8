"""One self-contained HTML page of a run: the street grid, the users, each protocol's regions
and Protocol 4 groups over time, with a time slider (inline SVG and JavaScript: no network, no
map tiles).

:func:`map_data` gathers what the page draws (metres in the scenario's projection, x east, y
north; times in scenario seconds); :func:`write_map` embeds it in the page. A region (P1, P3)
is shown from the moment its answer reached the user for ``linger_s`` seconds; a P4 group
(the centroid DS saw and its radius) likewise. Opening ``map.html#t=12`` starts the slider at
12 s. After drawing, the page writes what it drew into ``#drawn``
(``{"t": ..., "users": ..., "regions": ..., "groups": ...}``), for people and for tests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulators.evaluate import QueryRecord
from simulators.mobility import Trajectories

__all__ = ["map_data", "visible", "write_map"]


def map_data(
    trajectories: Trajectories,
    records: Sequence[QueryRecord],
    *,
    duration_s: float,
    grid: tuple[int, float] | None = None,
    step_s: float = 1.0,
    linger_s: float = 5.0,
    max_users: int = 2000,
) -> dict[str, Any]:
    """What the page draws. ``grid`` is ``(blocks, block_m)`` of a Manhattan street grid
    centred on the origin (None: no streets); users' positions every ``step_s`` seconds (at
    most ``max_users`` users, the first ones), rounded to 0.1 m."""
    times = np.arange(0.0, duration_s + 1e-9, step_s)
    n = min(trajectories.n_users, max_users)
    frames_x, frames_y = [], []
    for t in times:
        x, y = trajectories.at(float(t))
        frames_x.append(np.round(x[:n], 1))
        frames_y.append(np.round(y[:n], 1))
    xs = np.stack(frames_x, axis=1) if frames_x else np.zeros((n, 0))
    ys = np.stack(frames_y, axis=1) if frames_y else np.zeros((n, 0))
    regions = [
        {
            "p": r.protocol,
            "t0": round(r.t_answer_s, 3),
            "t1": round(r.t_answer_s + linger_s, 3),
            "rings": [[list(v) for v in ring] for ring in rings],
        }
        for r in records
        if r.ok
        and r.t_answer_s is not None
        and (rings := r.region_rings_xy or ((r.region_xy,) if r.region_xy else ()))
    ]
    groups = [
        {
            "t0": round(r.t_answer_s, 3),
            "t1": round(r.t_answer_s + linger_s, 3),
            "x": r.group_xyr[0],
            "y": r.group_xyr[1],
            "r": r.group_xyr[2],
        }
        for r in records
        if r.ok and r.group_xyr is not None and r.t_answer_s is not None
    ]
    extent = float(np.nanmax(np.abs(np.concatenate([xs.ravel(), ys.ravel(), [1.0]]))))
    if grid is not None:
        extent = max(extent, grid[0] * grid[1] / 2)
    return {
        "duration_s": float(duration_s),
        "times": [round(float(t), 3) for t in times],
        "extent_m": extent + 50.0,
        "grid": None if grid is None else {"blocks": grid[0], "block_m": grid[1]},
        "users_x": xs.tolist(),
        "users_y": ys.tolist(),
        "regions": regions,
        "groups": groups,
    }


def visible(data: dict[str, Any], t: float) -> tuple[int, int]:
    """``(regions, groups)`` the page shows at time ``t``: those with ``t0 <= t < t1``."""
    regions = sum(1 for r in data["regions"] if r["t0"] <= t < r["t1"])
    groups = sum(1 for g in data["groups"] if g["t0"] <= t < g["t1"])
    return regions, groups


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>locpriv demo map</title>
<style>
body { font: 14px sans-serif; margin: 1em; }
svg { border: 1px solid #ccc; background: #fafafa; width: min(90vh, 95vw); height: auto; }
.street { stroke: #ddd; stroke-width: 6; }
.user { fill: #555; }
.region { fill-opacity: 0.18; stroke-width: 3; }
.p1 { fill: #1f77b4; stroke: #1f77b4; }
.p3 { fill: #2ca02c; stroke: #2ca02c; }
.group { fill: #d62728; fill-opacity: 0.03; stroke: #d62728; stroke-width: 4;
         stroke-dasharray: 20 12; }
.legend span { margin-right: 1.5em; }
</style></head><body>
<h1>locpriv demo: who is where, and what the services answered</h1>
<p class="legend"><span style="color:#555">&#9679; users</span>
<span style="color:#1f77b4">&#9632; Protocol 1 regions</span>
<span style="color:#2ca02c">&#9632; Protocol 3 regions</span>
<span style="color:#d62728">&#9675; Protocol 4 groups (centroid and radius DS saw)</span></p>
<p><label>t = <output id="tval">0</output> s
<input id="slider" type="range" min="0" step="1" style="width:60%"></label></p>
<p id="drawn"></p>
<svg id="map" xmlns="http://www.w3.org/2000/svg"></svg>
<script id="data" type="application/json">__DATA__</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
const svg = document.getElementById("map");
const E = D.extent_m;
svg.setAttribute("viewBox", `${-E} ${-E} ${2 * E} ${2 * E}`);
const base = document.createElementNS(NS, "g");
const layer = document.createElementNS(NS, "g");
base.setAttribute("transform", "scale(1,-1)");
layer.setAttribute("transform", "scale(1,-1)");
svg.appendChild(base);
svg.appendChild(layer);
function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  parent.appendChild(e);
  return e;
}
if (D.grid) {
  const h = D.grid.blocks * D.grid.block_m / 2;
  for (let i = 0; i <= D.grid.blocks; i++) {
    const v = -h + i * D.grid.block_m;
    el("line", {class: "street", x1: v, y1: -h, x2: v, y2: h}, base);
    el("line", {class: "street", x1: -h, y1: v, x2: h, y2: v}, base);
  }
}
function frameAt(t) {
  let best = 0;
  for (let i = 0; i < D.times.length; i++) if (D.times[i] <= t) best = i;
  return best;
}
function draw(t) {
  while (layer.firstChild) layer.removeChild(layer.firstChild);
  let regions = 0, groups = 0;
  for (const g of D.groups) {
    if (g.t0 <= t && t < g.t1) {
      el("circle", {class: "group", cx: g.x, cy: g.y, r: Math.max(g.r, 15)}, layer);
      groups++;
    }
  }
  for (const r of D.regions) {
    if (r.t0 <= t && t < r.t1) {
      for (const ring of r.rings) {
        const points = ring.map(v => v.join(",")).join(" ");
        el("polygon", {class: `region p${r.p}`, points: points}, layer);
      }
      regions++;
    }
  }
  const f = frameAt(t);
  for (let u = 0; u < D.users_x.length; u++) {
    el("circle", {class: "user", cx: D.users_x[u][f], cy: D.users_y[u][f], r: 12}, layer);
  }
  document.getElementById("tval").textContent = t;
  const drawn = {t: t, users: D.users_x.length, regions: regions, groups: groups};
  document.getElementById("drawn").textContent = JSON.stringify(drawn);
}
const slider = document.getElementById("slider");
slider.max = D.duration_s;
const m = /t=([0-9.]+)/.exec(location.hash);
slider.value = m ? Number(m[1]) : Math.floor(D.duration_s / 2);
slider.addEventListener("input", () => draw(Number(slider.value)));
draw(Number(slider.value));
</script></body></html>
"""


def write_map(path: str | Path, data: dict[str, Any]) -> Path:
    """Write the page for ``data`` (:func:`map_data`) to ``path``; returns it."""
    text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    out = Path(path)
    out.write_text(_PAGE.replace("__DATA__", text), encoding="utf-8")
    return out
