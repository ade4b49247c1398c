"""What each ``tunebox`` subcommand does, given its parsed arguments (``cli.py`` parses them): each
returns the process's exit status."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InvalidProblem, SpaceError
from .limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from .progress import Progress
from .records import EvalRecord, Status

if TYPE_CHECKING:
    from .search.runs import ProblemOutcome


def tune(args: argparse.Namespace) -> int:
    from .api import DEFAULT_HEARTBEAT_S, tune
    from .sweep_spec import load_sweep

    if args.heartbeat is not None and not args.storage:
        raise SpaceError("--heartbeat paces the workers of a shared sweep: give --storage postgresql://... too")
    if args.devices is not None:
        from .search.per_device import parse_devices, run_per_device

        devices = parse_devices(args.devices)
        if not args.storage:
            raise SpaceError("--devices runs one worker per GPU of a shared sweep: give --storage postgresql://... too")
        return run_per_device(args.argv, devices)

    spec = load_sweep(Path(args.sweep))
    progress = Progress(args.quiet)
    try:
        result = tune(
            spec,
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
            heartbeat_s=DEFAULT_HEARTBEAT_S if args.heartbeat is None else args.heartbeat,
            sanitize=args.sanitize,
        )
    finally:
        progress.end()
    origin = "REPLAYED recorded measurements (no GPU here)" if result.replayed else "measured on the GPU"
    print(f"sweep {result.name}: {result.evaluated} variants evaluated in {result.seconds:.1f} s, {origin}")
    seconds = args.seconds if args.seconds is not None else spec.search.seconds
    for p in result.problems:
        print(_outcome(p, progress.budgets.get(p.name), seconds))
    if result.storage is not None:
        print(f"  evaluations and winners: {result.storage}\n  winners copied to: {result.db_path}")
    else:
        print(f"  evaluation log: {result.log_path}\n  winners: {result.db_path}")
    if result.breakdown:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in result.breakdown.items() if v > 0)
        print(f"  time by stage: {parts}")
    return 0


def _outcome(p: ProblemOutcome, budget: int | None, seconds: float) -> str:
    """A problem's lines in tune's summary. ``budget``: the variants it was to evaluate (None: not known).
    Evaluated short of it, it was stopped by the sweep's time budget of ``seconds`` (the search stops a
    problem early for nothing else): said so, with a winner picked from fewer variants marked as such."""
    counts = ", ".join(f"{k} {v}" for k, v in sorted(p.counts.items()))
    evaluated = sum(p.counts.values())
    cut = budget is not None and evaluated < budget
    ran_out = (
        f"the sweep's time budget ({seconds:g} s) ran out; run the same command again to resume "
        "(or give more --seconds)"
    )
    winner = p.winner
    if winner is None or winner.timing is None:
        if cut and not evaluated:
            return f"  {p.name}: not searched: {ran_out}"
        if cut:
            return f"  {p.name}: no valid variant among the {evaluated} evaluated of {budget} ({counts}): {ran_out}"
        return f"  {p.name}: no valid variant" + (f" ({counts})" if counts else "")
    ms = winner.timing.median_ms
    extra = ""
    if p.default and p.default.timing:
        extra += f", {p.default.timing.median_ms / ms:.2f}x the default variant"
    if p.baseline and p.baseline.timing and p.baseline.status is Status.OK:
        extra += f", {p.baseline.timing.median_ms / ms:.2f}x {p.baseline.baseline}"
    stored = "stored" if p.stored else "kept the better stored winner"
    config = " ".join(f"{k}={v}" for k, v in winner.config.items())
    lines = [f"  {p.name}: {ms:.4f} ms, {_rate(winner)}{extra}; {stored}", f"    {config}", f"    statuses: {counts}"]
    if cut:
        lines.append(f"    picked from the {evaluated} variants evaluated of its {budget}: {ran_out}")
    elif budget is not None and evaluated > budget:  # a resumed sweep asked for fewer than its log holds
        lines.append(f"    picked from the {evaluated} variants its log holds ({budget} asked this run)")
    lines += [f"    compute-sanitizer: {check.describe()}" for check in p.sanitized]
    return "\n".join(lines)


def _rate(winner: EvalRecord) -> str:
    """The winner's arithmetic rate against the bf16 peak, or its bandwidth against the copy limit."""
    if winner.tflops:
        return _flop_rate(winner.tflops, winner.tflops / BF16_TENSOR_TFLOPS)
    gbps = winner.bandwidth_gbps or 0.0
    return f"{_figure(gbps)} GB/s ({_percent(gbps / COPY_LIMIT_GBPS)} of copy limit)"


def _flop_rate(tflops: float, fraction_of_peak: float) -> str:
    """``tflops`` in TFLOP/s, or GFLOP/s below 1, and its fraction of the bf16 peak: a small problem's
    rate never reads as 0."""
    rate = f"{_figure(tflops)} TFLOP/s" if tflops >= 1 else f"{_figure(tflops * 1000)} GFLOP/s"
    return f"{rate} ({_percent(fraction_of_peak)} of the bf16 peak)"


def _percent(fraction: float) -> str:
    return f"{_figure(fraction * 100)}%"


def _figure(value: float) -> str:
    """``value`` whole from 10 up, else to two significant digits; never in exponent notation."""
    if value == 0 or abs(value) >= 10:
        return f"{value:.0f}"
    return f"{value:.{1 - math.floor(math.log10(abs(value)))}f}"


def problem_json(text: str) -> Any:
    """The problem a command line gives as JSON; ``InvalidProblem`` for text that is not JSON, repeats a
    key, or holds an integer too long for Python to read."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise InvalidProblem(
                f"the problem gives {', '.join(map(repr, repeated))} more than once; give each field once"
            )
        return dict(pairs)

    try:
        return json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise InvalidProblem(f"the problem is not valid JSON ({exc})") from exc
    except ValueError as exc:  # an integer past Python's limit on digits
        raise InvalidProblem(f"the problem holds a number too long to read ({exc})") from exc


def query(args: argparse.Namespace) -> int:
    from . import query  # the run-time path: no search or plotting imports

    answer = query(args.family, problem_json(args.problem), db=args.db, device=args.device)
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


def coverage(args: argparse.Namespace) -> int:
    from .runtime.coverage import coverage
    from .runtime.lookup import default_db

    db = args.db or default_db()
    rows = coverage(db, args.family)
    print(f"{db}: {len(rows)} tuned problems" + (f" of {args.family}" if args.family else ""))
    for c in rows:
        versus = f"{c.library} {c.library_ms:.4g} ms ({c.ratio:.2f}x)" if c.ratio is not None else "no library time"
        origin = ("raced" if c.raced else "swept") + (", replayed" if c.replayed else "")
        stale = "" if c.current else "  [stale: the family's sources changed; never served as exact]"
        problem = json.dumps(c.problem, sort_keys=True, separators=(",", ":"))
        print(f"  {c.family} on {c.device}: {problem}  {c.median_ms:.4g} ms ({origin}), {versus}{stale}")
    if args.prune_stale:
        from .families import get as get_family
        from .store.winners import WinnersDB

        with WinnersDB(db) as winners:
            for family in sorted({c.family for c in rows if not c.current}):
                pruned = winners.prune_stale(family, get_family(family).source_hash())
                print(f"pruned {pruned} stale winners of {family}")
    return 0


def report(args: argparse.Namespace) -> int:
    from .api import report

    files = report(Path(args.sweep), results=args.results, out=args.out, replay=args.replay, db=args.db)
    print(f"wrote {files.html} and {files.markdown}")
    return 0


def benchmark(args: argparse.Namespace) -> int:
    from .benchmark import write_benchmark

    doc = write_benchmark([Path(s) for s in args.sweep], args.results, args.out, args.command)
    for case in doc["cases"]:
        ratio = f"{case['ratio']:.2f}x {case['baseline']}" if case["ratio"] else "no baseline"
        rate = (
            _flop_rate(case["tunebox_tflops"], case["fraction_of_tensor_peak"])
            if "tunebox_tflops" in case
            else f"{_percent(case['fraction_of_limit'])} of the copy limit"
        )
        print(f"{case['name']}: {case['tunebox_ms']:.4f} ms, {rate}, {ratio}")
    print(f"wrote {args.out}")
    return 0


def ceilings(args: argparse.Namespace) -> int:
    from .ceilings import measure, write_ceilings

    sizes = {"copy_bytes": args.copy_bytes, "matmul_size": args.matmul_size}
    ceilings = measure(**{k: v for k, v in sizes.items() if v is not None})
    write_ceilings(ceilings, args.out, args.command)
    for c in (ceilings.copy, ceilings.matmul):
        print(
            f"{c.name}: {c.timing.median_ms:.4f} ms, {c.rate:.0f} {c.unit} "
            f"({c.rate / c.assumed:.0%} of the assumed {c.assumed:.0f}), verified {c.verified}"
        )
    print(f"wrote {args.out}")
    return 0


def families(args: argparse.Namespace) -> int:
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


def space(args: argparse.Namespace) -> int:
    from .space_report import REPORT_DRAWS, space_report
    from .sweep_spec import load_sweep

    spec = load_sweep(Path(args.sweep))
    print(
        f"{spec.name} ({spec.family.name}): templates {', '.join(spec.space.names())}; the search proposes "
        "valid configurations only"
    )
    for problem in space_report(spec, REPORT_DRAWS):  # each problem printed as it is counted
        about = "about " if problem.estimated else ""
        print(
            f"  {problem.name}: {about}{problem.valid} valid of {problem.size} ({problem.valid / problem.size:.1%})"
            if problem.size
            else f"  {problem.name}: empty space"
        )
        for t in problem.templates:
            sampled = f" (estimated from {REPORT_DRAWS} drawn)" if t.estimated else ""
            print(f"    {t.template:<10} {t.valid:>7} valid of {t.size:>7} ({t.fraction:.1%}){sampled}", flush=True)
    return 0


def strategies(args: argparse.Namespace) -> int:
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
