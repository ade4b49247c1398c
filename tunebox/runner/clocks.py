"""The timing device's clocks, temperature, power and throttle reasons, read through NVML (pynvml,
from nvidia-ml-py), and the rule that re-takes a timed batch during which the GPU throttled.

Only the GPU worker reads NVML. Where NVML is missing (no nvidia-ml-py, no driver library: CPU
machines) or does not know the device, there is no reader and timings carry no observations: they
are absent, never faked. One ``read`` is five NVML queries, tens of microseconds in all
(``tests/gpu/test_clocks_gpu.py`` measures it); a batch reads before its first round, while each
round runs and after its last, so the cost is a few reads per batch of at least 10 samples.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, TypeVar

from ..records import Clocks, ClockSample

log = logging.getLogger(__name__)

RETAKES = 2  # a throttled batch is measured again at most this many times; then it is kept, flagged

T = TypeVar("T")
Observe = Callable[[], None]


class ClockReader(Protocol):
    """Reads the timing device's state now (tests pass fakes)."""

    def read(self) -> ClockSample: ...


class NvmlReader:
    """A ``ClockReader`` over one NVML device handle; a query NVML refuses (not supported on this
    board, say) leaves its field None."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml, self._handle = nvml, handle

    def read(self) -> ClockSample:
        nvml, handle = self._nvml, self._handle
        milliwatts = self._query(nvml.nvmlDeviceGetPowerUsage, handle)
        return ClockSample(
            sm_mhz=self._query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
            mem_mhz=self._query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
            temperature_c=self._query(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
            power_w=None if milliwatts is None else milliwatts / 1000,
            reasons=self._query(nvml.nvmlDeviceGetCurrentClocksEventReasons, handle),
        )

    def _query(self, fn: Callable[..., Any], *args: Any) -> int | None:
        try:
            return int(fn(*args))
        except self._nvml.NVMLError:
            return None


def reader_for(device: Any) -> ClockReader | None:
    """``open_reader`` for a cuda.core ``Device``: by its PCI bus id, or None (logged) where this
    cuda.core cannot say it."""
    try:
        bus = str(device.pci_bus_id)
    except Exception as exc:  # an older cuda.core without the property, or a driver that refuses it
        log.info("no PCI bus id for device %s (%s): timings carry no clock observations", device, exc)
        return None
    return open_reader(bus)


def open_reader(pci_bus_id: str) -> ClockReader | None:
    """An NVML reader of the device at ``pci_bus_id`` (as CUDA names it, ``0000:3B:00.0``: the CUDA
    device the worker uses, whatever CUDA_VISIBLE_DEVICES renumbered), or None (logged) where NVML
    is missing or does not find it."""
    try:
        import pynvml
    except ImportError:
        log.info("nvidia-ml-py is not installed: timings carry no clock observations")
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
    except pynvml.NVMLError as exc:
        log.info("NVML unavailable for the device at %s (%s): timings carry no clock observations", pci_bus_id, exc)
        return None
    return NvmlReader(pynvml, handle)


def _observe(reader: ClockReader, into: list[ClockSample]) -> None:
    into.append(reader.read())


def idle() -> None:
    """The hook of a measurement whose clocks nobody reads."""


def retake_throttled(
    measure: Callable[[Observe], T], reader: ClockReader | None, retakes: int = RETAKES
) -> tuple[T, Clocks | None]:
    """``measure``'s result and the clocks observed during it. ``measure`` takes a hook it calls
    where the clocks are to be read (before, during and after its rounds). A batch during which a
    throttling reason (``records.THROTTLING``) was seen is measured again, at most ``retakes`` more
    times; the last one is kept, flagged ``throttled``. Without a reader: no observations (None)."""
    if reader is None:
        return measure(idle), None
    for attempt in range(retakes + 1):
        seen: list[ClockSample] = []
        result = measure(partial(_observe, reader, seen))
        clocks = Clocks(tuple(seen), attempt, any(s.throttled for s in seen))
        if not clocks.throttled:
            break
        log.warning("the GPU throttled during a timed batch (%d of %d)", attempt + 1, retakes + 1)
    return result, clocks
