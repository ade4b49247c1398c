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
