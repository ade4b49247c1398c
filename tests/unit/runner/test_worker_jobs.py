"""The GPU worker's job handling on a stand-in session (no GPU): statuses, fatality, timing, retimes."""

from __future__ import annotations

import ctypes
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
from stand_in_workers import METRICS, StandInSession

from tunebox.families.base import LaunchGeometry
from tunebox.records import Status
from tunebox.runner import worker
from tunebox.runner.protocol import EvaluateJob, Outcome, RetimeJob, Variant
from tunebox.runner.timing import PROBE, SCREEN

VARIANT = Variant(b"cubin", "k", LaunchGeometry((1, 1, 1), (32, 1, 1), 0), ())


def evaluate(session, time=True, cutoff_ms=None):
    return worker.handle(session, EvaluateJob("tile_copy", {}, VARIANT, SCREEN, 0, time=time, cutoff_ms=cutoff_ms))


def test_a_correct_variant_is_verified_then_timed():
    session = StandInSession()
    outcome = evaluate(session)
    assert outcome.status is Status.OK and len(outcome.samples_ms) == 10 and outcome.metrics == METRICS
    assert set(outcome.stage_seconds) == {"prepare", "verify", "time"} and not outcome.fatal
    # the verification launch warmed the variant: the timing adds no warm-up launch
    assert session.benches == [replace(SCREEN, warmup=0)] and session.launches == 2


def test_a_verification_launch_within_the_cutoff_is_timed_in_full_without_a_probe():
    session = StandInSession(first_ms=1.0)
    outcome = evaluate(session, cutoff_ms=1.0)
    assert len(outcome.samples_ms) == 10 and "cut off" not in outcome.message and "probed" not in outcome.message
    assert session.benches == [replace(SCREEN, warmup=0)] and session.launches == 2


def test_a_verification_launch_far_over_the_cutoff_is_the_measurement():
    """Over FIRST_LAUNCH_CUT times the cut-off: that one sample, no further launch."""
    session = StandInSession(first_ms=2.5)
    outcome = evaluate(session, cutoff_ms=1.2)
    assert outcome.status is Status.OK and outcome.samples_ms == (2.5,) and session.launches == 1
    assert "cut off on its verification launch (2.5 ms > 2 x 1.2 ms)" in outcome.message
    assert session.benches == [] and "time" in outcome.stage_seconds


def test_a_variant_slower_than_the_cutoff_keeps_its_probe():
    """Verification launch over the cut-off, within FIRST_LAUNCH_CUT times it: the probe decides. The
    stand-in's samples are 1, 2, 3, ... ms: the probe is 1 ms, and the two launches are the measurement."""
    session = StandInSession(first_ms=1.5)
    outcome = evaluate(session, cutoff_ms=0.9)
    assert outcome.status is Status.OK and outcome.samples_ms == (1.5, 1.0) and session.launches == 2
    assert "cut off on its probe (1 ms > 0.9 ms; verification launch 1.5 ms)" in outcome.message
    assert session.benches == [PROBE] and "time" in outcome.stage_seconds


def test_a_probe_within_the_cutoff_is_timed_in_full():
    session = StandInSession(first_ms=1.5)
    outcome = evaluate(session, cutoff_ms=1.0)
    assert len(outcome.samples_ms) == 10 and "cut off" not in outcome.message
    assert "probed: verification launch 1.5 ms > cut-off 1 ms" in outcome.message
    assert session.benches == [PROBE, replace(SCREEN, warmup=0)]


def test_a_wrong_variant_is_never_timed():
    session = StandInSession(wrong="dst: 1 of 9 elements wrong")
    outcome = evaluate(session)
    assert outcome.status is Status.WRONG_RESULT and outcome.samples_ms == () and session.launches == 1


@pytest.mark.parametrize(
    "error, status, fatal",
    [
        (RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS"), Status.RUNTIME_ERROR, True),
        (RuntimeError("CUDA call failed: CUDA_ERROR_INVALID_VALUE"), Status.RESOURCE_ERROR, False),
    ],
)
def test_launch_errors_are_classified(error, status, fatal):
    outcome = evaluate(StandInSession(launch_error=error))
    assert outcome.status is status and outcome.fatal is fatal and "CUDA_ERROR" in outcome.message


def test_verification_only():
    assert evaluate(StandInSession(), time=False).samples_ms == ()


def test_retime_reports_every_variant_then_the_baseline(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # torch absent: the baseline says so, the variants are timed
    session = StandInSession()
    outcomes = worker.handle(session, RetimeJob("tile_copy", {}, (VARIANT, VARIANT), SCREEN, 0))
    assert [o.status for o in outcomes] == [Status.OK, Status.OK, Status.INVALID]
    assert session.deciding == 2  # the variants' noise decides when the re-timing stops
    assert "torch is not installed" in outcomes[-1].message


def test_several_baselines_join_the_rotation_in_the_familys_order(monkeypatch):
    """A baseline that could not run keeps its place with its reason; the others are timed after the variants."""
    session = StandInSession()
    calls = []
    baselines = [
        ("torch: a", lambda: calls.append("a")),
        Outcome(Status.WRONG_RESULT, "torch: b differs"),
        ("torch: c", lambda: calls.append("c")),
    ]
    monkeypatch.setattr(worker, "_torch_baselines", lambda session, st: baselines)
    outcomes = worker.handle(session, RetimeJob("tile_copy", {}, (VARIANT,), SCREEN, 0))
    assert [(o.status, o.baseline) for o in outcomes] == [
        (Status.OK, ""),
        (Status.OK, "torch: a"),
        (Status.WRONG_RESULT, ""),
        (Status.OK, "torch: c"),
    ]
    assert calls == ["a", "c"] and all(len(o.samples_ms) == 10 for o in outcomes if o.status is Status.OK)


def test_a_failure_outside_the_launch_fails_every_retimed_variant():
    outcomes = worker.handle(
        StandInSession(prepare_error=MemoryError("host")), RetimeJob("tile_copy", {}, (VARIANT,), SCREEN, 0)
    )
    assert len(outcomes) == 2 and all(o.status is Status.RUNTIME_ERROR and o.fatal for o in outcomes)


def test_unknown_jobs_are_answered_not_raised():
    assert worker.handle(StandInSession(), "nonsense").status is Status.RUNTIME_ERROR


def test_a_baseline_that_misses_the_reference_says_by_how_much():
    """torch outputs are compared on the device: bit for bit, or within the family's tolerance (NaN
    only when bit-identical); a miss names the count and, with a tolerance, the largest error."""
    torch = pytest.importorskip("torch")
    from tunebox.families.base import Tolerance

    ref = torch.tensor([1.0, 2.0, 4.0, float("nan")]).view(torch.int32)
    close = torch.tensor([1.0, 2.01, 4.0, float("nan")]).view(torch.int32)
    far = torch.tensor([float("nan"), 2.01, 5.5, float("nan")]).view(torch.int32)
    tolerance = Tolerance(rtol=1e-2, atol=0.0)
    assert worker.disagreement(close, ref, tolerance) == ""
    assert worker.disagreement(far, ref, tolerance) == (
        "2 of 4 elements beyond the tolerance (rtol 0.01, atol 0); largest error 1.5; 1 NaN where the reference is not"
    )
    assert worker.disagreement(close, ref, None) == "1 of 4 elements"
    bf16 = (ref.view(torch.float32).to(torch.bfloat16)).view(torch.int16)
    assert worker.disagreement(bf16, bf16, tolerance) == ""


def test_a_harness_error_keeps_the_worker_and_carries_the_traceback():
    """tunebox's own Python failing (a family's reference, say) is its own status, not a kernel
    fault: the context stays usable (not fatal) and the message holds the traceback."""
    from tunebox.errors import HarnessError

    try:
        {}["expected"]
    except KeyError as exc:
        planted = HarnessError.of(exc, "computing the reference")
    outcome = worker.handle(StandInSession(prepare_error=planted), EvaluateJob("demo", {}, VARIANT, SCREEN, 0))
    assert outcome.status is Status.HARNESS_ERROR and not outcome.fatal
    assert "KeyError: 'expected'" in outcome.message and "Traceback" in outcome.message
    assert "not a kernel fault" in outcome.message


def test_torch_libraries_are_preloaded_torch_s_global_one_first_and_a_missing_one_left_to_the_import(
    tmp_path, monkeypatch
):
    """The worker loads torch's shared libraries through ctypes before importing it (their dlopen runs
    without the GIL): libtorch_global_deps globally, as torch does, the rest locally; one that fails
    to load does not stop the others."""
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    origin = tmp_path / "torch" / "__init__.py"
    monkeypatch.setattr(worker.importlib.util, "find_spec", lambda name: types.SimpleNamespace(origin=str(origin)))
    loaded = []

    def cdll(path, mode):
        if path.endswith("libc10_cuda.so"):
            raise OSError("not here")
        loaded.append((Path(path).relative_to(tmp_path).as_posix(), mode))

    monkeypatch.setattr(worker.ctypes, "CDLL", cdll)
    worker._preload_torch_libraries()
    assert loaded[0] == ("torch/lib/libtorch_global_deps.so", ctypes.RTLD_GLOBAL)
    names = [name for name, _ in loaded]
    assert "torch/lib/libtorch_cuda.so" in names and "torch/lib/libtorch_python.so" in names
    assert "torch/lib/libc10_cuda.so" not in names
    assert all(mode == ctypes.DEFAULT_MODE for _, mode in loaded[1:])


def test_without_torch_nothing_is_preloaded(monkeypatch):
    monkeypatch.setattr(worker.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(worker.ctypes, "CDLL", lambda *a, **k: pytest.fail("loaded a library without torch"))
    worker._preload_torch_libraries()
