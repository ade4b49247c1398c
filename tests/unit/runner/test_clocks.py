"""Observed clocks (issue 19 item 7) with a fake NVML reader: every timing carries what was read with
its samples, a batch timed while the GPU throttled is re-taken, persistent throttling is kept and
flagged, nothing is faked where NVML is missing, and logs without clocks still load."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from stand_in_workers import StandInSession

from tunebox.families.base import LaunchGeometry
from tunebox.records import Clocks, ClockSample, EvalRecord, Status, Timing
from tunebox.runner import worker
from tunebox.runner.clocks import RETAKES, NvmlReader, open_reader, reader_for
from tunebox.runner.protocol import EvaluateJob, RetimeJob, Variant
from tunebox.runner.timing import SCREEN
from tunebox.store.evallog import EvalLog

REPO = Path(__file__).resolve().parents[3]
VARIANT = Variant(b"cubin", "k", LaunchGeometry((1, 1, 1), (32, 1, 1), 0), ())
COOL = ClockSample(sm_mhz=1980, mem_mhz=3201, temperature_c=41, power_w=312.5, reasons=0)
HOT = ClockSample(sm_mhz=1110, mem_mhz=3201, temperature_c=88, power_w=700.0, reasons=0x40)  # hw thermal slowdown


class FakeReader:
    """Answers each read with the next programmed sample (the last one once they run out)."""

    def __init__(self, *samples: ClockSample) -> None:
        self.samples = list(samples)
        self.reads = 0

    def read(self) -> ClockSample:
        self.reads += 1
        return self.samples.pop(0) if len(self.samples) > 1 else self.samples[0]


def evaluate(session):
    return worker.handle(session, EvaluateJob("tile_copy", {}, VARIANT, SCREEN, 0))


def test_a_timing_carries_the_clocks_read_before_and_after_its_rounds():
    outcome = evaluate(StandInSession(clock_reader=FakeReader(COOL)))
    assert outcome.status is Status.OK and outcome.message == ""
    assert outcome.clocks == Clocks((COOL, COOL), retakes=0, throttled=False)


def test_a_batch_timed_while_the_gpu_throttled_is_taken_again():
    session = StandInSession(clock_reader=FakeReader(COOL, HOT, COOL))  # the first batch ends throttled
    outcome = evaluate(session)
    assert session.batches == 2 and outcome.clocks == Clocks((COOL, COOL), retakes=1, throttled=False)
    assert outcome.message == "" and len(outcome.samples_ms) == 10


def test_persistent_throttling_is_kept_and_flagged():
    session = StandInSession(clock_reader=FakeReader(HOT))
    outcome = evaluate(session)
    assert session.batches == RETAKES + 1 == 3
    assert outcome.status is Status.OK and len(outcome.samples_ms) == 10
    assert outcome.clocks == Clocks((HOT, HOT), retakes=2, throttled=True)
    assert outcome.message == "timed while the GPU throttled (hardware thermal slowdown) in all 3 batches"


@pytest.mark.parametrize("reasons", [0x1, 0x2, 0x4, 0x10, 0x100, None])
def test_idle_application_clocks_power_cap_sync_boost_and_display_are_no_throttling(reasons):
    sample = ClockSample(1755, 3201, 60, 690.0, reasons)
    session = StandInSession(clock_reader=FakeReader(sample))
    assert evaluate(session).clocks == Clocks((sample, sample)) and session.batches == 1


@pytest.mark.parametrize("bit", [0x8, 0x20, 0x40, 0x80])
def test_slowdowns_and_the_power_brake_are_throttling(bit):
    assert ClockSample(1000, 3201, 90, 500.0, bit | 0x1).throttled


def test_a_retiming_shares_its_batch_clocks_among_the_finalists_and_baselines(monkeypatch):
    monkeypatch.setattr(worker, "_torch_baselines", lambda session, st: [("torch: a", lambda: None)])
    session = StandInSession(clock_reader=FakeReader(HOT, HOT, COOL))
    outcomes = worker.handle(session, RetimeJob("tile_copy", {}, (VARIANT, VARIANT), SCREEN, 0))
    assert session.batches == 2 and {o.clocks for o in outcomes} == {Clocks((COOL, COOL), retakes=1)}


def test_a_variant_cut_on_its_verification_launch_carries_the_clocks_seen_then():
    """Screening with a cut-off: the one sample of a variant far over it comes with the clocks read
    around its verification launch, a throttled reading flagged (not retaken: verification runs once)."""
    job = EvaluateJob("tile_copy", {}, VARIANT, SCREEN, 0, cutoff_ms=0.1)
    for reading, throttled in ((COOL, False), (HOT, True)):
        session = StandInSession(clock_reader=FakeReader(reading), first_ms=1.0)
        outcome = worker.handle(session, job)
        assert outcome.samples_ms == (1.0,) and "verification launch" in outcome.message
        assert outcome.clocks == Clocks((reading, reading), retakes=0, throttled=throttled) and session.batches == 0


def test_without_nvml_there_are_no_observations():
    session = StandInSession(clock_reader=None)
    outcome = evaluate(session)
    assert outcome.status is Status.OK and outcome.clocks is None and session.batches == 1


def test_no_reader_opens_without_nvml(monkeypatch):
    """A device NVML does not know (or no NVML library, as on this CPU machine): no reader."""
    assert open_reader("0000:FF:1F.7") is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    assert open_reader("0000:3B:00.0") is None


def test_the_nvml_reader_reads_watts_and_leaves_refused_queries_empty():
    class NVMLError(Exception):
        pass

    def refused(handle):
        raise NVMLError("Not Supported")

    nvml = SimpleNamespace(
        NVMLError=NVMLError,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetClockInfo=lambda handle, kind: {1: 1980, 2: 3201}[kind],
        nvmlDeviceGetTemperature=lambda handle, sensor: 43,
        nvmlDeviceGetPowerUsage=lambda handle: 312_500,  # milliwatts
        nvmlDeviceGetCurrentClocksEventReasons=refused,
    )
    assert NvmlReader(nvml, "handle").read() == ClockSample(1980, 3201, 43, 312.5, None)


def test_clocks_round_trip_through_the_log_and_old_records_load(tmp_path):
    timed = EvalRecord("faults", {"n": 1}, {}, Status.OK, timing=Timing((1.0, 1.1), Clocks((HOT, COOL), 2, True)))
    assert EvalRecord.from_json(timed.to_json()) == timed
    old = json.loads(timed.to_json())
    del old["timing"]["clocks"]  # a timing logged before timings carried clocks
    assert EvalRecord.from_json(json.dumps(old)).timing == Timing((1.0, 1.1))
    log = EvalLog(tmp_path / "evals.jsonl")
    log.append(timed)
    assert log.read() == [timed]


RECORDINGS = sorted((REPO / "results" / "recordings").glob("*.jsonl.gz"))


def test_the_recordings_are_shipped_compressed() -> None:
    """Every shipped recording is gzip-compressed (the checkout must stay small enough to upload to a
    GPU host); none is left plain."""
    folder = REPO / "results" / "recordings"
    assert len(RECORDINGS) >= 20
    assert not list(folder.rglob("*.jsonl"))


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_the_shipped_recordings_load_unchanged(recording):
    """Recordings made before timings read NVML (the four below) load without observations; every one
    recorded since on the H200 carries the clocks each timing saw, but tile_copy_windowed's variants cut
    on their verification launch (recorded at 8a6d922, before that launch's clocks were read)."""
    records = EvalLog(recording).read()
    timed = [r for r in records if r.timing]
    observed = [r.timing.clocks for r in timed if r.timing and r.timing.clocks]
    assert timed and all(s.sm_mhz and s.mem_mhz and s.temperature_c for c in observed for s in c.samples)
    before_clocks = ("gemm", "gemm_skinny", "gemm_wgmma", "ragged3d")
    name = recording.name.removesuffix(".jsonl.gz")
    if name in before_clocks:
        assert not observed
    else:
        unobserved = [r for r in timed if r.timing and not r.timing.clocks]
        cut = "cut off on its verification launch"
        assert all(name == "tile_copy_windowed" and cut in r.message for r in unobserved), unobserved[:1]
    assert [r.to_json() for r in records[:3]] == [EvalRecord.from_json(r.to_json()).to_json() for r in records[:3]]


def test_a_device_without_a_pci_bus_id_gets_no_reader() -> None:
    """An older cuda.core (or a driver refusing the query): no observations, never a failed worker."""

    class Device:
        @property
        def pci_bus_id(self) -> str:
            raise AttributeError("pci_bus_id")

    assert reader_for(Device()) is None
