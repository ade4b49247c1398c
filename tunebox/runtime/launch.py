"""Launch the tuned variant of a family on the caller's own GPU arrays.

Arrays are torch tensors or objects with ``__cuda_array_interface__`` (CuPy). The kernel runs on
the caller's stream (torch's current stream for tensors, else ``stream`` or the legacy default
stream) in the caller's CUDA context. Kernels are compiled once (or loaded from the CUBIN cache)
and kept per process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..build.nvrtc import BuildResult, NvrtcBuilder, nvrtc_version
from ..cuda_api import load_kernel, marshal, steps_launcher
from ..dtypes import element_type
from ..errors import CompileError, InvalidProblem
from ..families import get as get_family
from ..families.base import Arg, KernelSource, LaunchGeometry, Problem
from ..families.contract import Family
from ..records import DeviceInfo, Status
from ..runner.protocol import variant_of
from .lookup import Lookup, LookupResult

_Step = tuple[Any, LaunchGeometry, tuple[Arg, ...]]  # a loaded kernel, its geometry, its arguments (not marshalled)
_Plan = tuple[LookupResult, list[_Step]]  # the lookup answer and the launches, prologue first

_TYPESTR = {"<f4": "float32", "<f2": "float16", "<i4": "int32", "<i8": "int64", "|u1": "uint8"}  # CuPy's


@dataclass(frozen=True)
class DeviceArray:
    """What tunebox needs of a caller's array: address, shape, element type, stream."""

    pointer: int
    shape: tuple[int, ...]
    dtype: str
    stream: int | None  # the producer's stream handle, if it has one


def device_array(obj: Any) -> DeviceArray:
    """Describe a contiguous CUDA array (torch tensor or __cuda_array_interface__ object)."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous"):  # torch.Tensor
        import torch

        if not obj.is_cuda or not obj.is_contiguous():
            raise InvalidProblem("tunebox.launch needs contiguous CUDA tensors")
        return DeviceArray(
            obj.data_ptr(),
            tuple(obj.shape),
            str(obj.dtype).removeprefix("torch."),
            torch.cuda.current_stream(obj.device).cuda_stream,
        )
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        raise InvalidProblem(f"{type(obj).__name__} is not a CUDA array (no __cuda_array_interface__)")
    shape = tuple(cai["shape"])
    if cai["typestr"] not in _TYPESTR:
        raise InvalidProblem(
            f"unsupported element type {cai['typestr']}; use one of {sorted(_TYPESTR.values())} "
            "(bfloat16 arrays: pass torch tensors)"
        )
    contiguous = np.empty(shape, dtype=np.dtype(cai["typestr"]))  # never touches the device
    if cai.get("strides") not in (None, contiguous.strides):
        raise InvalidProblem("tunebox.launch needs C-contiguous arrays")
    return DeviceArray(int(cai["data"][0]), shape, _TYPESTR[cai["typestr"]], cai.get("stream"))


class Launcher:
    """Per-process cache of lookups and loaded kernels; thread-safe."""

    def __init__(self, db: Path = Path("results/winners.sqlite"), cache_dir: Path | None = None) -> None:
        self._lookup = Lookup(db)
        self._cache_dir = cache_dir
        self._plans: dict[tuple[str, Problem], _Plan] = {}  # (family, problem) -> lookup answer, launches
        self._builds: dict[KernelSource, BuildResult] = {}  # compiled once per source, whatever the problem
        self._bindings: dict[tuple[str, Problem, int], _Binding] = {}  # per (family, problem, stream)
        self._lock = threading.Lock()
        self._device: Any = None
        self.info: DeviceInfo | None = None
        self._builder: NvrtcBuilder | None = None

    def _ensure_device(self) -> None:
        if self._device is not None:
            return
        from cuda.bindings import driver
        from cuda.core import Device

        dev = Device()
        dev.set_current()
        cc = dev.compute_capability
        err, version = driver.cuDriverGetVersion()
        self._device = dev
        self.info = DeviceInfo(dev.name, f"{cc.major}.{cc.minor}", str(version), nvrtc_version())
        self._builder = NvrtcBuilder(f"sm_{cc.major}{cc.minor}", self._cache_dir, workers=1)

    def device_info(self) -> DeviceInfo:
        """The current device as the winners database keys it (starts CUDA on first use)."""
        self._ensure_device()
        assert self.info is not None
        return self.info

    def choose(self, family: Family[Any], problem: Problem) -> LookupResult:
        return self._lookup.lookup(family, problem, self.device_info())

    def __call__(
        self, family_name: str, arrays: dict[str, Any], stream: int | None = None, **options: Any
    ) -> LookupResult:
        """Run ``family_name`` on ``arrays`` (buffer name -> array); returns the lookup answer used.
        Workspace the variant needs is allocated here, once per problem and stream."""
        family = get_family(family_name)
        described = {name: device_array(a) for name, a in arrays.items()}
        problem = family.problem_from_arrays(described, **options)
        for spec in family.buffers(problem):
            got = described.get(spec.name)
            if spec.role != "workspace" and (got is None or got.shape != spec.shape or got.dtype != spec.dtype):
                raise InvalidProblem(f"{family_name}: buffer {spec.name} must be {spec.dtype}{list(spec.shape)}")
        handle = int(stream if stream is not None else next((d.stream for d in described.values() if d.stream), 0) or 0)
        with self._lock:
            plan = self._plans.get((family_name, problem))
            if plan is None:
                plan = self._plan(family, problem)
                self._plans[(family_name, problem)] = plan
            answer, steps = plan
            bound = self._bind(family, problem, handle)
            pointers = {
                **{name: d.pointer for name, d in described.items()},
                **{name: int(buf.handle) for name, buf in bound.workspace.items()},
            }
            if pointers != bound.pointers:  # arguments and tensor maps encoded once per set of addresses
                bound.run = steps_launcher(
                    bound.stream, [(kernel, geo, marshal(args, pointers)) for kernel, geo, args in steps]
                )
                bound.pointers = pointers
            run = bound.run
        assert run is not None  # set above on the first call: ``bound.pointers`` starts as None
        run()
        return answer

    def _plan(self, family: Family[Any], problem: Problem) -> _Plan:
        """Everything a launch of ``problem`` needs but the caller's pointers, worked out once: the
        lookup answer and the (kernel, geometry, arguments) of each launch, prologue first."""
        answer = self.choose(family, problem)
        config = family.config(answer.config)
        family.check(problem, config)
        source = family.render(problem, config)
        assert self._builder is not None
        built = self._builds.get(source) or self._builder.build_one(source)
        self._builds[source] = built
        if built.status is not Status.OK:
            raise CompileError(
                f"{family.name} {config.label()}: the chosen variant did not compile ({built.status.value}); see .log",
                built.log,
            )
        variant = variant_of(family, problem, config, built)
        steps = [
            (
                load_kernel(built.cubin, step.kernel, step.geometry.shared_bytes, self._device.device_id),
                step.geometry,
                step.args,
            )
            for step in variant.launches
        ]
        return answer, steps

    def _bind(self, family: Family[Any], problem: Problem, handle: int) -> _Binding:
        """``problem``'s binding to the stream ``handle``: its workspace buffers, allocated on first use
        and kept (launches on other streams get their own), and the last launches made there."""
        from cuda.core import Stream

        key = (family.name, problem, handle)
        if key not in self._bindings:
            stream = Stream.from_handle(handle)
            workspace = {
                spec.name: self._device.allocate(
                    max(1, math.prod(spec.shape) * element_type(spec.dtype).itemsize), stream=stream
                )
                for spec in family.buffers(problem)
                if spec.role == "workspace"
            }
            self._bindings[key] = _Binding(stream, workspace)
        return self._bindings[key]


@dataclass
class _Binding:
    """A plan on one stream: the stream, its workspace buffers (name -> Buffer), and the callable
    running the variant on the last caller addresses (rebuilt when the addresses change)."""

    stream: Any
    workspace: dict[str, Any]
    pointers: dict[str, int] | None = None
    run: Callable[[], None] | None = None


_default: Launcher | None = None


def launch(family_name: str, arrays: dict[str, Any], stream: int | None = None, **options: Any) -> LookupResult:
    """Launch with the process-wide ``Launcher`` (winners from results/winners.sqlite)."""
    global _default
    if _default is None:
        _default = Launcher()
    return _default(family_name, arrays, stream, **options)
