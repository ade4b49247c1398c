"""Throughput of a sweep shared through PostgreSQL by 1, 2 and 4 replay workers (separate processes) on
this host: ``results/benchmarks/distributed.json``.

Each run gets a fresh database on an embedded PostgreSQL (``pgserver``, in a temporary directory)
unless ``--url`` names a server (a database is created there per run). A worker is ``tunebox tune
SWEEP --backend replay --storage URL --replay-pace PACE``: with a pace, every answer waits that many
times the evaluation's recorded verify + time seconds on the GPU; pace 0 is the plain replay, which
answers at once (so only the workers' Python and database round trips are measured).

    python scripts/distributed_scaling.py --out results/benchmarks/distributed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run(url: str, sweep: Path, workers: int, pace: float, results: Path, extra: list[str]) -> dict[str, Any]:
    import psycopg

    name = f"scaling_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # a fresh sweep
    db = url.replace("/postgres?", f"/{name}?") if "/postgres?" in url else url.rsplit("/", 1)[0] + "/" + name
    command = [
        sys.executable, "-m", "tunebox", "tune", str(sweep), "--backend", "replay", "--storage", db,
        "--replay-pace", str(pace), "--quiet", "--results", str(results), *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(workers)
    ]
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"a worker failed:\n{out.decode()[-3000:]}")
    wall = time.perf_counter() - started
    with psycopg.connect(db) as conn:
        totals = conn.execute(
            "SELECT count(*), min(created_at), max(created_at),"
            " sum(coalesce((record_json::json->'stage_seconds'->>'verify')::float, 0)"
            " + coalesce((record_json::json->'stage_seconds'->>'time')::float, 0))"
            " FROM tunebox_evals WHERE phase = 'screen'"
        ).fetchone()
        assert totals is not None  # an aggregate always answers one row
        count, first, last, busy = totals
        per_worker = conn.execute(
            "SELECT worker, count(*) FROM tunebox_evals WHERE phase = 'screen' GROUP BY 1"
        ).fetchall()
        repeated = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM tunebox_evals GROUP BY problem_key, config_key, phase, baseline"
            " HAVING count(*) > 1) d"
        ).fetchone()
        assert repeated is not None
        duplicates = repeated[0]
    steady = (last - first).total_seconds()
    return {
        "workers": workers,
        "pace": pace,
        "evaluated": count,
        "duplicates": duplicates,
        "per_worker": sorted(n for _, n in per_worker),
        "wall_seconds": round(wall, 3),
        "variants_per_second": round(count / wall, 3),
        "steady_seconds": round(steady, 3),
        "steady_variants_per_second": round((count - 1) / steady, 3) if steady > 0 else None,
        "recorded_busy_seconds": round(float(busy or 0.0) * pace, 3),
    }


def plain_replay(sweep: Path, results: Path, extra: list[str]) -> dict[str, Any]:
    """The same sweep without --storage: one process, local files (the baseline of overhead)."""
    command = [sys.executable, "-m", "tunebox", "tune", str(sweep), "--backend", "replay", "--quiet",
               "--results", str(results), *extra]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - started
    summary = json.loads(next(results.glob("sweeps/*/summary.json")).read_text())
    return {
        "evaluated": summary["evaluated"],
        "seconds": round(summary["seconds"], 3),
        "wall_seconds": round(wall, 3),
        "variants_per_second": round(summary["variants_per_second"], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", type=Path, default=REPO / "spaces" / "tile_copy.toml")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--paces", type=float, nargs="+", default=[0.0, 1.0, 5.0])
    ap.add_argument("--strategy", default="exhaustive", help="the sweep's strategy for the runs (default exhaustive)")
    ap.add_argument("--url", help="a PostgreSQL server to use (default: an embedded one in a temporary directory)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    extra = ["--strategy", args.strategy]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        url = args.url
        if url is None:
            import pgserver

            server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
            url = server.get_uri()
        try:
            plain = plain_replay(args.sweep, Path(tmp) / "plain", extra)
            print(f"plain replay, one process: {plain['variants_per_second']:.1f} variants/s", flush=True)
            runs = []
            for pace in args.paces:
                for n in args.workers:
                    r = run(url, args.sweep, n, pace, Path(tmp) / f"r{n}", extra)
                    runs.append(r)
                    print(json.dumps(r), flush=True)
        finally:
            if server is not None:
                server.cleanup()
    speedups = {}
    for pace in args.paces:
        one = next(r for r in runs if r["pace"] == pace and r["workers"] == 1)
        speedups[str(pace)] = {
            str(r["workers"]): {
                "wall": round(r["variants_per_second"] / one["variants_per_second"], 2),
                "steady": round(r["steady_variants_per_second"] / one["steady_variants_per_second"], 2),
            }
            for r in runs
            if r["pace"] == pace
        }
    data = {
        "date": datetime.now(UTC).date().isoformat(),
        "command": "python scripts/distributed_scaling.py " + " ".join(sys.argv[1:]),
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "machine": platform.machine(),
            "load_average_1_5_15_before_and_after": [load_before, os.getloadavg()],
        },
        "versions": {p: version(p) for p in ("optuna", "psycopg", "pgserver", "SQLAlchemy")},
        "sweep": str(args.sweep.relative_to(REPO) if args.sweep.is_relative_to(REPO) else args.sweep),
        "strategy": args.strategy,
        "plain_replay": plain,
        "runs": runs,
        "speedup_over_one_worker": speedups,
    }
    if args.out:
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(speedups, indent=1))


if __name__ == "__main__":
    main()
