"""What tunebox.launch reads of a __cuda_array_interface__ array (CuPy), without a GPU: pointer,
shape, element type (floats, and the index and mask types of the indexed families), stream, and
clear refusals of other types and of strided arrays."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tunebox.errors import InvalidProblem
from tunebox.runtime.arrays import device_array


def cai(typestr: str, shape=(4, 3), strides=None, stream=None) -> SimpleNamespace:
    return SimpleNamespace(
        __cuda_array_interface__={
            "data": (0x7F00_0000_1000, False),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "stream": stream,
            "version": 3,
        }
    )


@pytest.mark.parametrize(
    "typestr, dtype", [("<f4", "float32"), ("<f2", "float16"), ("<i4", "int32"), ("<i8", "int64"), ("|u1", "uint8")]
)
def test_element_types(typestr: str, dtype: str) -> None:
    d = device_array(cai(typestr, stream=7))
    assert (d.pointer, d.shape, d.dtype, d.stream) == (0x7F00_0000_1000, (4, 3), dtype, 7)


def test_refusals_say_what_to_do() -> None:
    with pytest.raises(InvalidProblem, match="unsupported element type <f8.*torch tensors"):
        device_array(cai("<f8"))
    with pytest.raises(InvalidProblem, match="C-contiguous"):
        device_array(cai("<f4", strides=(4, 16)))
    assert device_array(cai("<f4", strides=(12, 4))).shape == (4, 3)  # explicit C strides are fine
    with pytest.raises(InvalidProblem, match="no __cuda_array_interface__"):
        device_array(object())


def test_the_read_only_flag_is_kept() -> None:
    """It was dropped: a read-only array passed the check that outputs are writable (DLPack's kept it)."""
    array = cai("<f4")
    array.__cuda_array_interface__["data"] = (0x7F00_0000_1000, True)
    assert device_array(array).readonly and not device_array(cai("<f4")).readonly


def test_contiguity_is_worked_out_without_a_host_array() -> None:
    """np.empty(shape) made the strides: a 37 GiB array raised MemoryError, a 2**40-square one ValueError."""
    huge = device_array(cai("<f4", shape=(2**40, 2**40), strides=(4 * 2**40, 4)))
    assert huge.shape == (2**40, 2**40)
    assert device_array(cai("<f2", shape=(5, 1, 3), strides=(6, 999, 2))).shape == (5, 1, 3)  # extent 1: any stride
    with pytest.raises(InvalidProblem, match="C-contiguous"):
        device_array(cai("<f4", shape=(4, 3), strides=(12, 3)))  # not whole elements


@pytest.mark.parametrize(
    "interface, fragment",
    [
        ({}, "malformed __cuda_array_interface__ .*KeyError"),
        (3, "malformed __cuda_array_interface__ .*TypeError"),
        ({"shape": (4,), "typestr": "<f4", "data": None}, "malformed"),
        ({"shape": (-1, 4), "typestr": "<f4", "data": (16, False)}, r"shape \(-1, 4\): extents are never negative"),
    ],
)
def test_a_malformed_interface_is_refused_saying_what_it_needs(interface: object, fragment: str) -> None:
    with pytest.raises(InvalidProblem, match=fragment):
        device_array(SimpleNamespace(__cuda_array_interface__=interface))
