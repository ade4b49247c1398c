"""What ``tunebox.launch`` reads of a caller's GPU arrays: torch tensors, objects with
``__cuda_array_interface__`` (CuPy), or DLPack producers on a CUDA device (``__dlpack__`` /
``__dlpack_device__``: JAX, cuda.core views, ...). Each is described by its address, shape, element
type and stream; only C-contiguous arrays are taken. Nothing here touches the device.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidProblem

ALIGNMENT = 16
"""Bytes every tunebox kernel assumes of each array's address: its vectors are up to 16 bytes wide,
and TMA needs 16-byte aligned global addresses. Allocators return 256-byte aligned memory; a view
that starts at an offset (``x[1:]``) may not be aligned."""

_TYPESTR = {"<f4": "float32", "<f2": "float16", "<i4": "int32", "<i8": "int64", "|u1": "uint8"}  # CuPy's


BYTE_STORAGE = frozenset({"uint8", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float4_e2m1fn_x2"})


def stores(buffer_dtype: str, given: str) -> bool:
    """Whether an array of element type ``given`` can be a buffer of ``buffer_dtype``: the same type,
    or any one-byte code type (torch's float8 / float4 storage) for a buffer of bytes (uint8), whose
    family checks the codes' type against the problem (``Operation.from_arrays``)."""
    return given == buffer_dtype or (buffer_dtype == "uint8" and given in BYTE_STORAGE)


@dataclass(frozen=True)
class DeviceArray:
    """What tunebox needs of a caller's array: address, shape, element type, stream."""

    pointer: int
    shape: tuple[int, ...]
    dtype: str
    stream: int | None  # the producer's stream handle, if it has one
    readonly: bool = False  # its producer exported it read-only (DLPack, or a CUDA array interface): never an output


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
    return _cai_array(cai)


def _cai_array(cai: Any) -> DeviceArray:
    """Describe a ``__cuda_array_interface__`` (its data's read-only flag kept: such an array is never an
    output); InvalidProblem for one that is malformed, of another element type or not C-contiguous."""
    try:
        shape = tuple(int(n) for n in cai["shape"])
        typestr, (pointer, readonly) = cai["typestr"], cai["data"]
        pointer, strides = int(pointer), cai.get("strides")
        strides = None if strides is None else tuple(int(n) for n in strides)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidProblem(
            f"a malformed __cuda_array_interface__ ({type(exc).__name__}: {exc}): it needs shape, typestr and "
            "data = (pointer, read-only)"
        ) from exc
    if any(n < 0 for n in shape):
        raise InvalidProblem(f"a __cuda_array_interface__ of shape {shape}: extents are never negative")
    if typestr not in _TYPESTR:
        raise InvalidProblem(
            f"unsupported element type {typestr}; use one of {sorted(_TYPESTR.values())} "
            "(bfloat16 arrays: pass torch tensors)"
        )
    itemsize = np.dtype(typestr).itemsize
    if strides is not None and (
        len(strides) != len(shape)
        or any(stride % itemsize for stride, extent in zip(strides, shape, strict=True) if extent != 1)
        or not _c_contiguous(shape, tuple(n // itemsize for n in strides))
    ):
        raise InvalidProblem("tunebox.launch needs C-contiguous arrays")
    return DeviceArray(pointer, shape, _TYPESTR[typestr], cai.get("stream"), readonly=bool(readonly))


def misaligned(arrays: dict[str, DeviceArray]) -> tuple[str, ...]:
    """The names of the arrays whose address is not ``ALIGNMENT``-byte aligned."""
    return tuple(name for name, a in arrays.items() if a.pointer % ALIGNMENT)


def dlpack_only(obj: Any) -> bool:
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
    except (TypeError, ValueError):  # not a (device type, device id) pair
        raise InvalidProblem(f"{type(obj).__name__}.__dlpack_device__() gave no (device type, id) pair") from None
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
