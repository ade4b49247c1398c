"""The ``tunebox`` command: tune, query, report, benchmark, ceilings, families, space. The only place that
prints."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import DeviceUnavailable, SpaceError, TuneboxError
from .limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from .progress import Progress
from .records import Status
from .runtime.lookup import ENV_DB, shipped_db
from .sweep_spec import STRATEGIES


def _tune(args: argparse.Namespace) -> int:
    from .api import tune

    if args.devices is not None:
        from .search.per_device import parse_devices, run_per_device

        devices = parse_devices(args.devices)
        if not args.storage:
            raise SpaceError("--devices runs one worker per GPU of a shared sweep: give --storage postgresql://... too")
        return run_per_device(args.argv, devices)

    progress = Progress(args.quiet)
    try:
        result = tune(
            Path(args.sweep),
            backend=args.backend,
            recording=args.recording,
            results=args.results,
            db=args.db,
            trials=args.trials,
            seconds=args.seconds,
            strategy=args.strategy,
            progress=progress,
            storage=args.storage,
            replay_pace=args.replay_pace,
            heartbeat_s=args.heartbeat,
            sanitize=args.sanitize,
        )
    finally:
        progress.end()
    origin = "REPLAYED recorded measurements (no GPU here)" if result.replayed else "measured on the GPU"
    print(f"sweep {result.name}: {result.evaluated} variants evaluated in {result.seconds:.1f} s, {origin}")
    for p in result.problems:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(p.counts.items()))
        if p.winner is None or p.winner.timing is None:
            print(f"  {p.name}: no valid variant ({counts})")
            continue
        ms = p.winner.timing.median_ms
        gbps = p.winner.bandwidth_gbps or 0.0
        rate = (
            f"{p.winner.tflops:.0f} TFLOP/s ({p.winner.tflops / BF16_TENSOR_TFLOPS:.0%} of the bf16 peak)"
            if p.winner.tflops
            else f"{gbps:.0f} GB/s ({gbps / COPY_LIMIT_GBPS:.0%} of copy limit)"
        )
        extra = ""
        if p.default and p.default.timing:
            extra += f", {p.default.timing.median_ms / ms:.2f}x the default variant"
        if p.baseline and p.baseline.timing and p.baseline.status is Status.OK:
            extra += f", {p.baseline.timing.median_ms / ms:.2f}x {p.baseline.baseline}"
        stored = "stored" if p.stored else "kept the better stored winner"
        config = " ".join(f"{k}={v}" for k, v in p.winner.config.items())
        print(f"  {p.name}: {ms:.4f} ms, {rate}{extra}; {stored}\n    {config}\n    statuses: {counts}")
        for check in p.sanitized:
            print(f"    compute-sanitizer: {check.describe()}")
    if result.storage is not None:
        print(f"  evaluations and winners: {result.storage}\n  winners copied to: {result.db_path}")
    else:
        print(f"  evaluation log: {result.log_path}\n  winners: {result.db_path}")
    if result.breakdown:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in result.breakdown.items() if v > 0)
        print(f"  time by stage: {parts}")
    return 0


def _query(args: argparse.Namespace) -> int:
    from . import query  # the run-time path: no search or plotting imports

    answer = query(args.family, json.loads(args.problem), db=args.db, device=args.device)
    print(
        json.dumps(
            {
                "source": answer.source,
                "config": answer.config,
                "median_ms": answer.median_ms,
                "library": answer.library,
                "library_ms": answer.library_ms,
                "replayed": answer.replayed,
                "matched_problem": answer.matched_problem_key,
                "explanation": answer.explanation,
            },
            indent=2,
        )
    )
    return 0


def _coverage(args: argparse.Namespace) -> int:
    from .runtime.coverage import coverage
    from .runtime.lookup import default_db

    db = args.db or default_db()
    rows = coverage(db, args.family)
    print(f"{db}: {len(rows)} tuned problems" + (f" of {args.family}" if args.family else ""))
    for c in rows:
        versus = f"{c.ratio:.2f}x {c.library}" if c.ratio is not None else "no library time"
        origin = ("raced" if c.raced else "swept") + (", replayed" if c.replayed else "")
        stale = "" if c.current else "  [stale: the family's sources changed; never served as exact]"
        problem = json.dumps(c.problem, sort_keys=True, separators=(",", ":"))
        print(f"  {c.family} on {c.device}: {problem}  {c.median_ms:.4g} ms ({origin}), {versus}{stale}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from .api import report

    files = report(Path(args.sweep), results=args.results, out=args.out, replay=args.replay)
    print(f"wrote {files.html} and {files.markdown}")
    return 0


def _benchmark(args: argparse.Namespace) -> int:
    from .benchmark import write_benchmark

    doc = write_benchmark([Path(s) for s in args.sweep], args.results, args.out, args.command)
    for case in doc["cases"]:
        ratio = f"{case['ratio']:.2f}x {case['baseline']}" if case["ratio"] else "no baseline"
        rate = (
            f"{case['tunebox_tflops']:.0f} TFLOP/s ({case['fraction_of_tensor_peak']:.0%} of the bf16 peak)"
            if "tunebox_tflops" in case
            else f"{case['fraction_of_limit']:.0%} of the copy limit"
        )
        print(f"{case['name']}: {case['tunebox_ms']:.4f} ms, {rate}, {ratio}")
    print(f"wrote {args.out}")
    return 0


def _ceilings(args: argparse.Namespace) -> int:
    from .ceilings import measure, write_ceilings

    sizes = {"copy_bytes": args.copy_bytes, "matmul_size": args.matmul_size}
    try:
        ceilings = measure(**{k: v for k, v in sizes.items() if v is not None})
    except DeviceUnavailable as exc:  # ceilings has no replay: drop the engine's hint to use one
        raise DeviceUnavailable(_BACKEND_HINT.sub("", str(exc))) from exc
    write_ceilings(ceilings, args.out, args.command)
    for c in (ceilings.copy, ceilings.matmul):
        print(
            f"{c.name}: {c.timing.median_ms:.4f} ms, {c.rate:.0f} {c.unit} "
            f"({c.rate / c.assumed:.0%} of the assumed {c.assumed:.0f}), verified {c.verified}"
        )
    print(f"wrote {args.out}")
    return 0


_BACKEND_HINT = re.compile(r"\s*[^.;()]*--backend[^.;()]*\.?")


def _families(args: argparse.Namespace) -> int:
    from .families import get, names

    for name in names():
        family = get(name)
        print(f"{name}: {len(family.templates)} template(s), {family.space.size()} configurations")
        print("  problem fields:")
        for field, meaning in family.operation.fields.items():
            print(f"    {field:<18} {meaning}")
        for template, space in family.space.templates:
            print(f"  template {template}: {space.size()} configurations")
            for p in space.params:
                print(f"    {p.name:<18} {list(p.choices)}  {p.doc}")
    return 0


def _space(args: argparse.Namespace) -> int:
    from .space_report import space_report
    from .sweep_spec import load_sweep

    spec = load_sweep(Path(args.sweep))
    print(
        f"{spec.name} ({spec.family.name}): templates {', '.join(spec.space.names())}; the search proposes "
        "valid configurations only"
    )
    for problem in space_report(spec):
        print(
            f"  {problem.name}: {problem.valid} valid of {problem.size} ({problem.valid / problem.size:.1%})"
            if problem.size
            else f"  {problem.name}: empty space"
        )
        for t in problem.templates:
            print(f"    {t.template:<10} {t.valid:>7} valid of {t.size:>7} ({t.fraction:.1%})")
    return 0


def _strategies(args: argparse.Namespace) -> int:
    from .search.strategy_benchmark import DEFAULT_SWEEPS, benchmark
    from .search.strategy_tables import table

    sweeps = args.sweeps or [Path("spaces") / f"{name}.toml" for name in DEFAULT_SWEEPS]
    command = " ".join(
        ["tunebox strategies", f"--seeds {args.seeds}", f"--out {args.out}", f"--budget-factor {args.budget_factor:g}"]
        + ([f"--plot {args.plot}"] if args.plot else [])
        + ([f"--sweeps {' '.join(map(str, args.sweeps))}"] if args.sweeps else [])
        + ([f"--recordings {args.recordings}"] if args.recordings else [])
        + ([f"--strategies {' '.join(args.strategies)}"] if args.strategies else [])
        + [f"--kernel-tuner {args.kernel_tuner}"]
    )
    kernel_tuner = {"auto": None, "yes": True, "no": False}[args.kernel_tuner]
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    doc = benchmark(
        sweeps,
        args.out,
        args.plot,
        command,
        recordings=args.recordings,
        names=args.strategies,
        seeds=args.seeds,
        budget_factor=args.budget_factor,
        jobs=args.jobs or os.cpu_count() or 1,
        kernel_tuner=kernel_tuner,
        caches=args.kernel_tuner_caches,
        progress=progress,
    )
    for p in doc["problems"]:
        partial = "" if p["complete"] else f", partial: {p['n']} of {p['valid']} valid measured"
        expects = f"random expects {p['random_expectation']:.1f}"
        print(f"{p['sweep']}/{p['problem']}: n {p['n']}, m {p['m']}, {expects}{partial}")
        for s in p["strategies"]:
            if "error" in s:
                print(f"    {s['strategy']:<32} failed: {s['error']}")
                continue
            print(
                f"    {s['strategy']:<32} {s['mean']:6.1f} +- {s['std']:5.1f} evaluations, "
                f"ratio {s['ratio_to_random']:.2f}, {s['within_random_expectation']:.0%} within random's expectation"
            )
    print(table(doc))
    print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot else "") + f" in {doc['seconds']:.0f} s")
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tunebox")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: the installed version (read only when asked)."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: Any = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(f"tunebox {_version()}")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="tunebox", description=__doc__)
    top.add_argument("--version", action=_VersionAction, help="print the version and exit")
    top.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = top.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tune", help="run or resume a sweep")
    t.add_argument("sweep", help="sweep file, e.g. spaces/tile_copy.toml")
    t.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "gpu", "replay"),
        help="where variants run: gpu, replay (a recorded GPU sweep, marked replayed) or auto "
        "(the GPU when one is usable, else replay; the default)",
    )
    t.add_argument(
        "--recording",
        type=Path,
        help="recorded sweep to replay (default results/recordings/<sweep name>.jsonl beside the sweep file's folder)",
    )
    t.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="results directory: sweeps/<name>[-replay]/ (evaluation log, summary, lock), the "
        "CUBIN cache and the default winners database (default ./results)",
    )
    t.add_argument(
        "--db",
        type=Path,
        help="winners database to store into (default <results>/winners.sqlite; on the replay "
        "backend <results>/winners-replay.sqlite); with --storage, where the shared sweep's winners are copied",
    )
    t.add_argument("--trials", type=int, help="evaluated variants per problem (default: the sweep file's)")
    t.add_argument("--seconds", type=float, help="wall-clock budget of the sweep (default: the sweep file's)")
    t.add_argument("--strategy", choices=STRATEGIES, help="search strategy (default: the sweep file's)")
    t.add_argument("--quiet", action="store_true", help="no progress line")
    t.add_argument(
        "--storage",
        help="run as one worker of a sweep shared through PostgreSQL (postgresql://user:password@host/db): "
        "evaluations, Optuna studies and winners are kept there; start any number of workers, on any host "
        "(needs pip install 'tunebox[distributed]')",
    )
    t.add_argument(
        "--devices",
        help="with --storage: one worker process per listed GPU (e.g. 0,1), each seeing only its device "
        "(CUDA_VISIBLE_DEVICES)",
    )
    t.add_argument(
        "--heartbeat",
        type=int,
        default=10,
        help="with --storage: seconds between a worker's heartbeats; a worker silent for 3x that has its "
        "running trials queued again (default 10)",
    )
    t.add_argument(
        "--replay-pace",
        type=float,
        help="on replay: each answer waits this many times its recorded verify + time seconds (for scaling "
        "runs on a CPU)",
    )
    t.add_argument(
        "--sanitize",
        action=argparse.BooleanOptionalAction,
        help="run each problem's finalists under compute-sanitizer (memcheck, racecheck, synccheck) before a "
        "winner is stored; a finalist it reports on is never stored (default: off; gpu backend only)",
    )
    t.set_defaults(run=_tune)

    q = sub.add_parser("query", help="the tuned configuration for a problem")
    q.add_argument("family", help="kernel family (see `tunebox families`)")
    q.add_argument("problem", help='JSON, e.g. \'{"dtype": "float32", "src": [4096, 4096], "dst": [4096, 4096]}\'')
    q.add_argument(
        "--db",
        type=Path,
        help=f"winners database; it must exist (default: the {ENV_DB} environment variable if set, "
        f"else {shipped_db()}, the same from any directory)",
    )
    q.add_argument("--device", help="device name (default: the only device in the database)")
    q.set_defaults(run=_query)

    cv = sub.add_parser("coverage", help="the problems a winners database covers, with the library's time beside")
    cv.add_argument("family", nargs="?", help="only this family (default: every family)")
    cv.add_argument(
        "--db", type=Path, help=f"winners database (default: as for query; a raced one: {ENV_DB} or a path)"
    )
    cv.set_defaults(run=_coverage)

    r = sub.add_parser("report", help="HTML + Markdown report of a sweep")
    r.add_argument("sweep", help="sweep file whose results to report")
    r.add_argument(
        "--results", type=Path, default=Path("results"), help="results directory the sweep wrote (default ./results)"
    )
    r.add_argument(
        "--out", type=Path, default=Path("reports"), help="directory for the report's files (default ./reports)"
    )
    r.add_argument("--replay", action="store_true", help="report the replayed sweep even if a live one exists")
    r.set_defaults(run=_report)

    b = sub.add_parser("benchmark", help="benchmark file of live GPU sweeps (winners vs torch)")
    b.add_argument("sweep", nargs="+", help="sweep files whose live results to include")
    b.add_argument(
        "--results", type=Path, default=Path("results"), help="results directory the sweeps wrote (default ./results)"
    )
    b.add_argument("--out", type=Path, required=True, help="benchmark file (JSON) to write")
    b.add_argument("--command", required=True, help="the exact command that produced the sweep, recorded")
    b.set_defaults(run=_benchmark)

    c = sub.add_parser("ceilings", help="measure this GPU's copy bandwidth and bf16 matrix-product rate")
    c.add_argument("--out", type=Path, required=True, help="ceilings file (JSON) to write")
    c.add_argument("--command", required=True, help="the exact command that produced the file, recorded")
    c.add_argument("--copy-bytes", type=int, help="bytes copied per launch (default 1 GiB)")
    c.add_argument("--matmul-size", type=int, help="square matrix size (default 8192)")
    c.set_defaults(run=_ceilings)

    f = sub.add_parser("families", help="list kernel families: problem fields, templates and their tunables")
    f.set_defaults(run=_families)

    s = sub.add_parser("space", help="a sweep file's space: size and valid fraction per problem and template")
    s.add_argument("sweep", help="sweep file, e.g. spaces/tile_copy.toml")
    s.set_defaults(run=_space)

    st = sub.add_parser(
        "strategies",
        help="benchmark search strategies on replayed exhaustive recordings (CPU only): evaluations to a "
        "near-optimal target against random search's expectation",
    )
    st.add_argument("--seeds", type=int, default=20, help="seeds per strategy and problem (default 20)")
    st.add_argument(
        "--out",
        type=Path,
        default=Path("results/benchmarks/search.json"),
        help="benchmark file (JSON) to write (default results/benchmarks/search.json)",
    )
    st.add_argument(
        "--plot", type=Path, help="best found versus evaluations per problem, a PNG (e.g. reports/search.png)"
    )
    st.add_argument(
        "--sweeps",
        nargs="+",
        type=Path,
        help="sweep files whose recordings to replay (default: spaces/ gather, scatter, gather_elements, "
        "ragged3d, gemm_wgmma and gemm_skinny)",
    )
    st.add_argument(
        "--recordings",
        type=Path,
        help="folder of the recordings, <sweep name>.jsonl (default: results/recordings/ beside each sweep "
        "file's folder)",
    )
    st.add_argument(
        "--strategies",
        nargs="+",
        help="strategies to run (default: all; names like tunebox:tpe, tunebox:random, tunebox:exhaustive, "
        "optuna:tpe_multivariate, kernel_tuner:genetic_algorithm)",
    )
    st.add_argument(
        "--kernel-tuner",
        choices=("auto", "yes", "no"),
        default="auto",
        help="include Kernel Tuner's strategies, run in its simulation mode (auto: when it is installed, "
        "pip install '.[bench]'; the default)",
    )
    st.add_argument(
        "--kernel-tuner-caches", type=Path, help="folder to write (and keep) the Kernel Tuner cache files in"
    )
    st.add_argument(
        "--budget-factor",
        type=float,
        default=10.0,
        help="each seed evaluates at most this many times random's expected evaluations (default 10)",
    )
    st.add_argument("--jobs", type=int, help="worker processes (default: the CPU count)")
    st.add_argument("--quiet", action="store_true", help="no progress lines (one per problem and strategy)")
    st.set_defaults(run=_strategies)
    return top


def main(argv: list[str] | None = None) -> int:
    """The command; a closed stdout (``tunebox families | head -1``) ends it quietly, as the Python
    documentation recommends for SIGPIPE."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # inside the try: a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        try:  # Python flushes stdout again on exit: point it at devnull first
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for commands that start workers
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        run: Callable[[argparse.Namespace], int] = args.run  # every subcommand sets one of the handlers above
        return run(args)
    except TuneboxError as exc:
        print(f"tunebox: error: {exc}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"tunebox: error: the problem is not valid JSON ({exc})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tunebox: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
