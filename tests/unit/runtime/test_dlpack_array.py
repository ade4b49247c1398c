"""What tunebox.launch reads of a DLPack producer (issue 19, item 8), without a GPU: a fake producer
builds its capsule with ctypes (DLManagedTensor, and DLManagedTensorVersioned of DLPack 1.x) on a
CUDA device; ``device_array`` reads pointer (plus byte offset), shape, element type and strides
from it, asks for the caller's stream, refuses what tunebox cannot run on, and leaves the capsule
unconsumed. Torch tensors and ``__cuda_array_interface__`` objects keep their own paths."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tunebox.errors import InvalidProblem
from tunebox.runtime.arrays import device_array
from tunebox.runtime.launch import Launcher

KDL_CPU, KDL_CUDA = 1, 2
INT, UINT, FLOAT, BFLOAT, BOOL = 0, 1, 2, 4, 6
ADDRESS = 0x7F00_0000_1000


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capsule_name = ctypes.pythonapi.PyCapsule_GetName
capsule_name.restype = ctypes.c_char_p
capsule_name.argtypes = [ctypes.py_object]
NAMES = {False: ctypes.create_string_buffer(b"dltensor"), True: ctypes.create_string_buffer(b"dltensor_versioned")}


class Producer:
    """A DLPack producer of one array: its capsule (no destructor: the producer owns the struct) and
    the arguments of every ``__dlpack__`` call. ``legacy``: a producer from before DLPack 1.0 (no
    ``max_version``, an unversioned capsule)."""

    def __init__(
        self,
        shape: tuple[int, ...] = (4, 3),
        code: int = FLOAT,
        bits: int = 32,
        strides: tuple[int, ...] | None = None,
        device: int = KDL_CUDA,
        byte_offset: int = 0,
        lanes: int = 1,
        legacy: bool = False,
        version: tuple[int, int] = (1, 0),
        flags: int = 0,
    ) -> None:
        self._shape = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        self._strides = (ctypes.c_int64 * max(1, len(shape)))(*strides) if strides is not None else None
        self.legacy = legacy
        self.managed: Any = DLManagedTensor() if legacy else DLManagedTensorVersioned()
        if not legacy:
            self.managed.version = DLPackVersion(*version)
            self.managed.flags = flags
        t = self.managed.dl_tensor
        t.data, t.device, t.ndim = ADDRESS, DLDevice(device, 0), len(shape)
        t.dtype = DLDataType(code, bits, lanes)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        self.device = device
        self.calls: list[dict[str, Any]] = []
        self.capsules: list[object] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device, 0

    def __dlpack__(self, *, stream: int | None = None, **kwargs: Any) -> object:
        if self.legacy and kwargs:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument {next(iter(kwargs))!r}")
        self.calls.append({"stream": stream, **kwargs})
        name = ctypes.addressof(NAMES[not self.legacy])
        capsule = capsule_new(ctypes.addressof(self.managed), ctypes.cast(name, ctypes.c_char_p), None)
        self.capsules.append(capsule)
        return capsule


@pytest.mark.parametrize("legacy", [False, True], ids=["versioned", "legacy"])
@pytest.mark.parametrize(
    ("code", "bits", "dtype"),
    [
        (FLOAT, 32, "float32"),
        (FLOAT, 16, "float16"),
        (BFLOAT, 16, "bfloat16"),
        (INT, 32, "int32"),
        (INT, 64, "int64"),
        (UINT, 8, "uint8"),
    ],
)
def test_element_types_pointer_and_shape(legacy: bool, code: int, bits: int, dtype: str) -> None:
    producer = Producer((4, 3), code, bits, legacy=legacy)
    d = device_array(producer)
    assert (d.pointer, d.shape, d.dtype, d.stream) == (ADDRESS, (4, 3), dtype, None)
    if legacy:
        assert producer.calls == [{"stream": 1}]  # after a first call with max_version raised TypeError
    else:
        assert producer.calls == [{"stream": 1, "max_version": (1, 0)}]


@pytest.mark.parametrize("legacy", [False, True], ids=["versioned", "legacy"])
def test_the_capsule_is_read_not_consumed(legacy: bool) -> None:
    """Its name stays ``dltensor`` / ``dltensor_versioned``: dropping it gives the tensor back."""
    producer = Producer(legacy=legacy)
    device_array(producer)
    assert capsule_name(producer.capsules[-1]) == (b"dltensor" if legacy else b"dltensor_versioned")


def test_byte_offset_and_shapes_of_every_rank() -> None:
    assert device_array(Producer((4, 3), byte_offset=256)).pointer == ADDRESS + 256
    assert device_array(Producer((2, 8, 3, 16), FLOAT, 16)).shape == (2, 8, 3, 16)
    assert device_array(Producer((7,), INT, 64)).shape == (7,)
    assert device_array(Producer((), FLOAT, 32)).shape == ()


@pytest.mark.parametrize(
    ("shape", "strides"),
    [
        ((4, 3), (3, 1)),  # explicit C strides
        ((4, 1), (1, 7)),  # an extent-1 dimension's stride is never used
        ((1, 5), (99, 1)),
        ((0, 3), (1, 1)),  # empty
        ((2, 8, 3, 16), (384, 48, 16, 1)),
    ],
)
def test_contiguous_strides_are_accepted(shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    assert device_array(Producer(shape, strides=strides)).shape == shape


@pytest.mark.parametrize(
    ("shape", "strides"),
    [((4, 3), (1, 4)), ((4, 3), (4, 1)), ((4, 3), (6, 2)), ((2, 8, 3), (48, 3, 1))],
    ids=["transposed", "padded-rows", "every-other", "3d-gap"],
)
def test_strided_arrays_are_refused(shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    with pytest.raises(InvalidProblem, match=r"C-contiguous arrays; this one has strides \["):
        device_array(Producer(shape, strides=strides))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"device": KDL_CPU}, "on the CPU (DLPack device type 1, not 2): move it to the GPU first"),
        ({"device": 3}, "CUDA host (pinned) memory"),
        ({"code": FLOAT, "bits": 64}, "unsupported element type float64; use one of"),
        ({"code": BOOL, "bits": 8}, "unsupported element type bool8"),
        ({"code": FLOAT, "bits": 32, "lanes": 4}, "unsupported element type float32x4"),
        ({"version": (2, 0)}, "exports DLPack 2.0; tunebox reads DLPack 1.x"),
    ],
)
def test_refusals_say_what_to_do(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidProblem) as info:
        device_array(Producer(**kwargs))
    assert fragment in str(info.value)


def test_the_producer_is_asked_for_the_launch_stream() -> None:
    """DLPack's CUDA streams: 1 is the legacy default (what a launch without a stream uses), 0 is
    never passed; any other handle as it is."""
    for stream, asked in ((None, 1), (0, 1), (2, 2), (0x5555_0000, 0x5555_0000)):
        producer = Producer()
        device_array(producer, stream)
        assert producer.calls[-1]["stream"] == asked


def test_other_kinds_keep_their_paths() -> None:
    """An object with both a CUDA array interface and __dlpack__ (CuPy) is read through the former."""
    producer = Producer()
    cai = {"data": (ADDRESS + 64, False), "shape": (2, 2), "typestr": "<f4", "strides": None, "stream": 7}
    both = SimpleNamespace(__cuda_array_interface__=cai, __dlpack__=producer.__dlpack__)
    d = device_array(both)
    assert (d.pointer, d.shape, d.dtype, d.stream) == (ADDRESS + 64, (2, 2), "float32", 7)
    assert producer.calls == []
    with pytest.raises(InvalidProblem, match="no __cuda_array_interface__ and no __dlpack__"):
        device_array(object())
    with pytest.raises(InvalidProblem, match="ndarray is on the CPU"):  # a real producer: numpy's
        device_array(np.zeros((4, 3), np.float32))
    with pytest.raises(InvalidProblem, match="has __dlpack__ but no __dlpack_device__"):
        device_array(SimpleNamespace(__dlpack__=producer.__dlpack__))


def test_launch_describes_dlpack_arrays_on_the_stream_of_the_others(tmp_path: Path) -> None:
    """Without ``stream=``, the launch runs on a CUDA array's own stream (7 here), and the DLPack
    producer is asked to make its data ready there; the arrays then reach the family (whose refusal
    of mixed element types stops this CPU test before CUDA is needed)."""
    cai = {"data": (ADDRESS, False), "shape": (4, 3), "typestr": "<f4", "strides": None, "stream": 7, "version": 3}
    dst = Producer((4, 3), FLOAT, 16)
    with pytest.raises(InvalidProblem, match="tile_copy: src is float32 but dst is float16"):
        Launcher(tmp_path / "absent.sqlite")(
            "tile_copy", {"src": SimpleNamespace(__cuda_array_interface__=cai), "dst": dst}
        )
    assert dst.calls[-1]["stream"] == 7
    explicit = Producer((4, 3), FLOAT, 16)
    with pytest.raises(InvalidProblem, match="src is float32 but dst is float16"):
        Launcher(tmp_path / "absent.sqlite")(
            "tile_copy", {"src": SimpleNamespace(__cuda_array_interface__=cai), "dst": explicit}, stream=0x1234
        )
    assert explicit.calls[-1]["stream"] == 0x1234


def test_a_read_only_array_is_never_written(tmp_path: Path) -> None:
    """DLPack 1.x's read-only flag: fine for an input, refused for an output before CUDA is needed."""
    assert device_array(Producer(flags=1)).readonly and not device_array(Producer()).readonly
    src, dst = Producer((4, 3), flags=1), Producer((4, 3), flags=1)
    with pytest.raises(InvalidProblem, match="tile_copy: dst is written, but its producer exported it read-only"):
        Launcher(tmp_path / "absent.sqlite")("tile_copy", {"src": src, "dst": dst})


def test_a_producer_that_cannot_export_is_refused() -> None:
    def refuse(**kwargs: Any) -> object:
        raise BufferError("strided arrays cannot be exported")

    stuck = SimpleNamespace(__dlpack__=refuse, __dlpack_device__=lambda: (KDL_CUDA, 0))
    with pytest.raises(InvalidProblem, match="refused to export itself through DLPack: strided arrays"):
        device_array(stuck)
