"""The strategy benchmark on replay (``tunebox strategies``): the protocol's arithmetic, tunebox's
strategies driven on a tiny synthetic recording, the command, and the Kernel Tuner cache conversion."""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tunebox.cli import main
from tunebox.errors import SpaceError
from tunebox.families import get as get_family
from tunebox.params import Config, Param, Space, TemplateSpaces
from tunebox.records import DeviceInfo, EvalRecord, KernelMetrics, Status, Timing, canonical_json
from tunebox.search import kernel_tuner_cache as ktc
from tunebox.search import methodology
from tunebox.search import replay_problems as rp
from tunebox.search import strategy_benchmark as sb
from tunebox.search import strategy_tables as tables
from tunebox.store.evallog import EvalLog
from tunebox.sweep_spec import load_sweep

REPO = Path(__file__).resolve().parents[3]

SWEEP = """
name = "tiny"
family = "tile_copy"
[search]
strategy = "tpe"
trials = 10
[space]
template = ["vector"]
BM = [1, 4, 8]
BN = [64, 128]
threads = [64, 128]
vec_bytes = [4, 16]
bounds = ["checked"]
staging = ["none"]
tiles_per_block = [1]
[[problems]]
name = "copy"
dtype = "float32"
src = [1000, 1000]
dst = [1000, 1000]
"""


def fake_ms(config: dict) -> float:
    return 1.0 + abs(config["BM"] - 8) * 0.1 + (config["BN"] == 64) * 0.05 + (16 - config["vec_bytes"]) * 0.02


def write_tiny(tmp_path: Path, failed: dict | None = None, text: str = SWEEP) -> Path:
    """A one-problem tile_copy sweep (``text``) and its recording (every valid configuration, ``failed``
    one failing), laid out as a checkout: spaces/tiny.toml and results/recordings/tiny.jsonl."""
    sweep = tmp_path / "spaces" / "tiny.toml"
    sweep.parent.mkdir(parents=True)
    sweep.write_text(text)
    spec = load_sweep(sweep)
    recording = tmp_path / "results" / "recordings" / "tiny.jsonl"
    recording.parent.mkdir(parents=True)
    log = EvalLog(recording)
    device = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")
    for named in spec.problems:
        for config in spec.space:
            if spec.family.violations(named.problem, config):
                continue
            values = config.as_dict()
            ok = values != failed
            ms = fake_ms(values)
            log.append(
                EvalRecord(
                    "tile_copy",
                    named.problem.to_dict(),
                    values,
                    Status.OK if ok else Status.RUNTIME_ERROR,
                    timing=Timing((ms * 1.01, ms, ms * 0.99)) if ok else None,
                    metrics=KernelMetrics(32, 0, 0),
                    device=device,
                )
            )
    return sweep


# --- the protocol's arithmetic -----------------------------------------------------------------


def test_target_and_random_expectation():
    times = [5.0, 1.0, 3.0, 1.08, 10.0, 4.0, 2.0, math.inf]  # inf: failed, counted in n, not in the median
    t = methodology.target_of(times)
    assert t.optimum == 1.0 and t.median == 3.0  # median of the 7 finite times
    assert t.target == pytest.approx(1.0 + 0.05 * (3.0 - 1.0))
    assert (t.n, t.m) == (8, 2)  # 1.0 and 1.08 reach 1.1
    assert t.random_expectation == pytest.approx(9 / 3)
    assert methodology.budget_of(t, 2.0) == 6 and methodology.budget_of(t, 10.0) == 8  # capped at n
    with pytest.raises(ValueError):
        methodology.random_expectation(5, 0)


@pytest.mark.parametrize(("n", "m"), [(5, 1), (6, 2), (7, 3)])
def test_random_expectation_is_the_mean_first_hit_over_every_order(n, m):
    """(n + 1) / (m + 1) is the mean position of the first good configuration over all orders."""
    positions = [
        next(i for i, good in enumerate(order, 1) if good)
        for order in itertools.permutations([True] * m + [False] * (n - m))
    ]
    assert sum(positions) / len(positions) == pytest.approx(methodology.random_expectation(n, m))


def test_evaluations_to_target_best_so_far_and_geomean():
    trace = [5.0, 3.0, 1.05, 2.0, 1.0]
    assert methodology.evaluations_to_target(trace, 1.1) == 3
    assert methodology.evaluations_to_target(trace, 1.0) == 5
    assert methodology.evaluations_to_target(trace, 0.5) is None
    assert methodology.best_so_far(trace) == [5.0, 3.0, 1.05, 1.05, 1.0]
    assert methodology.geomean([0.5, 2.0]) == pytest.approx(1.0)


def test_the_seeds_interval_of_the_geomean_ratio():
    """The bootstrap interval holds the point estimate, is zero-wide when every seed agrees, narrows with
    more seeds of the same spread, and is the same every run."""
    rng = np.random.default_rng(3)
    problems = [(rng.integers(1, 30, 20).tolist(), 10.0), (rng.integers(1, 8, 20).tolist(), 4.0)]
    point = methodology.geomean(sum(e) / len(e) / x for e, x in problems)
    low, high = methodology.geomean_interval(problems)
    assert low < point < high and (low, high) == methodology.geomean_interval(problems)
    assert methodology.geomean_interval([([5, 5, 5], 10.0)]) == pytest.approx((0.5, 0.5))
    wide = methodology.geomean_interval([([1, 9] * 5, 5.0)])
    narrow = methodology.geomean_interval([([1, 9] * 50, 5.0)])
    assert narrow[1] - narrow[0] < (wide[1] - wide[0]) / 2
    assert all(math.isnan(x) for x in methodology.geomean_interval([]))


def test_summary_counts_a_missed_target_as_the_budget():
    problem = rp.ReplayProblem(
        "s", "p", "f", {}, TemplateSpaces(()), tuple(Config((("x", i),)) for i in range(4)), (1.0, 2.0, 3.0, 4.0), 4
    )
    result = methodology.StrategyResult("x", evaluations=[1, None], curves=[[1.0], [4.0, 3.0]])
    s = tables.summarise(problem, result, budget=4)
    assert s["evaluations_to_target"] == [1, 4] and s["censored"] == 1 and s["mean"] == 2.5
    assert s["ratio_to_random"] == pytest.approx(2.5 / (5 / 2))  # n 4, m 1
    assert s["within_random_expectation"] == 0.5
    assert s["curve"]["best_mean_ms"] == [2.5, 2.0] and s["curve"]["reached_fraction"] == [0.5, 0.5]


# --- tunebox's strategies on a tiny recording --------------------------------------------------


def test_load_problems_and_tunebox_strategies_on_replay(tmp_path):
    failed = {"template": "vector", "BM": 1, "BN": 64, "threads": 64, "vec_bytes": 4}
    failed |= {"bounds": "checked", "staging": "none", "tiles_per_block": 1}
    (problem,) = rp.load_problems(write_tiny(tmp_path, failed))
    assert problem.complete and problem.valid == len(problem.configs) == 18  # 6 break a validity rule
    times = problem.lookup()
    assert times[canonical_json(failed)] == math.inf
    assert times[canonical_json(failed | {"BM": 8, "BN": 128, "vec_bytes": 16})] == pytest.approx(1.0)
    target = methodology.target_of(problem.times)
    assert target.m == 2  # BM 8, BN 128, vec 16, either thread count

    doc = sb.run_benchmark([problem], ["tunebox:tpe", "tunebox:random", "tunebox:exhaustive"], seeds=4)
    (p,) = doc["problems"]
    assert p["n"] == 18 and p["m"] == 2 and p["budget"] == 18 and p["random_expectation"] == pytest.approx(19 / 3)
    by_name = {s["strategy"]: s for s in p["strategies"]}
    for s in by_name.values():
        assert s["seeds"] == 4 and s["censored"] == 0  # every strategy draws without replacement: n reaches it
        assert all(1 <= e <= 18 for e in s["evaluations_to_target"])
        assert len(s["curve"]["best_mean_ms"]) == 18 and s["curve"]["reached_fraction"][-1] == 1.0
    assert len(set(by_name["tunebox:exhaustive"]["evaluations_to_target"])) == 1  # no randomness
    assert len(set(by_name["tunebox:random"]["evaluations_to_target"])) > 1
    names = [row["strategy"] for row in doc["aggregate"]]
    assert sorted(names) == sorted(by_name) and doc["aggregate"][0]["problems_complete"] == 1


def test_a_drive_stopped_at_the_target_is_the_full_drives_prefix(tmp_path):
    """``drive(target=...)``: the same asks and answers as the full drive, up to the first time at or
    below the target (what surrogate_truth.py counts), and that time is its last."""
    from tunebox.search.benchmark_strategies import drive
    from tunebox.search.surrogate import SurrogateStrategy

    (problem,) = rp.load_problems(write_tiny(tmp_path))
    target = methodology.target_of(problem.times).target
    for seed in range(3):
        full = drive(problem, SurrogateStrategy(problem.space, problem.configs, seed), 18)
        stopped = drive(problem, SurrogateStrategy(problem.space, problem.configs, seed), 18, target=target)
        hit = methodology.evaluations_to_target(full, target)
        assert hit is not None and stopped == full[:hit] and stopped[-1] <= target


def test_tunebox_strategies_start_from_the_family_default_as_a_sweep_does(tmp_path):
    """sweep_seeds: warm start's seeds, then the family default where the recording holds it; the
    default row's first evaluation is the default, the no_default row's is not bound to it."""
    from dataclasses import replace

    from tunebox.search.benchmark_strategies import TUNEBOX_STRATEGIES, UNSEEDED_STRATEGY, sweep_seeds

    with_default = SWEEP.replace("[64, 128]", "[64, 256]")  # BN and threads: the default's 256 (and BM 8, vec 16)
    (problem,) = rp.load_problems(write_tiny(tmp_path, text=with_default))
    family = get_family("tile_copy")
    default = family.default_config(family.parse_problem(problem.problem))
    assert default in problem.configs and sweep_seeds(problem) == (default,)
    warm = replace(problem, warm=(problem.configs[0],))
    assert sweep_seeds(warm, warm=True) == (problem.configs[0], default)
    assert sweep_seeds(replace(problem, configs=tuple(c for c in problem.configs if c != default))) == ()
    first = problem.lookup()[canonical_json(default.as_dict())]
    for name in ("tunebox:surrogate", "tunebox:tpe"):
        assert all(TUNEBOX_STRATEGIES[name](problem, seed, 3)[0] == first for seed in range(4)), name
    unseeded = {TUNEBOX_STRATEGIES[UNSEEDED_STRATEGY](problem, seed, 3)[0] for seed in range(8)}
    assert unseeded != {first}


def test_a_recording_missing_valid_configurations_is_partial(tmp_path):
    sweep = write_tiny(tmp_path)
    recording = tmp_path / "results" / "recordings" / "tiny.jsonl"
    lines = recording.read_text().splitlines(keepends=True)
    recording.write_text("".join(lines[:-3]))  # the header and all but the last three records
    (problem,) = rp.load_problems(sweep)
    assert not problem.complete and (problem.valid, len(problem.configs)) == (18, 15)
    doc = sb.run_benchmark([problem], ["tunebox:random"], seeds=2)
    assert doc["problems"][0]["complete"] is False and doc["problems"][0]["n"] == 15
    (row,) = doc["aggregate"]
    assert row["geomean_ratio_complete"] is None and row["problems_all"] == 1


def test_strategies_command_writes_the_benchmark_and_plot(tmp_path, capsys):
    sweep = write_tiny(tmp_path)
    out, png = tmp_path / "search.json", tmp_path / "search.png"
    argv = ["strategies", "--sweeps", str(sweep), "--seeds", "3", "--out", str(out), "--plot", str(png)]
    argv += ["--strategies", "tunebox:tpe", "tunebox:random", "--kernel-tuner", "no", "--jobs", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "tiny/copy: n 18, m 2" in printed and "| tunebox:tpe |" in printed and f"wrote {out}" in printed
    doc = json.loads(out.read_text())
    assert doc["command"].startswith("tunebox strategies --seeds 3") and doc["date"] and doc["versions"]["optuna"]
    assert doc["protocol"]["seeds"] == 3 and doc["problems"][0]["problem"] == "copy"
    assert {row["strategy"] for row in doc["aggregate"]} == {"tunebox:tpe", "tunebox:random"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert main(["strategies", "--sweeps", str(sweep), "--out", str(out), "--strategies", "nope"]) == 2
    assert "unknown strategies ['nope']" in capsys.readouterr().err
    missing = tmp_path / "elsewhere"
    assert main(["strategies", "--sweeps", str(sweep), "--out", str(out), "--recordings", str(missing)]) == 2
    assert "no recording at" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--plot", "search.txt"], "the plot is a PNG; give a path ending in .png"),  # was a ValueError after the run
        (["--out", "/proc/nope/s.json"], "/proc/nope: no such file or directory"),  # found after the benchmark
        (["--strategies", "kernel_tuner:pso", "--kernel-tuner", "no"], "--kernel-tuner no, but Kernel Tuner"),
    ],
)
def test_what_the_benchmark_cannot_finish_is_refused_before_it_runs(tmp_path, capsys, extra, fragment):
    sweep = write_tiny(tmp_path)
    argv = ["strategies", "--sweeps", str(sweep), "--out", str(tmp_path / "s.json"), "--seeds", "2", *extra]
    started = time.perf_counter()
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err and time.perf_counter() - started < 5


def test_a_sweep_named_twice_is_benchmarked_once(tmp_path):
    sweep = write_tiny(tmp_path)
    doc = sb.benchmark([sweep, sweep], tmp_path / "s.json", None, "x", names=["tunebox:random"], seeds=2)
    assert len(doc["problems"]) == 1


def test_a_recording_of_another_family_is_named_so(tmp_path):
    sweep = write_tiny(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(REPO / "results" / "recordings" / "scatter.jsonl.gz", other / f"{load_sweep(sweep).name}.jsonl.gz")
    with pytest.raises(SpaceError, match="is a recording of scatter, not of tile_copy"):
        rp.load_problems(sweep, other / f"{load_sweep(sweep).name}.jsonl.gz")


# --- Kernel Tuner's cache format -----------------------------------------------------------------


def two_templates() -> rp.ReplayProblem:
    space = TemplateSpaces(
        (
            ("vector", Space((Param("BM", (1, 2, 4)), Param("vec", (4, 16))))),
            ("tma", Space((Param("BM", (2, 8)), Param("swizzle", ("none", "128B"))))),
        )
    )
    configs = tuple(space)
    times = tuple(1.0 + 0.1 * i for i in range(len(configs) - 1)) + (math.inf,)  # the last one failed
    return rp.ReplayProblem("sw", "pb", "fam", {"n": 1}, space, configs, times, len(configs), "NVIDIA H200")


def test_kernel_tuner_cache_round_trip(tmp_path):
    problem = two_templates()
    path = ktc.write_cache(problem, tmp_path / "cache.json")
    cache = json.loads(path.read_text())
    assert cache["tune_params_keys"] == ["template", "BM", "vec", "swizzle"]
    assert cache["tune_params"]["BM"] == [1, 2, 4, 8]  # shared name: values united in declared order
    assert len(cache["cache"]) == len(problem.configs) == 10
    key = "tma,8,4,none"  # a tma configuration: vec takes its first value
    assert cache["cache"][key] == cache["cache"][key] | {"template": "tma", "BM": 8, "vec": 4, "swizzle": "none"}
    assert cache["cache"][key]["time"] == pytest.approx(1.8)
    failed = [r for r in cache["cache"].values() if r["time"] == "RuntimeFailedConfig"]
    assert len(failed) == 1
    assert ktc.from_cache(cache) == problem.lookup()  # every time back, the failure as inf


def test_kernel_tuner_simulation_on_a_converted_cache(tmp_path):
    pytest.importorskip("kernel_tuner")
    problem = two_templates()
    trace = ktc.simulate(problem, "random_sample", seed=1, budget=6, folder=tmp_path)
    assert len(trace) == 6 and len(set(trace)) == 6 and set(trace) <= set(problem.times)
    assert ktc.simulate(problem, "random_sample", seed=1, budget=6, folder=tmp_path) == trace  # seeded


def test_tunebox_imports_no_kernel_tuner():
    code = (
        "import sys, tunebox, tunebox.cli, tunebox.search.strategy_benchmark, tunebox.search.kernel_tuner_cache\n"
        "assert 'kernel_tuner' not in sys.modules, 'kernel_tuner imported'\n"
        "assert 'optuna' not in sys.modules, 'optuna imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_kernel_tuner_strategies_without_kernel_tuner_are_refused_before_the_run(tmp_path, capsys, monkeypatch):
    """They ran, each 'failed: ModuleNotFoundError', and the command wrote them with exit 0."""
    monkeypatch.setattr(sb, "_kernel_tuner_available", lambda: False)
    sweep = write_tiny(tmp_path)
    argv = ["strategies", "--sweeps", str(sweep), "--out", str(tmp_path / "s.json"), "--strategies", "kernel_tuner:pso"]
    assert main(argv) == 2
    assert "Kernel Tuner is not installed: pip install '.[bench]'" in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()
