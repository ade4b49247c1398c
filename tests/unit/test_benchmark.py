"""Benchmark documents from live sweep logs: ratios, fractions of the copy limit, refusals."""

from __future__ import annotations

import pytest
from sweep_fixtures import DEVICE

from tunebox.api import tune
from tunebox.benchmark import benchmark
from tunebox.errors import SpaceError
from tunebox.limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from tunebox.records import EvalRecord, Status, Timing
from tunebox.store.evallog import EvalLog
from tunebox.sweep_spec import load_sweep


def live_log(sweep_file, results, device=DEVICE, flops=0, baselines=((2.0, "torch: x"),)):
    spec = load_sweep(sweep_file)
    (results / "sweeps" / spec.name).mkdir(parents=True)
    log = EvalLog(results / "sweeps" / spec.name / "evals.jsonl")
    for named in spec.problems:
        moved = spec.family.work(named.problem).bytes_moved
        config = spec.family.default_config(named.problem).as_dict()
        rows = ((0.5, "", config), (0.4, "", {**config, "threads": 128}), *((ms, name, {}) for ms, name in baselines))
        for ms, baseline, cfg in rows:
            log.append(
                EvalRecord(
                    "tile_copy",
                    named.problem.to_dict(),
                    cfg,
                    Status.OK,
                    timing=Timing((ms,) * 20),
                    bytes_moved=moved,
                    flops=flops,
                    device=device,
                    baseline=baseline,
                    phase="final",
                )
            )
    return spec


def test_cases_take_the_best_finalist_and_the_baseline(sweep_file, tmp_path):
    spec = live_log(sweep_file, tmp_path)
    doc = benchmark([sweep_file], tmp_path, "the command")
    assert doc["device"] == "NVIDIA H200" and doc["command"] == "the command" and "numpy" in doc["versions"]
    assert [c["name"] for c in doc["cases"]] == [p.name for p in spec.problems]
    for case, named in zip(doc["cases"], spec.problems, strict=True):
        assert case["tunebox_ms"] == 0.4 and case["baseline_ms"] == 2.0 and case["ratio"] == pytest.approx(5.0)
        gbps = spec.family.work(named.problem).bytes_moved / 0.4e6
        assert case["fraction_of_limit"] == pytest.approx(gbps / COPY_LIMIT_GBPS)
        assert case["config"]["threads"] == 128
        assert "tunebox_tflops" not in case  # data movement: no arithmetic rate


def test_every_baseline_is_listed_and_the_fastest_one_sets_the_ratio(sweep_file, tmp_path):
    live_log(sweep_file, tmp_path, baselines=((0.8, "torch: cat"), (2.4, "torch: x[mask]")))
    case = benchmark([sweep_file], tmp_path, "x")["cases"][0]
    assert (case["baseline"], case["ratio"]) == ("torch: cat", pytest.approx(2.0))
    assert [(b["name"], b["ratio"]) for b in case["baselines"]] == [
        ("torch: cat", pytest.approx(2.0)),
        ("torch: x[mask]", pytest.approx(6.0)),
    ]


def test_a_baseline_that_failed_verification_is_listed_as_rejected(sweep_file, tmp_path):
    spec = live_log(sweep_file, tmp_path)
    named = spec.problems[0]
    message = "torch: y: output dst differs from the reference"
    EvalLog(tmp_path / "sweeps" / spec.name / "evals.jsonl").append(
        EvalRecord(
            "tile_copy",
            named.problem.to_dict(),
            {},
            Status.WRONG_RESULT,
            message,
            device=DEVICE,
            baseline="torch: y",
            phase="final",
        )
    )
    case = benchmark([sweep_file], tmp_path, "x")["cases"][0]
    assert [b["name"] for b in case["baselines"]] == ["torch: x"] and case["ratio"] == pytest.approx(5.0)
    assert case["rejected_baselines"] == [{"name": "torch: y", "status": "wrong_result", "message": message}]


def test_arithmetic_cases_report_tflops_and_the_tensor_peak_share(sweep_file, tmp_path):
    live_log(sweep_file, tmp_path, flops=2 * 4096**3)
    case = benchmark([sweep_file], tmp_path, "x")["cases"][0]
    assert case["tunebox_tflops"] == pytest.approx(2 * 4096**3 / 0.4e9)
    assert case["fraction_of_tensor_peak"] == pytest.approx(case["tunebox_tflops"] / BF16_TENSOR_TFLOPS)
    assert case["baseline_tflops"] == pytest.approx(2 * 4096**3 / 2.0e9)


def test_replayed_or_missing_logs_are_refused(sweep_file, recording, tmp_path):
    with pytest.raises(SpaceError, match="live GPU sweep"):
        benchmark([sweep_file], tmp_path, "x")
    tune(sweep_file, backend="replay", recording=recording, results=tmp_path, trials=2)
    (tmp_path / "sweeps" / "small-replay").rename(tmp_path / "sweeps" / "small")
    with pytest.raises(SpaceError, match="live GPU sweep"):
        benchmark([sweep_file], tmp_path, "x")
