"""What the gather and scatter reference tests share: run a family's numpy reference on hand-made
inputs, checking that it leaves its inputs alone and produces exactly one output."""

from __future__ import annotations

import numpy as np


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
