"""The CUDA side of a GPU worker: one context, one stream, buffers of the current problem.

Only ever imported inside the worker process (see ``worker.py``); the sweep process never touches
CUDA.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from ..build.nvrtc import NvrtcBuilder, nvrtc_version
from ..cuda_api import checked, load_kernel, pack, steps_launcher
from ..dtypes import buffer_type
from ..errors import HarnessError
from ..families import get as get_family
from ..families.base import KernelSource, Problem, Tolerance
from ..families.contract import Family
from ..kernels_dir import kernel_source
from ..records import DeviceInfo, KernelMetrics
from .clocks import ClockReader, Observe, idle, reader_for
from .gate import TimingGate
from .protocol import Variant
from .timing import BenchConfig
from .uploads import upload_to

log = logging.getLogger(__name__)

_WORD = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int"}  # compare kernels by word size


@dataclass
class ProblemState:
    """Device buffers of one problem: working buffers, pristine inputs and expected outputs."""

    family: Family[Any]
    problem: Problem
    seed: int
    host_inputs: dict[str, np.ndarray]
    buffers: dict[str, Any]  # name -> cuda.core Buffer (inputs and outputs)
    pristine: dict[str, Any]  # input name -> copy taken before any launch
    expected: dict[str, Any]  # output name -> reference bits on the device
    expected_host: dict[str, np.ndarray]
    tolerance: Tolerance | None = None  # None: outputs must match bit for bit


class GpuSession:
    """Owns the CUDA context of this process. Methods raise on CUDA errors; the caller classifies."""

    def __init__(self) -> None:
        from cuda.bindings import driver
        from cuda.core import Device

        self.driver = driver
        self.device = Device(0)
        self.device.set_current()
        self.stream = self.device.create_stream()
        cc = self.device.compute_capability
        self.arch = f"sm_{cc.major}{cc.minor}"
        self.info = DeviceInfo(
            self.device.name, f"{cc.major}.{cc.minor}", str(checked(driver.cuDriverGetVersion())), nvrtc_version()
        )
        l2 = self.device.properties.l2_cache_size
        self.flush_words = max(1, 2 * l2 // 4)
        self.flush_buffer = self.device.allocate(self.flush_words * 4, stream=self.stream)
        self.scratch = self.device.allocate(16, stream=self.stream)
        self.gate = TimingGate(driver, self.stream, self.arch, self.device.device_id)
        builder = NvrtcBuilder(self.arch, cache_dir=None, workers=1)
        first, *others = (f"mismatches<{ctype}>" for ctype in _WORD.values())  # one program, one compile
        built = builder.build_one(KernelSource(kernel_source("runtime/compare.cu"), first, (), tuple(others)))
        builder.close()
        symbols = (built.lowered_name, *built.helper_symbols)
        # word size -> bitwise compare kernel
        self.compare: dict[int, Any] = {
            size: load_kernel(built.cubin, symbol, 0, self.device.device_id)
            for size, symbol in zip(_WORD, symbols, strict=True)
        }
        self._within: dict[str, Any] = {}  # element type -> tolerance compare kernel, compiled on first use
        self.state: ProblemState | None = None
        self.clock_reader: ClockReader | None = reader_for(self.device)

    # -- memory -------------------------------------------------------------------------------
    def upload(self, array: np.ndarray) -> Any:
        """A new buffer holding ``array``, complete when this returns.

        The copy is issued on the session's stream and waited for: a synchronous ``cuMemcpyHtoD`` from
        pageable memory returns once the data is staged, before it lands, and runs on the legacy
        stream, unordered with this (non-blocking) stream, so a pristine copy taken right after could
        read the allocation's previous contents (seen on the H200 as the last 28 KB of a 1 MB input
        "modified" by the first variant of a new problem). Large arrays are copied from their pages
        locked in place (``uploads.py``)."""
        buf = self.device.allocate(max(array.nbytes, 1), stream=self.stream)
        upload_to(self.driver, np.ascontiguousarray(array), int(buf.handle), self.stream)
        return buf

    def device_copy(self, buf: Any, nbytes: int) -> Any:
        """A new buffer holding the first ``nbytes`` of ``buf`` (copied on the device)."""
        copy = self.device.allocate(max(nbytes, 1), stream=self.stream)
        checked(self.driver.cuMemcpyDtoDAsync(int(copy.handle), int(buf.handle), nbytes, self.stream.handle))
        return copy

    def copy_to(self, address: int, buf: Any, nbytes: int) -> None:
        """Copy the first ``nbytes`` of ``buf`` to device ``address`` (memory another library
        allocated), in stream order."""
        checked(self.driver.cuMemcpyDtoDAsync(address, int(buf.handle), nbytes, self.stream.handle))

    def download(self, buf: Any, count: int, dtype: DTypeLike, offset: int = 0) -> np.ndarray:
        out = np.empty(count, dtype=dtype)
        self.stream.sync()
        checked(self.driver.cuMemcpyDtoH(out.ctypes.data, int(buf.handle) + offset * out.itemsize, out.nbytes))
        return out

    def fill(self, buf: Any, value: int, itemsize: int, count: int) -> None:
        memset = {4: self.driver.cuMemsetD32Async, 2: self.driver.cuMemsetD16Async, 1: self.driver.cuMemsetD8Async}
        fn = memset[itemsize]
        checked(fn(int(buf.handle), value, count, self.stream.handle))

    def flush_l2(self) -> None:
        checked(self.driver.cuMemsetD32Async(int(self.flush_buffer.handle), 0, self.flush_words, self.stream.handle))

    # -- problems -----------------------------------------------------------------------------
    def prepare(self, family_name: str, problem_data: dict[str, Any], seed: int) -> ProblemState:
        """Make (or reuse) seeded inputs, the numpy reference, and their device copies."""
        try:  # the family's Python: an exception is a harness error, not a kernel fault
            family = get_family(family_name)
            problem = family.parse_problem(problem_data)
            st = self.state
            if st and st.family is family and st.problem == problem and st.seed == seed:
                return st
            self.state = None  # free the previous problem's buffers first
            inputs = family.make_inputs(problem, np.random.default_rng(seed))
            expected = family.reference(problem, inputs)
            tolerance = family.tolerance(problem, inputs)
            specs = family.buffers(problem)
        except Exception as exc:
            raise HarnessError.of(exc, f"preparing {family_name} {problem_data}") from exc
        buffers: dict[str, Any] = {}
        pristine: dict[str, Any] = {}
        expected_dev: dict[str, Any] = {}
        for spec in specs:
            if spec.role == "input":
                buffers[spec.name] = self.upload(inputs[spec.name])
                pristine[spec.name] = self.device_copy(buffers[spec.name], inputs[spec.name].nbytes)
            else:
                buffers[spec.name] = self.device.allocate(max(spec.nbytes, 1), stream=self.stream)
                if spec.zeroed:
                    self.fill(buffers[spec.name], 0, 1, spec.nbytes)
            if spec.role == "output":
                expected_dev[spec.name] = self.upload(expected[spec.name])
        self.state = ProblemState(family, problem, seed, inputs, buffers, pristine, expected_dev, expected, tolerance)
        return self.state

    def poison_outputs(self, st: ProblemState) -> None:
        """Outputs poisoned, zeroed workspace zeroed (a faulty variant's leftovers never reach the next)."""
        for spec in st.family.buffers(st.problem):
            if spec.role == "output":
                et = buffer_type(spec.dtype)
                self.fill(st.buffers[spec.name], et.poison, et.itemsize, math.prod(spec.shape))
            elif spec.zeroed:
                self.fill(st.buffers[spec.name], 0, 1, spec.nbytes)

    def verification_launch(self, st: ProblemState, launch: Callable[[], None], observe: Observe = idle) -> float:
        """Run ``launch`` once for verification, timed: outputs poisoned, the L2 flushed, the launch
        between two events, all queued behind the timing gate (as a timed sample is). Returns its time
        in ms once the stream is idle; a launch's own failure raises here. ``observe`` (the clocks'
        reading) runs before and while it runs."""
        from cuda.core import EventOptions

        observe()
        with self.gate.holding():
            self.poison_outputs(st)
            begin, end = self._queue_sample(launch, EventOptions(timing_enabled=True))
        observe()
        self.stream.sync()
        return float(end - begin)

    def _queue_sample(self, launch: Callable[[], None], opts: Any) -> tuple[Any, Any]:
        """One sample queued on the stream: the L2 flushed, then ``launch`` between two timing events
        (recorded with ``opts``); returns the events."""
        self.flush_l2()
        begin = self.stream.record(options=opts)
        launch()
        return begin, self.stream.record(options=opts)

    def verify(self, st: ProblemState) -> str:
        """'' when outputs match the reference bit for bit and inputs are unchanged, else why not.

        A modified input is restored from its pristine copy, so later variants see true inputs.
        """
        problems = []
        for spec in st.family.buffers(st.problem):
            if spec.role != "input":
                continue
            host = st.host_inputs[spec.name]  # any dtype (data bits, indices, masks): compared as bytes
            word = 4 if host.nbytes % 4 == 0 else 2 if host.nbytes % 2 == 0 else 1
            count, first = self.mismatches(st.buffers[spec.name], st.pristine[spec.name], host.nbytes // word, word)
            if count:
                checked(
                    self.driver.cuMemcpyDtoDAsync(
                        int(st.buffers[spec.name].handle),
                        int(st.pristine[spec.name].handle),
                        host.nbytes,
                        self.stream.handle,
                    )
                )
                index = tuple(int(i) for i in np.unravel_index(first * word // host.itemsize, host.shape))
                problems.append(f"input {spec.name} was modified ({count} words, first at {index})")
        for spec in st.family.buffers(st.problem):
            if spec.role != "output":
                continue
            n = math.prod(spec.shape)
            et = buffer_type(spec.dtype)
            if st.tolerance is None:
                count, first = self.mismatches(st.buffers[spec.name], st.expected[spec.name], n, et.itemsize)
            else:
                count, first = self.mismatches_within(
                    st.buffers[spec.name], st.expected[spec.name], n, et.name, st.tolerance
                )
            if not count:
                continue
            index = tuple(int(i) for i in np.unravel_index(first, spec.shape))
            got = int(self.download(st.buffers[spec.name], 1, et.storage, first)[0])
            want = int(st.expected_host[spec.name].reshape(-1)[first])
            unwritten = " (never written)" if got == et.poison else ""
            tol = st.tolerance
            within = f" (tolerance rtol {tol.rtol:g}, atol {tol.atol:g})" if tol else ""
            problems.append(
                f"{spec.name}: {count} of {n} elements wrong{within}; first at {index}: "
                f"got 0x{got:x}{unwritten}, expected 0x{want:x}"
            )
        self.stream.sync()
        return "; ".join(problems)

    def mismatches(self, a: Any, b: Any, n: int, itemsize: int) -> tuple[int, int]:
        """(positions where a and b differ bit for bit, the lowest such position)."""
        return self._count(self.compare[itemsize], a, b, n)

    def mismatches_within(self, a: Any, b: Any, n: int, element: str, tolerance: Tolerance) -> tuple[int, int]:
        """The same, for float outputs: positions beyond ``tolerance`` of the reference ``b``."""
        if element not in self._within:
            word, bf16 = {"float32": ("unsigned int", "false"), "bfloat16": ("unsigned short", "true")}[element]
            builder = NvrtcBuilder(self.arch, cache_dir=None, workers=1)
            built = builder.build_one(
                KernelSource(kernel_source("runtime/compare.cu"), f"mismatches_within<{word}, {bf16}>", ())
            )
            builder.close()
            self._within[element] = load_kernel(built.cubin, built.lowered_name, 0, self.device.device_id)
        return self._count(self._within[element], a, b, n, np.float32(tolerance.rtol), np.float32(tolerance.atol))

    def _count(self, kernel: Any, a: Any, b: Any, n: int, *tolerance: np.float32) -> tuple[int, int]:
        from cuda.core import LaunchConfig, launch

        checked(self.driver.cuMemsetD32Async(int(self.scratch.handle), 0, 2, self.stream.handle))
        checked(self.driver.cuMemsetD32Async(int(self.scratch.handle) + 8, 0xFFFFFFFF, 2, self.stream.handle))
        count_ptr = np.uint64(int(self.scratch.handle))
        first_ptr = np.uint64(int(self.scratch.handle) + 8)
        blocks = int(min(max(1, (n + 255) // 256), 132 * 16))
        launch(
            self.stream,
            LaunchConfig(grid=blocks, block=256),
            kernel,
            a,
            b,
            np.int64(n),
            *tolerance,
            count_ptr,
            first_ptr,
        )
        count, first = self.download(self.scratch, 2, np.uint64)
        return int(count), int(first)

    # -- kernels ------------------------------------------------------------------------------
    def launcher(self, st: ProblemState, variant: Variant) -> tuple[Callable[[], None], KernelMetrics]:
        """A zero-argument callable running ``variant`` on ``st``'s buffers (its prologue, then its
        main kernel; tensor maps encoded once here), and the main kernel's metrics."""
        steps = []
        for step in variant.launches:
            kernel = load_kernel(variant.cubin, step.kernel, step.geometry.shared_bytes, self.device.device_id)
            steps.append((kernel, step.geometry, pack(step.args, st.buffers)))
        attrs = kernel.attributes  # the main kernel's, launched last
        metrics = KernelMetrics(
            int(attrs.num_regs),
            int(attrs.shared_size_bytes) + variant.geometry.shared_bytes,
            int(attrs.local_size_bytes),
        )
        return steps_launcher(self.stream, steps), metrics

    def time_interleaved(
        self,
        launches: list[Callable[[], None]],
        bench: BenchConfig,
        deciding: int | None = None,
        observe: Observe = idle,
    ) -> list[tuple[float, ...]]:
        """Samples (ms) of each launch, taken in rounds (one sample of each launch in turn), L2
        flushed before every sample, a round without baselines queued whole behind the timing gate
        before it runs. The first ``deciding`` launches (default: all) stay in every
        round until ``bench``'s rule holds for each of them; any other launch (a baseline) leaves the
        rotation once the rule holds for its own samples, and is cut off with the deciding ones.
        ``observe`` (the clocks' reading) runs before the first round, during each, after the last."""
        from cuda.core import EventOptions

        for fn in launches:
            for _ in range(bench.warmup):
                fn()
        deciding = len(launches) if deciding is None else deciding
        opts = EventOptions(timing_enabled=True)
        samples: list[list[float]] = [[] for _ in launches]
        rotation = list(range(len(launches)))
        start = time.perf_counter()
        observe()
        while True:
            events = []
            # tunebox's launches only queue work: their round runs once all of it is queued (gate.py says
            # why); a baseline (torch) may wait on the stream, which a closed gate would hold
            with self.gate.holding(all(k < deciding for k in rotation)):
                for _ in range(bench.min_samples):
                    for k in rotation:
                        events.append((k, *self._queue_sample(launches[k], opts)))
            observe()
            self.stream.sync()
            for k, begin, end in events:
                samples[k].append(end - begin)
            elapsed = time.perf_counter() - start
            if all(bench.done(s, elapsed) for s in samples[:deciding]):
                observe()
                return [tuple(s) for s in samples]
            rotation = [k for k in rotation if k < deciding or not bench.done(samples[k], elapsed)]
