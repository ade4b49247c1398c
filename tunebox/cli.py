"""The ``tunebox`` command: its parser and entry point (``--version``, quiet Ctrl-C and closed pipes,
errors as one line); ``commands.py`` does each subcommand's work. These two are the only places that
print."""

from __future__ import annotations

import argparse
import difflib
import faulthandler
import functools
import logging
import math
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import commands
from .api import DEFAULT_HEARTBEAT_S
from .cli_errors import file_error, raised_by_json
from .errors import TuneboxError
from .runtime.lookup import ENV_DB, shipped_db
from .sweep_spec import STRATEGIES

log = logging.getLogger(__name__)

DESCRIPTION = """Autotune GPU kernels: search each kernel family's configurations for the problems a sweep file
lists, keep the fastest verified variant of each in a winners database, and answer which configuration to
run for a problem. Start with `tunebox families` (the kernels and what they tune), then
`tunebox tune spaces/tile_copy.toml` (run or resume a sweep; --backend replay on a machine without a GPU),
`tunebox query` (the tuned configuration for a problem) and `tunebox report` (a sweep's HTML report)."""


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


def _at_least(kind: Callable[[str], float], low: float) -> Callable[[str], float]:
    """An argparse ``type``: ``kind``'s value of the text, refused below ``low``."""

    def parse(text: str) -> float:
        value = kind(text)
        if not (math.isfinite(value) and value >= low):  # NaN and infinity too
            raise argparse.ArgumentTypeError(f"must be a finite number of {low:g} or more, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its "invalid ... value" message
    return parse


def _common_options() -> argparse.ArgumentParser:
    """The options every subcommand takes too, before or after its name (``tunebox -v tune ...`` or
    ``tunebox tune ... -v``). Unset, they are absent from the namespace (``SUPPRESS``), so that a
    subcommand's parser never overwrites the value the top one parsed."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="debug logging (a file error's traceback too)",
    )
    return common


def parser() -> argparse.ArgumentParser:
    common = _common_options()
    top = argparse.ArgumentParser(prog="tunebox", description=DESCRIPTION, parents=[common])
    top.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = top.add_subparsers(dest="command", required=True)
    add = functools.partial(sub.add_parser, parents=[common])

    t = add("tune", help="run or resume a sweep")
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
        help="recorded sweep to replay (default results/recordings/<sweep name>.jsonl.gz beside the sweep file's "
        "folder)",
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
    t.add_argument(
        "--trials", type=_at_least(int, 1), help="evaluated variants per problem (default: the sweep file's)"
    )
    t.add_argument(
        "--seconds", type=_at_least(float, 1), help="wall-clock budget of the sweep, s (default: the sweep file's)"
    )
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
        type=_at_least(int, 1),
        help="with --storage: seconds between a worker's heartbeats; a worker silent for 3x that has its "
        f"running trials queued again (default {DEFAULT_HEARTBEAT_S})",
    )
    t.add_argument(
        "--replay-pace",
        type=_at_least(float, 0),
        help="on replay: each answer waits this many times its recorded verify + time seconds (for scaling "
        "runs on a CPU)",
    )
    t.add_argument(
        "--sanitize",
        action=argparse.BooleanOptionalAction,
        help="run each problem's finalists under compute-sanitizer (memcheck, racecheck, synccheck) before a "
        "winner is stored; a finalist it reports on is never stored (default: off; gpu backend only)",
    )
    t.set_defaults(run=commands.tune)

    q = add("query", help="the tuned configuration for a problem")
    q.add_argument("family", help="kernel family (see `tunebox families`)")
    q.add_argument("problem", help='JSON, e.g. \'{"dtype": "float32", "src": [4096, 4096], "dst": [4096, 4096]}\'')
    q.add_argument(
        "--db",
        type=Path,
        help=f"winners database; it must exist (default: the {ENV_DB} environment variable if set, "
        f"else {shipped_db()}, the same from any directory)",
    )
    q.add_argument("--device", help="device name (default: the only device in the database)")
    q.set_defaults(run=commands.query)

    cv = add("coverage", help="the problems a winners database covers, with the library's time beside")
    cv.add_argument("family", nargs="?", help="only this family (default: every family)")
    cv.add_argument(
        "--db", type=Path, help=f"winners database (default: as for query; a raced one: {ENV_DB} or a path)"
    )
    cv.add_argument(
        "--prune-stale",
        action="store_true",
        help="then delete the stale winners listed (stored under a family's older sources), e.g. once re-recorded",
    )
    cv.set_defaults(run=commands.coverage)

    r = add("report", help="HTML + Markdown report of a sweep")
    r.add_argument("sweep", help="sweep file whose results to report")
    r.add_argument(
        "--results", type=Path, default=Path("results"), help="results directory the sweep wrote (default ./results)"
    )
    r.add_argument(
        "--out", type=Path, default=Path("reports"), help="directory for the report's files (default ./reports)"
    )
    r.add_argument("--replay", action="store_true", help="report the replayed sweep even if a live one exists")
    r.add_argument(
        "--db",
        type=Path,
        help="winners database whose coverage to show: the one the sweep stored into, if tune was given --db "
        "(default <results>/winners.sqlite, or winners-replay.sqlite for a replayed sweep)",
    )
    r.set_defaults(run=commands.report)

    b = add("benchmark", help="benchmark file of live GPU sweeps (winners vs torch)")
    b.add_argument("sweep", nargs="+", help="sweep files whose live results to include")
    b.add_argument(
        "--results", type=Path, default=Path("results"), help="results directory the sweeps wrote (default ./results)"
    )
    b.add_argument("--out", type=Path, required=True, help="benchmark file (JSON) to write")
    b.add_argument("--command", required=True, help="the exact command that produced the sweep, recorded")
    b.set_defaults(run=commands.benchmark)

    c = add("ceilings", help="measure this GPU's copy bandwidth and bf16 matrix-product rate")
    c.add_argument("--out", type=Path, required=True, help="ceilings file (JSON) to write")
    c.add_argument("--command", required=True, help="the exact command that produced the file, recorded")
    c.add_argument("--copy-bytes", type=int, help="bytes copied per launch (default 1 GiB)")
    c.add_argument("--matmul-size", type=int, help="square matrix size (default 8192)")
    c.set_defaults(run=commands.ceilings)

    f = add("families", help="list kernel families: problem fields, templates and their tunables")
    f.set_defaults(run=commands.families)

    s = add("space", help="a sweep file's space: size and valid fraction per problem and template")
    s.add_argument("sweep", help="sweep file, e.g. spaces/tile_copy.toml")
    s.set_defaults(run=commands.space)

    st = add(
        "strategies",
        help="benchmark search strategies on replayed exhaustive recordings (CPU only): evaluations to a "
        "near-optimal target against random search's expectation",
    )
    st.add_argument(
        "--seeds", type=_at_least(int, 2), default=20, help="seeds per strategy and problem, 2 or more (default 20)"
    )
    st.add_argument(
        "--out",
        type=Path,
        required=True,
        help="benchmark file (JSON) to write (the committed one is results/benchmarks/search.json)",
    )
    st.add_argument(
        "--plot", type=Path, help="best found versus evaluations per problem, a PNG (e.g. reports/search.png)"
    )
    st.add_argument(
        "--sweeps",
        nargs="+",
        type=Path,
        help="sweep files whose recordings to replay (default: spaces/ gather, scatter, gather_elements, "
        "ragged3d, gemm_wgmma, gemm_skinny and truth_windows)",
    )
    st.add_argument(
        "--recordings",
        type=Path,
        help="folder of the recordings, <sweep name>.jsonl.gz (default: results/recordings/ beside each sweep "
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
        type=_at_least(float, 1),
        default=10.0,
        help="each seed evaluates at most this many times random's expected evaluations, 1 or more (default 10)",
    )
    st.add_argument("--jobs", type=_at_least(int, 1), help="worker processes (default: the CPU count)")
    st.add_argument("--quiet", action="store_true", help="no progress lines (one per problem and strategy)")
    st.set_defaults(run=commands.strategies)
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


def _refuse_unknown(top: argparse.ArgumentParser, command: str, unknown: list[str]) -> NoReturn:
    """Exit as argparse does, with the subcommand's usage and the closest option it has to a mistyped one."""
    sub: argparse.ArgumentParser = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices[
        command
    ]
    options = [o for a in sub._actions for o in a.option_strings]
    close = difflib.get_close_matches(unknown[0].split("=")[0], options, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    sub.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def dump_stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` makes the command print every thread's stack to stderr and go on: where a
    sweep that seems stuck is waiting (POSIX only; not where the process's stderr has no file
    descriptor to print to)."""
    if not hasattr(signal, "SIGUSR1") or sys.__stderr__ is None:
        return
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    except (OSError, ValueError):  # io.UnsupportedOperation: a stderr without fileno()
        return


def _main(argv: list[str] | None) -> int:
    dump_stacks_on_sigusr1()
    top = parser()
    args, unknown = top.parse_known_args(argv)
    if unknown:  # argparse's own message would come from the top parser, with its usage
        _refuse_unknown(top, args.command, unknown)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for commands that start workers
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        run: Callable[[argparse.Namespace], int] = args.run  # every subcommand sets one of the handlers above
        return run(args)
    except TuneboxError as exc:
        print(f"tunebox: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.filename is None:  # not a file operation (a closed pipe, a socket): not the user's to fix
            raise
        log.debug("the failed file operation", exc_info=True)
        print(f"tunebox: error: {file_error(exc)}", file=sys.stderr)
        return 2
    except RecursionError as exc:
        if not raised_by_json(exc):  # not the JSON reader's (a sweep file's TOML says so itself): a bug
            raise
        what = "the problem" if args.command == "query" else "a JSON input"
        print(
            f"tunebox: error: {what}: nested too deeply to read (JSON nested deeper than Python's recursion "
            f"limit of {sys.getrecursionlimit()}); give it with fewer levels",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("tunebox: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
