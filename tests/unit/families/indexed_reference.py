"""What the gather and scatter tests share: run a family's numpy reference on hand-made inputs,
checking that it leaves its inputs alone and produces exactly one output; the compile matrix; and the
configuration and argument structs the ``rows`` template renders."""

from __future__ import annotations

import re

import numpy as np

from tunebox.dtypes import element_type
from tunebox.families.base import CType, KernelSource, config_struct


def reference_of(family, p, data: tuple[str, np.ndarray], idx, mask, output: str) -> np.ndarray:
    """``family.reference`` of ``p`` on the data buffer ``data`` (name, array), indices and an optional mask."""
    inputs = {data[0]: data[1], "idx": np.asarray(idx, dtype=np.dtype(p.index_dtype))}
    if mask is not None:
        inputs["mask"] = np.asarray(mask, dtype=np.uint8)
    before = {k: v.copy() for k, v in inputs.items()}
    out = family.reference(p, inputs)
    for k, v in before.items():
        np.testing.assert_array_equal(inputs[k], v)  # inputs are not modified
    assert set(out) == {output}
    assert out[output].dtype == data[1].dtype
    return out[output]


def compile_matrix(dtypes, index_dtypes, shift: int = 0) -> list[tuple[str, str, str, int]]:
    """(dtype, index dtype, check_bounds, vec_bytes) for every dtype x index dtype x check_bounds, the
    vector widths a dtype allows taken in turn (``shift`` rotates where the turn starts)."""
    cases = []
    for dtype in dtypes:
        widths = [v for v in (2, 4, 8, 16) if v % element_type(dtype).itemsize == 0]
        n = 0
        for index_dtype in index_dtypes:
            for check in ("true", "false"):
                cases.append((dtype, index_dtype, check, widths[(n + shift) % len(widths)]))
                n += 1
    return cases


def assert_rows_variant(
    source: KernelSource, kernel: str, element: str, index: str, rpb: int, threads: int, vec: int, check: bool
) -> None:
    """``source`` instantiates ``kernel<Cfg>`` with the ``rows`` template's struct of these members
    (and the alias ``Args`` of the kernel's argument struct)."""
    assert source.name_expression == f"{kernel}<Cfg>"
    struct = config_struct(
        {
            "E": CType(element),
            "I": CType(index),
            "RPB": rpb,
            "THREADS": threads,
            "VEC": vec,
            "CHECK": check,
            "Args": CType("Args_t"),
        }
    )
    assert source.code.endswith("\n" + struct), source.code[-300:]


def arg_members(source: KernelSource) -> list[str]:
    """The members of the argument struct ``Args_t`` a rendered variant's kernel takes, in order, as
    declared ("type name")."""
    found = re.search(r"struct Args_t \{\n(.*?)\n\};", source.code, re.S)
    assert found, "the rendered source defines no struct Args_t"
    return [line.strip().rstrip(";") for line in found.group(1).splitlines()]
