"""Soak: 100,000 hostile payloads at `locpriv serve all` on mosquitto; crashes, answers, memory.

    .venv/bin/python benchmarks/soak_fuzz.py [--quick] [--cases N] [--batch N]

Starts a private mosquitto 2.0 and `locpriv serve all` (anonymizer and DS in one child process),
then publishes the seeded cases of :func:`simulators.hostile.fuzz_cases` in batches. After each
batch it waits until every request with a usable ``reply_to`` has its answer and samples the
service process's resident memory (``VmRSS``). Reports: cases sent, answers expected and
received, stray publishes (outside reply, error, status and the DS hop), whether the process is
still alive, and RSS after the first batch against the last (flat memory). Writes
benchmarks/results/soak_fuzz.json. Not collected by the test run (the standing test in
tests/integration/test_fuzz_services.py runs a few thousand cases of the same generator).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from locpriv.service.broker import MosquittoProcess
from locpriv.transport import connect
from locpriv.wire.topics import Topics
from simulators.hostile import fuzz_cases, stray_topics

RESULTS = Path(__file__).resolve().parent / "results" / "soak_fuzz.json"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


async def _soak(cases_n: int, batch: int) -> dict[str, Any]:
    topics = Topics("soak")
    workdir = tempfile.mkdtemp(prefix="locpriv-soak-")
    config = Path(workdir) / "locpriv.toml"
    config.write_text(
        'prefix = "soak"\n[cloak]\nepoch_s = 0.5\ndefault_k = 3\ndefault_max_delay_s = 1.0\n'
        "max_delay_s_bound = 2.0\n[limits]\nmax_queue = 200000\n"
    )
    mosquitto = MosquittoProcess(workdir)
    mosquitto.start()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "locpriv",
            "-q",
            "serve",
            "all",
            "--broker",
            mosquitto.url,
            "--config",
            str(config),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: Counter[str] = Counter()
    sent: Counter[str] = Counter()
    expected: Counter[str] = Counter()
    rss: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving" in line, line

        async with connect(mosquitto.url) as spy, connect(mosquitto.url) as pub:
            await spy.subscribe(f"{topics.root}/#")

            async def collect() -> None:
                async for msg in spy.messages():
                    seen[msg.topic] += 1

            collector = asyncio.create_task(collect())
            cases = fuzz_cases(topics, cases_n, seed=2026)
            done = 0
            while done < cases_n:
                chunk = [next(cases) for _ in range(min(batch, cases_n - done))]
                for case in chunk:
                    await pub.publish(case.topic, case.payload)
                    sent[case.topic] += 1
                    if case.expect_reply is not None:
                        expected[case.expect_reply] += 1
                done += len(chunk)
                deadline = time.monotonic() + 120
                while any(seen[t] < 1 for t in expected) and time.monotonic() < deadline:
                    if proc.poll() is not None:
                        break
                    await asyncio.sleep(0.2)
                if proc.poll() is not None:
                    break
                rss.append((done, _rss_mb(proc.pid)))
                print(
                    f"{done:>8} cases  answered {sum(1 for t in expected if seen[t])}"
                    f"/{len(expected)}  RSS {rss[-1][1]:.1f} MB",
                    flush=True,
                )
            await asyncio.sleep(1.0)
            collector.cancel()
    finally:
        alive = proc.poll() is None
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        mosquitto.stop()
    stray = stray_topics(topics, seen, sent)
    answered = sum(1 for t in expected if seen[t] >= 1)
    return {
        "cases": sum(sent.values()),
        "expected_answers": len(expected),
        "answered": answered,
        "duplicated_answers": sum(1 for t in expected if seen[t] > expected[t]),
        "stray_topics": stray,
        "alive_at_end": alive,
        "exit_status_after_sigterm": proc.returncode,
        "rss_mb": rss,
        "rss_growth_mb": (rss[-1][1] - rss[0][1]) if len(rss) > 1 else 0.0,
        "seconds": time.perf_counter() - t0,
        "stderr_tail": err[-2000:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000 cases")
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args()
    n = 5_000 if args.quick else args.cases
    load_start = os.getloadavg()
    result = asyncio.run(_soak(n, min(args.batch, n)))
    result["machine"] = {
        "python": platform.python_version(),
        "arch": platform.machine(),
        "cores": os.cpu_count(),
        "load_avg_start": load_start,  # 1, 5, 15 min: was the machine quiet?
        "load_avg_end": os.getloadavg(),
    }
    print(
        f"\ncases {result['cases']}, answers {result['answered']}/{result['expected_answers']}, "
        f"stray {len(result['stray_topics'])}, alive {result['alive_at_end']}, "
        f"RSS {result['rss_mb'][0][1]:.1f} -> {result['rss_mb'][-1][1]:.1f} MB, "
        f"{result['seconds']:.0f} s"
    )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    ok = (
        result["alive_at_end"]
        and result["answered"] == result["expected_answers"]
        and not result["stray_topics"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
