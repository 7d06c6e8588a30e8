"""PNG plots of a run (matplotlib, Agg backend; nothing is shown on screen).

:func:`plot_run` writes, into an output directory:

* ``latency.png`` -- CDF of end-to-end and anonymisation latency per protocol (ms, log x);
* ``cloak_area.png`` -- cloak area relative to each request's A_min and A_max (log10 ratios:
  left panel must be > 0, right panel < 0);
* ``k_ratio.png`` -- achieved k / requested k per protocol;
* ``adversary_error.png`` -- the adversary's expected error per protocol (m, box plot);
* ``utility.png`` -- precision and recall of the answers and success rate per protocol;
* ``cost.png`` -- messages and bytes per query per protocol;
* ``positions.png`` -- users' positions at one instant (when trajectories are given).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from simulators.evaluate import QueryRecord
from simulators.mobility import Trajectories

__all__ = ["plot_run"]

_COLOURS = {1: "tab:blue", 2: "tab:orange", 3: "tab:green", 4: "tab:red"}


def _by_protocol(records: Sequence[QueryRecord]) -> dict[int, list[QueryRecord]]:
    out: dict[int, list[QueryRecord]] = {}
    for r in records:
        out.setdefault(r.protocol, []).append(r)
    return dict(sorted(out.items()))


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _latency(by: dict[int, list[QueryRecord]], out: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, attr, title in (
        (axes[0], "t_answer_s", "end to end"),
        (axes[1], "t_anon_s", "anonymisation"),
    ):
        for p, rs in by.items():
            v = np.sort(
                [
                    1000 * (getattr(r, attr) - r.t_request_s)
                    for r in rs
                    if r.ok and getattr(r, attr) is not None
                ]
            )
            if len(v):
                ax.step(
                    np.maximum(v, 1e-3),
                    np.arange(1, len(v) + 1) / len(v),
                    where="post",
                    label=f"P{p} (n={len(v)})",
                    color=_COLOURS.get(p),
                )
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms)")
        ax.set_title(f"{title} latency, CDF")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of answered queries")
    axes[0].legend(loc="lower right", fontsize=8)
    return _save(fig, out / "latency.png")


def _areas(by: dict[int, list[QueryRecord]], out: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for p, rs in by.items():
        rows = [r for r in rs if r.ok and r.area_m2 is not None and r.area_m2 > 0]
        if not rows:
            continue
        lo = [math.log10(r.area_m2 / r.a_min_m2) for r in rows if r.area_m2 and r.a_min_m2 > 0]
        hi = [math.log10(r.area_m2 / r.a_max_m2) for r in rows if r.area_m2]
        kw: dict[str, Any] = {"bins": 30, "alpha": 0.5, "label": f"P{p}", "color": _COLOURS.get(p)}
        if lo:
            axes[0].hist(lo, **kw)
        axes[1].hist(hi, **kw)
    axes[0].axvline(0, color="k", lw=1)
    axes[1].axvline(0, color="k", lw=1)
    axes[0].set_xlabel("log10(area / A_min)  (must be > 0)")
    axes[1].set_xlabel("log10(area / A_max)  (must be < 0)")
    for ax in axes:
        ax.set_ylabel("queries")
        ax.legend(fontsize=8)
    fig.suptitle("cloak area against the requested window")
    return _save(fig, out / "cloak_area.png")


def _k_ratio(by: dict[int, list[QueryRecord]], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    data, labels = [], []
    for p, rs in by.items():
        v = [r.k_achieved / r.k_requested for r in rs if r.ok and r.k_achieved is not None]
        if v:
            data.append(v)
            labels.append(f"P{p}")
    if data:
        ax.boxplot(data, tick_labels=labels, showfliers=False)
    ax.axhline(1.0, color="k", lw=1, ls="--")
    ax.set_ylabel("achieved k / requested k")
    ax.set_title("anonymity achieved (>= 1 required)")
    return _save(fig, out / "k_ratio.png")


def _adversary(by: dict[int, list[QueryRecord]], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    data, labels = [], []
    for p, rs in by.items():
        for attr, name in (
            ("adversary_error_m", ""),
            ("adversary_centroid_error_m", " centroid" if p in (1, 3) else " peer"),
        ):
            v = [getattr(r, attr) for r in rs if r.ok and getattr(r, attr) is not None]
            if v:
                data.append(v)
                labels.append(f"P{p}{name}")
    if data:
        ax.boxplot(data, tick_labels=labels, showfliers=False)
    ax.set_ylabel("expected error (m)")
    ax.set_title("adversary's expected error (Shokri et al. 2011)")
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, out / "adversary_error.png")


def _mean(values: Sequence[float | None]) -> float:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else 0.0


def _utility(by: dict[int, list[QueryRecord]], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    ps = list(by)
    width = 0.25
    series = {
        "success rate": [sum(r.ok for r in by[p]) / len(by[p]) for p in ps],
        "precision": [_mean([r.precision for r in by[p]]) for p in ps],
        "recall": [_mean([r.recall for r in by[p]]) for p in ps],
    }
    for j, (name, values) in enumerate(series.items()):
        ax.bar(np.arange(len(ps)) + (j - 1) * width, values, width, label=name)
    ax.set_xticks(np.arange(len(ps)), [f"P{p}" for p in ps])
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("utility per protocol")
    return _save(fig, out / "utility.png")


def _cost(by: dict[int, list[QueryRecord]], out: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    ps = list(by)
    axes[0].bar([f"P{p}" for p in ps], [np.mean([r.messages for r in by[p]]) for p in ps])
    axes[0].set_ylabel("messages per query")
    axes[1].bar([f"P{p}" for p in ps], [np.mean([r.bytes for r in by[p]]) for p in ps])
    axes[1].set_ylabel("bytes per query")
    fig.suptitle("wire cost per query (all hops)")
    return _save(fig, out / "cost.png")


def _positions(traj: Trajectories, t: float, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    x, y = traj.at(t)
    ax.scatter(x[~traj.static], y[~traj.static], s=2, label="roaming", alpha=0.6)
    ax.scatter(x[traj.static], y[traj.static], s=2, label="static", alpha=0.6)
    ax.set_aspect("equal")
    ax.set_xlabel("east (m)")
    ax.set_ylabel("north (m)")
    ax.set_title(f"{traj.n_users} users at t = {t:.0f} s")
    ax.legend(fontsize=8, markerscale=4)
    return _save(fig, out / "positions.png")


def plot_run(
    records: Sequence[QueryRecord],
    out_dir: str | Path,
    *,
    trajectories: Trajectories | None = None,
    snapshot_t_s: float = 0.0,
) -> list[Path]:
    """Write the run's PNG plots into ``out_dir`` (created); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by = _by_protocol(records)
    paths: list[Path] = []
    if by:
        paths += [
            _latency(by, out),
            _areas(by, out),
            _k_ratio(by, out),
            _adversary(by, out),
            _utility(by, out),
            _cost(by, out),
        ]
    if trajectories is not None:
        paths.append(_positions(trajectories, snapshot_t_s, out))
    return paths


_BAR_LABELS = {
    "region_edges": ("box of k users", "locpriv"),
    "session_cost": ("one-shot", "session,\none box", "session,\ntiles"),
    "city_session_cost": ("one-shot", "session", "session,\nfixes ±10 m"),
}
"""Bar labels of the panels whose bars are not locpriv without and with its defence."""

_BARS = {
    "city_session_cost": ("before", "after", "scattered"),
    "session_cost": ("before", "box", "after"),
}
"""The prefixes of a panel's bars (``{prefix}_{key}``), where not ``before`` and ``after``."""

_GOAL_LINES = {"session_cost": 5.0, "city_session_cost": 5.0}
"""Issue 22's goals drawn across a panel."""


def plot_attacks(attacks: dict[str, dict[str, float]], out_dir: str | Path) -> Path:
    """``attacks.png``: each attack's figure without and with its defence (see
    :func:`simulators.attacks.attacks_summary`)."""
    import matplotlib.pyplot as plt

    panels = [
        (
            "region_edges",
            "pinned_share",
            "region edges on, midway between or at\nan offset from users (share; blind ≈ 0)",
        ),
        (
            "session_cost",
            "area_ratio",
            "30-min sessions: median region\n× one-shot median, goal ≤ 5",
        ),
        (
            "city_session_cost",
            "area_ratio",
            "city of {users:.0f}, sessions: median region\n× one-shot median, goal ≤ 5",
        ),
        ("static_device", "error_sigma", "averaging a static device\nerror (σ), higher is safer"),
        (
            "wandering_device",
            "error_sigma",
            "static device, fixes ±25 m\nerror (σ), higher is safer",
        ),
        ("repeated_cloaks", "success_rate", "intersection attack\nsuccess rate, lower is safer"),
        (
            "fast_neighbours",
            "success_rate",
            "intersection attack, cyclists\n(fixes every 30 s), lower is safer",
        ),
        (
            "scattered_fixes",
            "success_rate",
            "intersection attack, fixes ±5 m\n(fix requests), lower is safer",
        ),
        (
            "stale_fixes",
            "area_m2_median",
            "session region, fixes every 30 s\nmedian m² (fix requests), lower is better",
        ),
        (
            "requester_guess",
            "edge_over_chance",
            "who asked: user nearest an edge\namong candidates (× chance), 1 is blind",
        ),
        ("broker_tracking", "linked_hours", "P4 broker tracking\nhours linked, lower is safer"),
    ]
    panels = [p for p in panels if p[0] in attacks]
    cols = min(5, len(panels))
    rows = -(-len(panels) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(3.7 * cols, 3.4 * rows), squeeze=False)
    axes = list(grid.ravel())
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    for ax, (name, key, title) in zip(axes, panels, strict=False):
        values = [attacks[name][f"{p}_{key}"] for p in _BARS.get(name, ("before", "after"))]
        labels = _BAR_LABELS.get(name, ("before", "defended"))
        colours = ["#bbbbbb", "#3b7dd8", "#1f4e8c"][: len(values)]
        ax.bar(list(labels), values, color=colours)
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.2f}" if v < 1000 else f"{v:.0f}", ha="center", va="bottom",
                    fontsize=9)  # fmt: skip
        if name in _GOAL_LINES:
            ax.axhline(_GOAL_LINES[name], color="#d83b3b", lw=1, ls="--")
        ax.set_title(title.format(**attacks[name]), fontsize=9)
    return _save(fig, Path(out_dir) / "attacks.png")
