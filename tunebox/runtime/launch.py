"""Launch the tuned variant of a family on the caller's own GPU arrays.

Arrays are torch tensors, objects with ``__cuda_array_interface__`` (CuPy) or DLPack producers on a
CUDA device (``__dlpack__`` / ``__dlpack_device__``: JAX, cuda.core views, ...). The kernel runs on
the caller's stream (``stream``, else torch's current stream for tensors or a CUDA array's own,
else the legacy default stream; a DLPack producer is asked to make its data ready on that stream)
in the caller's CUDA context. Kernels are compiled once (or loaded from the CUBIN cache) and kept
per process.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..build.nvrtc import BuildResult, NvrtcBuilder, nvrtc_version
from ..cuda_api import load_kernel, pack, steps_launcher
from ..dtypes import element_type
from ..errors import CompileError, InvalidProblem
from ..families import get as get_family
from ..families.base import Arg, KernelSource, LaunchGeometry, Problem
from ..families.contract import Family
from ..records import DeviceInfo, Status
from ..runner.protocol import variant_of
from ..sweep_spec import check_problem
from .lookup import Lookup, LookupResult

_Step = tuple[Any, LaunchGeometry, tuple[Arg, ...]]  # a loaded kernel, its geometry, its arguments (not packed)
_Plan = tuple[LookupResult, list[_Step]]  # the lookup answer and the launches, prologue first

_TYPESTR = {"<f4": "float32", "<f2": "float16", "<i4": "int32", "<i8": "int64", "|u1": "uint8"}  # CuPy's


@dataclass(frozen=True)
class DeviceArray:
    """What tunebox needs of a caller's array: address, shape, element type, stream."""

    pointer: int
    shape: tuple[int, ...]
    dtype: str
    stream: int | None  # the producer's stream handle, if it has one
    readonly: bool = False  # a DLPack producer exported it read-only: never an output


def device_array(obj: Any, stream: int | None = None) -> DeviceArray:
    """Describe a contiguous CUDA array: a torch tensor, a ``__cuda_array_interface__`` object, or a
    DLPack producer on a CUDA device (asked to make its data ready on ``stream``, the stream the
    kernel will run on: a handle, or None / 0 for the legacy default stream)."""
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
        if hasattr(obj, "__dlpack__"):
            return dlpack_array(obj, stream)
        raise InvalidProblem(
            f"{type(obj).__name__} is not a CUDA array (no __cuda_array_interface__ and no __dlpack__): pass "
            "torch tensors, CuPy arrays or DLPack producers on the GPU"
        )
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


def _dlpack_only(obj: Any) -> bool:
    """Whether ``device_array`` reads ``obj`` through DLPack (neither torch nor a CUDA array interface)."""
    plain = hasattr(obj, "data_ptr") and hasattr(obj, "is_contiguous") or hasattr(obj, "__cuda_array_interface__")
    return not plain and hasattr(obj, "__dlpack__")


# -- DLPack (dlpack.h, ABI 1.x): the capsule's tensor is read in place, never taken over ---------------

KDL_CUDA = 2  # DLDeviceType of memory on a CUDA device
DLPACK_FLAG_READ_ONLY = 1  # DLManagedTensorVersioned.flags: the consumer must not write the data
_DL_DEVICES = {1: "the CPU", 2: "CUDA", 3: "CUDA host (pinned) memory", 4: "OpenCL", 7: "Vulkan", 8: "Metal"}
_DL_DTYPES = {  # (DLDataTypeCode, bits) -> element type name
    (2, 32): "float32",
    (2, 16): "float16",
    (4, 16): "bfloat16",
    (0, 32): "int32",
    (0, 64): "int64",
    (1, 8): "uint8",
}
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),  # in elements; NULL: compact row-major
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):  # capsule "dltensor": the tensor comes first
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):  # capsule "dltensor_versioned" (DLPack >= 1.0)
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_array(obj: Any, stream: int | None = None) -> DeviceArray:
    """Describe a DLPack producer's contiguous CUDA array from its capsule: the data pointer (plus the
    byte offset), shape and element type; strides must be those of a C-contiguous array (any stride of
    an extent-1 dimension); DLPack 1.x's read-only flag is kept (such an array is never written). The
    producer is asked (``__dlpack__(stream=...)``) to make the data ready on ``stream`` (None or 0: the
    legacy default stream, DLPack's 1). The capsule is read and left as it is, never consumed: dropping
    it hands the tensor back to its producer, while the caller's array keeps the memory alive."""
    try:
        device_type, _ = obj.__dlpack_device__()
    except AttributeError:
        raise InvalidProblem(f"{type(obj).__name__} has __dlpack__ but no __dlpack_device__") from None
    if device_type != KDL_CUDA:
        where = _DL_DEVICES.get(device_type, f"DLPack device type {device_type}")
        raise InvalidProblem(
            f"tunebox.launch needs arrays on a CUDA device; this {type(obj).__name__} is on {where} "
            f"(DLPack device type {device_type}, not {KDL_CUDA}): move it to the GPU first"
        )
    consumer = stream if stream not in (None, 0) else 1  # DLPack's legacy default stream is 1, never 0
    try:
        try:
            capsule = obj.__dlpack__(stream=consumer, max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0 takes no max_version
            capsule = obj.__dlpack__(stream=consumer)
    except BufferError as exc:  # the producer cannot export this array (DLPack's own refusal)
        raise InvalidProblem(f"{type(obj).__name__} refused to export itself through DLPack: {exc}") from None
    if _capsule_valid(capsule, b"dltensor_versioned"):
        versioned = _DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
        if versioned.version.major != 1:
            raise InvalidProblem(
                f"{type(obj).__name__} exports DLPack {versioned.version.major}.{versioned.version.minor}; "
                "tunebox reads DLPack 1.x"
            )
        tensor, readonly = versioned.dl_tensor, bool(versioned.flags & DLPACK_FLAG_READ_ONLY)
    elif _capsule_valid(capsule, b"dltensor"):
        tensor, readonly = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dl_tensor, False
    else:
        raise InvalidProblem(f"{type(obj).__name__}.__dlpack__() gave no unused DLPack capsule")
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    dtype = _DL_DTYPES.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        name = f"{_DL_CODES.get(code, f'type code {code} of ')}{bits}" + (f"x{lanes}" if lanes != 1 else "")
        raise InvalidProblem(f"unsupported element type {name}; use one of {sorted(set(_DL_DTYPES.values()))}")
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) for i in range(tensor.ndim))
        if not _c_contiguous(shape, strides):
            raise InvalidProblem(
                f"tunebox.launch needs C-contiguous arrays; this one has strides {list(strides)} (in elements) "
                f"for shape {list(shape)}"
            )
    pointer = (tensor.data or 0) + tensor.byte_offset
    del capsule  # not consumed: its destructor gives the tensor back to the producer
    return DeviceArray(pointer, shape, dtype, None, readonly)  # ready on ``stream``: no producer stream to wait for


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether ``strides`` (in elements) lay ``shape`` out row-major without gaps (the stride of an
    extent-1 dimension is never used; an empty array is contiguous)."""
    if 0 in shape:
        return True
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides), strict=True):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


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
        check_problem(family_name, options)  # a non-finite pad_value, say, says what to give instead
        # arrays with a stream of their own first (torch, CUDA array interface): the kernel's stream is
        # ``stream`` or theirs; DLPack producers are then asked to make their data ready on it
        described = {name: device_array(a) for name, a in arrays.items() if not _dlpack_only(a)}
        handle = int(stream if stream is not None else next((d.stream for d in described.values() if d.stream), 0) or 0)
        described = {name: described.get(name) or device_array(a, handle) for name, a in arrays.items()}
        problem = family.problem_from_arrays(described, **options)
        for spec in family.buffers(problem):
            got = described.get(spec.name)
            if spec.role != "workspace" and (got is None or got.shape != spec.shape or got.dtype != spec.dtype):
                raise InvalidProblem(f"{family_name}: buffer {spec.name} must be {spec.dtype}{list(spec.shape)}")
            if spec.role == "output" and got is not None and got.readonly:
                raise InvalidProblem(f"{family_name}: {spec.name} is written, but its producer exported it read-only")
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
                    bound.stream, [(kernel, geo, pack(args, pointers)) for kernel, geo, args in steps]
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
