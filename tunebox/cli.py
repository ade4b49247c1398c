"""The ``tunebox`` command: tune, query, report, benchmark, ceilings, families, space. The only place that
prints."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import TuneboxError
from .limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from .records import EvalRecord, Status


class Progress:
    """Live progress on stderr: evaluated count, status and the best median so far per problem."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.count: dict[str, int] = {}
        self.best: dict[str, float] = {}

    def __call__(self, name: str, record: EvalRecord) -> None:
        self.count[name] = self.count.get(name, 0) + 1
        if record.status is Status.OK and record.timing:
            self.best[name] = min(self.best.get(name, float("inf")), record.timing.median_ms)
        if self.quiet:
            return
        best = self.best.get(name)
        this = f"{record.timing.median_ms:.4f} ms" if record.timing else record.status.value
        line = (f"[{name}] #{self.count[name]:<4} {this:<16} best "
                f"{f'{best:.4f} ms' if best else '-':<12}")
        end = "\r" if sys.stderr.isatty() else "\n"
        print(line, end=end, file=sys.stderr, flush=True)


def _tune(args: argparse.Namespace) -> int:
    from .api import tune

    progress = Progress(args.quiet)
    result = tune(Path(args.sweep), backend=args.backend, recording=args.recording,
                  results=args.results, db=args.db, trials=args.trials, seconds=args.seconds,
                  strategy=args.strategy, listeners=(progress,))
    print(file=sys.stderr)
    origin = "REPLAYED recorded measurements (no GPU here)" if result.replayed else "measured on the GPU"
    print(f"sweep {result.name}: {result.evaluated} variants evaluated in {result.seconds:.1f} s, "
          f"{origin}")
    for p in result.problems:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(p.counts.items()))
        if p.winner is None or p.winner.timing is None:
            print(f"  {p.name}: no valid variant ({counts})")
            continue
        ms = p.winner.timing.median_ms
        gbps = p.winner.bandwidth_gbps or 0.0
        rate = (f"{p.winner.tflops:.0f} TFLOP/s ({p.winner.tflops / BF16_TENSOR_TFLOPS:.0%} of the bf16 peak)"
                if p.winner.tflops else f"{gbps:.0f} GB/s ({gbps / COPY_LIMIT_GBPS:.0%} of copy limit)")
        extra = ""
        if p.default and p.default.timing:
            extra += f", {p.default.timing.median_ms / ms:.2f}x the default variant"
        if p.baseline and p.baseline.timing and p.baseline.status is Status.OK:
            extra += f", {p.baseline.timing.median_ms / ms:.2f}x {p.baseline.baseline}"
        stored = "stored" if p.stored else "kept the better stored winner"
        config = " ".join(f"{k}={v}" for k, v in p.winner.config.items())
        print(f"  {p.name}: {ms:.4f} ms, {rate}{extra}; {stored}\n    {config}\n    statuses: {counts}")
    print(f"  evaluation log: {result.log_path}\n  winners: {result.db_path}")
    if result.breakdown:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in result.breakdown.items() if v > 0)
        print(f"  time by stage: {parts}")
    return 0


def _query(args: argparse.Namespace) -> int:
    from .api import query

    answer = query(args.family, json.loads(args.problem), db=args.db, device=args.device)
    print(json.dumps({"source": answer.source, "config": answer.config,
                      "median_ms": answer.median_ms, "replayed": answer.replayed,
                      "matched_problem": answer.matched_problem_key,
                      "explanation": answer.explanation}, indent=2))
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
        rate = (f"{case['tunebox_tflops']:.0f} TFLOP/s ({case['fraction_of_tensor_peak']:.0%} of the bf16 peak)"
                if "tunebox_tflops" in case else f"{case['fraction_of_limit']:.0%} of the copy limit")
        print(f"{case['name']}: {case['tunebox_ms']:.4f} ms, {rate}, {ratio}")
    print(f"wrote {args.out}")
    return 0


def _ceilings(args: argparse.Namespace) -> int:
    from .ceilings import measure, write_ceilings

    sizes = {"copy_bytes": args.copy_bytes, "matmul_size": args.matmul_size}
    ceilings = measure(**{k: v for k, v in sizes.items() if v is not None})
    write_ceilings(ceilings, args.out, args.command)
    for c in (ceilings.copy, ceilings.matmul):
        print(f"{c.name}: {c.timing.median_ms:.4f} ms, {c.rate:.0f} {c.unit} "
              f"({c.rate / c.assumed:.0%} of the assumed {c.assumed:.0f}), verified {c.verified}")
    print(f"wrote {args.out}")
    return 0


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
    print(f"{spec.name} ({spec.family.name}): templates {', '.join(spec.space.names())}; the search proposes "
          "valid configurations only")
    for problem in space_report(spec):
        print(f"  {problem.name}: {problem.valid} valid of {problem.size} "
              f"({problem.valid / problem.size:.1%})" if problem.size else f"  {problem.name}: empty space")
        for t in problem.templates:
            print(f"    {t.template:<10} {t.valid:>7} valid of {t.size:>7} ({t.fraction:.1%})")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="tunebox", description=__doc__)
    top.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = top.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tune", help="run or resume a sweep")
    t.add_argument("sweep", help="sweep file, e.g. spaces/tile_copy.toml")
    t.add_argument("--backend", default="auto", choices=("auto", "gpu", "replay"))
    t.add_argument("--recording", type=Path, help="recorded sweep to replay")
    t.add_argument("--results", type=Path, default=Path("results"))
    t.add_argument("--db", type=Path, help="winners database (default results/winners.sqlite)")
    t.add_argument("--trials", type=int, help="evaluated variants per problem")
    t.add_argument("--seconds", type=float, help="wall-clock budget of the sweep")
    t.add_argument("--strategy", choices=("tpe", "random", "exhaustive"))
    t.add_argument("--quiet", action="store_true", help="no progress lines")
    t.set_defaults(run=_tune)

    q = sub.add_parser("query", help="the tuned configuration for a problem")
    q.add_argument("family")
    q.add_argument("problem", help='JSON, e.g. \'{"dtype": "float32", "src": [4096, 4096], "dst": [4096, 4096]}\'')
    q.add_argument("--db", type=Path, default=Path("results/winners.sqlite"))
    q.add_argument("--device", help="device name (default: the only device in the database)")
    q.set_defaults(run=_query)

    r = sub.add_parser("report", help="HTML + Markdown report of a sweep")
    r.add_argument("sweep", help="sweep file whose results to report")
    r.add_argument("--results", type=Path, default=Path("results"))
    r.add_argument("--out", type=Path, default=Path("reports"))
    r.add_argument("--replay", action="store_true", help="report the replayed sweep even if a live one exists")
    r.set_defaults(run=_report)

    b = sub.add_parser("benchmark", help="benchmark file of live GPU sweeps (winners vs torch)")
    b.add_argument("sweep", nargs="+", help="sweep files whose live results to include")
    b.add_argument("--results", type=Path, default=Path("results"))
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--command", required=True, help="the exact command that produced the sweep, recorded")
    b.set_defaults(run=_benchmark)

    c = sub.add_parser("ceilings", help="measure this GPU's copy bandwidth and bf16 matrix-product rate")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--command", required=True, help="the exact command that produced the file, recorded")
    c.add_argument("--copy-bytes", type=int, help="bytes copied per launch (default 1 GiB)")
    c.add_argument("--matmul-size", type=int, help="square matrix size (default 8192)")
    c.set_defaults(run=_ceilings)

    f = sub.add_parser("families", help="list kernel families: problem fields, templates and their tunables")
    f.set_defaults(run=_families)

    s = sub.add_parser("space", help="a sweep file's space: size and valid fraction per problem and template")
    s.add_argument("sweep", help="sweep file, e.g. spaces/tile_copy.toml")
    s.set_defaults(run=_space)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
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
        print("\ntunebox: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
