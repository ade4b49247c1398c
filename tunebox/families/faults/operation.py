"""The faults operation: a copy of ``n`` 32-bit words."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import element_type, random_bits
from ...errors import InvalidProblem
from ..base import BufferSpec, Problem, Work
from ..contract import Operation


@dataclass(frozen=True)
class FaultsProblem(Problem):
    n: int

    @property
    def dtype(self) -> str:
        return "float32"

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n}


class FaultsOperation(Operation[FaultsProblem]):
    name = "faults"
    fields = {"n": "words copied, 1 .. 2^30"}

    def parse(self, data: Mapping[str, Any]) -> FaultsProblem:
        if set(data) != {"n"} or type(data["n"]) is not int or not 1 <= data["n"] <= 2**30:
            raise InvalidProblem(f"faults: a problem is {{'n': 1..2^30}}, got {dict(data)!r}")
        return FaultsProblem(data["n"])

    def buffers(self, problem: FaultsProblem) -> tuple[BufferSpec, ...]:
        return (
            BufferSpec("src", (problem.n,), "float32", "input"),
            BufferSpec("dst", (problem.n,), "float32", "output"),
        )

    def make_inputs(self, problem: FaultsProblem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"src": random_bits(element_type("float32"), (problem.n,), rng)}

    def reference(self, problem: FaultsProblem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"dst": inputs["src"].copy()}

    def work(self, problem: FaultsProblem) -> Work:
        return Work(8 * problem.n)

    def distance(self, a: FaultsProblem, b: FaultsProblem) -> float | None:
        return abs(math.log2(a.n / b.n))
