"""Observed clocks on the GPU (issue 19 item 7): a real timing carries the SM and memory clocks, the
temperature and the power NVML read while it ran; the reader is the CUDA device's (matched by PCI bus
id); one read costs tens of microseconds (``-s`` prints the figure)."""

from __future__ import annotations

import time

import pytest
from gpu_jobs import variant

from tunebox.families import get
from tunebox.records import Status
from tunebox.runner.clocks import open_reader
from tunebox.runner.protocol import EvaluateJob
from tunebox.runner.timing import SCREEN

pytestmark = pytest.mark.gpu


def test_a_timing_on_the_device_carries_its_clocks(runner, builder):
    family = get("faults")
    problem = family.parse_problem({"n": 1 << 24})
    config = family.space.validate({"template": "planted", "block": 256, "passes": 1, "fault": "none"})
    job = EvaluateJob(family.name, problem.to_dict(), variant(builder, family, problem, config), SCREEN, 3)
    outcome = runner.run(job)
    assert outcome.status is Status.OK and outcome.clocks is not None, outcome
    samples = outcome.clocks.samples
    assert len(samples) >= 3  # before, during the round(s), after
    assert all(s.sm_mhz and s.mem_mhz and s.temperature_c for s in samples), samples
    assert all(s.power_w is None or s.power_w > 0 for s in samples) and all(s.reasons is not None for s in samples)
    print(f"\nclocks of one timing: {samples}; retakes {outcome.clocks.retakes}, throttled {outcome.clocks.throttled}")


def test_the_reader_is_the_cuda_devices_and_cheap():
    pynvml = pytest.importorskip("pynvml")
    from cuda.core import Device

    device = Device(0)  # CUDA's device 0: under CUDA_VISIBLE_DEVICES, not necessarily NVML's index 0
    reader = open_reader(device.pci_bus_id)
    assert reader is not None
    handle = pynvml.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id)

    def bare(uuid: str) -> str:
        return uuid.lower().removeprefix("gpu-")

    assert bare(pynvml.nvmlDeviceGetUUID(handle)) == bare(str(device.uuid))
    reader.read()
    reads = 200
    start = time.perf_counter()
    for _ in range(reads):
        sample = reader.read()
    per_read_us = (time.perf_counter() - start) / reads * 1e6
    print(f"\none NVML read (5 queries): {per_read_us:.0f} us; {sample}")
    assert sample.sm_mhz and sample.mem_mhz and sample.temperature_c is not None
    assert per_read_us < 2000
