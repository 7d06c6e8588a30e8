"""What writing the sessions file before answers costs the anonymizer.

With ``[state] sessions_file`` the anonymizer writes the sessions changed since its last write
(members' ids and the fixes of pending audits) before it publishes answers made after a
session changed (:meth:`locpriv.service.anonymizer.AnonymizerService._persist_sessions`): an
export of those sessions, a seal (AES-256-GCM) and an fsynced append per batch of answers, on
the event loop, and a whole write (atomic) once the appended frames outgrow the last whole
one. This benchmark builds real sessions in a :class:`~locpriv.core.cloak.cloaker.Cloaker`
(users uniform on 6 km x 6 km reporting every 10 s, ``S`` of them asking with k = 5 in
30-minute sessions, so that thin regions leave audits pending) and times, per ``S``:

* the whole write: the export of every session (:meth:`Cloaker.export_sessions` into
  :class:`SessionRecords`), then the seal and atomic write (:meth:`SessionsFile.save`, fsync
  included), and the file's size;
* one answer's append: a cloak request is answered as it is handled, so each answered
  session request is one write of the one session it changed: its export (``since``) and
  :meth:`SessionsFile.append` (fsync included); its inverse bounds the session answers a
  second one process can give.

Exports carry the fast users' speeds, as the anonymizer's do
(:meth:`~locpriv.protocols.trusted.TrustedCore.export_sessions`).

Medians of repeated runs.

    .venv/bin/python benchmarks/bench_sessions_file.py [--quick]

Prints a table and writes benchmarks/results/bench_sessions_file.json (``--quick``:
bench_sessions_file_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from locpriv.core.cloak.cloaker import Cloaker  # noqa: E402
from locpriv.core.cloak.session_records import SessionRecords  # noqa: E402
from locpriv.core.cloak.types import CloakConfig, CloakParams  # noqa: E402
from locpriv.service.sessions_file import SessionsFile  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SIDE = 6000.0


def _cloaker(users: int, askers: int, seed: int) -> Cloaker:
    """``askers`` live sessions among ``users`` walkers (two reports, then one request each)."""
    rng = np.random.default_rng(seed)
    cfg = CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=600.0)
    ck = Cloaker(cfg, rng=np.random.default_rng(seed + 1), phase=0.4)
    ids = [f"user-{i:07d}" for i in range(users)]
    xy = rng.uniform(0.0, SIDE, (users, 2))
    ck.update_many(ids, xy, now=0.0)
    ck.update_many(ids, xy + rng.normal(0.0, 10.0, xy.shape), now=10.0)
    p = CloakParams(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=1800.0)
    for a in range(askers):
        ck.request(("ask", a), ids[a], p, 10.5)
    return ck


def _median_ms(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sessions, fewer repeats")
    args = ap.parse_args(argv)
    sizes = (100, 500) if args.quick else (100, 1000, 4000)
    repeat = 5 if args.quick else 20
    t_start = time.perf_counter()
    rows = []
    print(f"{'sessions':>8s} {'members':>8s} {'pending':>8s} {'export ms':>10s} "
          f"{'seal+write ms':>14s} {'file KiB':>9s} {'changed':>8s} {'answer export ms':>17s} "
          f"{'append ms':>10s}")  # fmt: skip
    with tempfile.TemporaryDirectory(dir=RESULTS) as tmp:
        file = SessionsFile(Path(tmp) / "sessions.bin", secrets.token_bytes(32))
        for askers in sizes:
            ck = _cloaker(max(20_000, 10 * askers), askers, seed=askers)
            records = ck.export_sessions(11.0)
            members = sum(len(r.members) for r in records)
            pending = sum(len(a.fixes) for r in records for a in r.audits)

            def export(ck: Cloaker = ck) -> SessionRecords:
                return SessionRecords(
                    saved_at=11.0,
                    tiles={"world": ck.export_sessions(11.0)},
                    speeds={"world": ck.export_speeds()},
                )

            snapshot = export()
            export_ms = _median_ms(export, repeat)
            write_ms = _median_ms(lambda s=snapshot: file.save(s), repeat)
            kib = file.path.stat().st_size / 1024
            # one answered session request
            mark = ck.revision.value
            changed = 1
            p = CloakParams(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=1800.0)
            for a in range(changed):
                ck.request(("again", a), f"user-{a:07d}", p, 11.5)

            def delta(ck: Cloaker = ck, mark: int = mark) -> SessionRecords:
                return SessionRecords(
                    saved_at=11.5,
                    tiles={"world": ck.export_sessions(11.5, mark)},
                    speeds={"world": ck.export_speeds()},
                )

            step = delta()
            delta_ms = _median_ms(delta, repeat)
            append_ms = _median_ms(lambda s=step: file.append(s), repeat)
            rows.append(
                {
                    "sessions": len(records),
                    "members": members,
                    "pending_fixes": pending,
                    "export_ms": export_ms,
                    "seal_write_ms": write_ms,
                    "file_kib": kib,
                    "changed": len(step.tiles.get("world", [])),
                    "answer_export_ms": delta_ms,
                    "append_ms": append_ms,
                }
            )
            print(f"{len(records):8d} {members:8d} {pending:8d} {export_ms:10.2f} "
                  f"{write_ms:14.2f} {kib:9.1f} {rows[-1]['changed']:8d} {delta_ms:17.2f} "
                  f"{append_ms:10.2f}")  # fmt: skip
    seconds = time.perf_counter() - t_start
    out = RESULTS / ("bench_sessions_file_quick.json" if args.quick else "bench_sessions_file.json")
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "fs": str(RESULTS)}
    out.write_text(json.dumps({"machine": machine, "rows": rows, "seconds": seconds}, indent=1))
    print(f"wrote {out} ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
