"""Road-network mobility from SUMO: netgenerate, randomTrips and floating-car-data (FCD) output.

Needs the ``eclipse-sumo`` pip package (extra ``sim``); it runs offline. The binaries are found
through ``sumo.SUMO_HOME`` (``bin/netgenerate``, ``bin/sumo``, ``tools/randomTrips.py``) or on
``PATH``.

:func:`sumo_grid` generates a square grid network, one vehicle per simulated user departing in
the first seconds with many intermediate waypoints (``randomTrips --intermediate``) so that it
keeps driving, runs SUMO with ``--fcd-output`` and resamples the FCD onto the scenario's time
grid. Before a vehicle enters the network its user waits at the first FCD position; after it
arrives she stays at the last one (parked). Net coordinates are shifted so that the network's
centre is the local origin, in metres.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import numpy as np

from simulators.mobility import Trajectories, time_grid

log = logging.getLogger(__name__)

__all__ = ["SumoNotFound", "parse_fcd", "sumo_grid", "sumo_home"]


class SumoNotFound(RuntimeError):
    """The SUMO binaries are not installed (``pip install eclipse-sumo``)."""


def sumo_home() -> Path:
    """The SUMO installation directory: ``sumo.SUMO_HOME``, else found from ``sumo`` on PATH."""
    try:
        import sumo  # type: ignore[import-untyped]

        return Path(sumo.SUMO_HOME)
    except ImportError:
        exe = shutil.which("sumo")
        if exe is None:
            raise SumoNotFound("SUMO not found: pip install eclipse-sumo") from None
        return Path(exe).resolve().parent.parent


def _binary(name: str) -> str:
    cand = sumo_home() / "bin" / name
    if cand.exists():
        return str(cand)
    exe = shutil.which(name)
    if exe is None:
        raise SumoNotFound(f"SUMO binary {name!r} not found")
    return exe


def _run(cmd: list[str], cwd: Path) -> None:
    log.debug("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def parse_fcd(
    path: str | Path,
) -> tuple[dict[str, tuple[list[float], list[float], list[float]]], tuple[float, float]]:
    """Read an FCD file: per vehicle id ``(t, x, y)`` lists (s, net metres) and the net centre.

    The centre is taken from the vehicles' bounding box; use the network's boundary when known.
    """
    tracks: dict[str, tuple[list[float], list[float], list[float]]] = defaultdict(
        lambda: ([], [], [])
    )
    now = 0.0
    for event, elem in ET.iterparse(path, events=("start", "end")):
        if event == "start" and elem.tag == "timestep":
            now = float(elem.get("time", "0"))
        elif event == "end" and elem.tag == "vehicle":
            tr = tracks[elem.get("id", "")]
            tr[0].append(now)
            tr[1].append(float(elem.get("x", "0")))
            tr[2].append(float(elem.get("y", "0")))
            elem.clear()
        elif event == "end" and elem.tag == "timestep":
            elem.clear()
    xs = [v for tr in tracks.values() for v in tr[1]] or [0.0]
    ys = [v for tr in tracks.values() for v in tr[2]] or [0.0]
    return dict(tracks), ((min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2)


def _net_centre(net_file: Path) -> tuple[float, float] | None:
    for _, elem in ET.iterparse(net_file, events=("start",)):
        if elem.tag == "location":
            b = [float(v) for v in elem.get("convBoundary", "0,0,0,0").split(",")]
            return (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
    return None


def sumo_grid(
    n: int,
    *,
    duration_s: float,
    dt_s: float,
    blocks: int,
    block_m: float,
    seed: int,
    vehicle: str = "pedestrian-speed",
    depart_within_s: float = 10.0,
    intermediate: int = 20,
    workdir: str | Path | None = None,
    id_prefix: str = "sumo",
) -> Trajectories:
    """``n`` SUMO vehicles on a ``blocks x blocks`` grid network of ``block_m`` metre blocks.

    ``vehicle`` is ``"car"`` (SUMO's default passenger car) or ``"pedestrian-speed"`` (a
    vehicle type capped at 1.5 m/s, so users move at walking pace along roads). ``seed`` seeds
    netgenerate, randomTrips and SUMO: same seed, same trajectories. Files go to ``workdir``
    (a temporary directory, removed afterwards, when ``None``).
    """
    if n < 1 or blocks < 1 or block_m <= 0:
        raise ValueError("need n >= 1, blocks >= 1 and block_m > 0")
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="locpriv-sumo-") as tmp:
            return sumo_grid(
                n,
                duration_s=duration_s,
                dt_s=dt_s,
                blocks=blocks,
                block_m=block_m,
                seed=seed,
                vehicle=vehicle,
                depart_within_s=depart_within_s,
                intermediate=intermediate,
                workdir=tmp,
                id_prefix=id_prefix,
            )
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    net, trips, routes, fcd = (
        wd / f for f in ("grid.net.xml", "trips.xml", "routes.rou.xml", "fcd.xml")
    )
    _run(
        [
            _binary("netgenerate"),
            "--grid",
            "--grid.number",
            str(blocks + 1),
            "--grid.length",
            f"{block_m}",
            "--default.lanenumber",
            "1",
            "--no-turnarounds",
            "false",
            "--seed",
            str(seed),
            "-o",
            str(net),
        ],
        wd,
    )
    trip_attrs = 'departLane="best" departSpeed="max" departPos="random"'
    if vehicle == "pedestrian-speed":
        type_file = wd / "vtype.add.xml"
        type_file.write_text(
            '<additional><vType id="walker" maxSpeed="1.5" speedFactor="normc(1,0.2,0.5,1.5)" '
            'length="0.5" minGap="0.3" accel="1.0" decel="2.0"/></additional>\n'
        )
        trip_attrs += ' type="walker"'
    elif vehicle != "car":
        raise ValueError("vehicle must be 'car' or 'pedestrian-speed'")
    period = max(depart_within_s / n, 1e-3)
    cmd = [
        sys.executable,
        str(sumo_home() / "tools" / "randomTrips.py"),
        "-n",
        str(net),
        "-o",
        str(trips),
        "-r",
        str(routes),
        "--seed",
        str(seed),
        "-b",
        "0",
        "-e",
        f"{period * n:.6f}",
        "--period",
        f"{period:.6f}",
        "--intermediate",
        str(intermediate),
        "--trip-attributes",
        trip_attrs,
        "--validate",
    ]
    if vehicle == "pedestrian-speed":
        cmd += ["--additional-files", str(wd / "vtype.add.xml")]
    _run(cmd, wd)
    sumo_cmd = [
        _binary("sumo"),
        "-n",
        str(net),
        "-r",
        str(routes),
        "--fcd-output",
        str(fcd),
        "--begin",
        "0",
        "--end",
        f"{duration_s + dt_s:.3f}",
        "--step-length",
        f"{min(dt_s, 1.0):.3f}",
        "--seed",
        str(seed),
        "--no-step-log",
        "true",
        "--no-warnings",
        "true",
        "--ignore-route-errors",
        "true",
        "--collision.action",
        "none",
    ]
    _run(sumo_cmd, wd)  # the routes file already holds the vType written by randomTrips
    tracks, centre = parse_fcd(fcd)
    centre = _net_centre(net) or centre
    t = time_grid(duration_s, dt_s)
    ids = sorted(tracks, key=lambda v: (len(v), v))[:n]
    if len(ids) < n:
        log.warning("SUMO produced %d of %d vehicles; the fleet is smaller", len(ids), n)
    x = np.empty((len(ids), len(t)))
    y = np.empty((len(ids), len(t)))
    for i, vid in enumerate(ids):
        ts, xs, ys = tracks[vid]
        x[i] = np.interp(t, ts, xs) - centre[0]
        y[i] = np.interp(t, ts, ys) - centre[1]
    user_ids = tuple(f"{id_prefix}{i:06d}" for i in range(len(ids)))
    return Trajectories(user_ids, t, x, y, np.zeros(len(ids), dtype=bool))
