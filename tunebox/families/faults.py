"""Family ``faults`` (test-only): variants that misbehave on purpose.

A copy of ``n`` 32-bit words repeated ``passes`` times (so good variants differ in speed), whose
``fault`` parameter plants one misbehaviour: an out-of-bounds write (sticky ``runtime_error``), an
endless loop (``timeout``), a wrong value, an element never written or a modified input
(``wrong_result``), more shared memory than the device has or a launch above the kernel's launch
bounds (``resource_error``), or a compile error. Every variant passes the validity rules: the
faults must be caught by the harness, not by the rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import element_type, random_bits
from ..errors import InvalidProblem
from ..kernels_dir import kernel_source, kernels_dir
from ..params import Config, Param, Space
from .base import (
    Arg,
    BufferArg,
    BufferSpec,
    Family,
    KernelSource,
    LaunchGeometry,
    Problem,
    ScalarArg,
    Work,
    problem_as,
)

FAULTS = ("none", "oob_write", "hang", "wrong_value", "skip_element", "modify_input", "too_much_shared",
          "over_launch_bounds", "compile_error")
EXPECTED_STATUS = {"none": "ok", "oob_write": "runtime_error", "hang": "timeout", "wrong_value": "wrong_result",
                   "skip_element": "wrong_result", "modify_input": "wrong_result",
                   "too_much_shared": "resource_error", "over_launch_bounds": "resource_error",
                   "compile_error": "compile_error"}


@dataclass(frozen=True)
class FaultsProblem(Problem):
    n: int

    @property
    def dtype(self) -> str:
        return "float32"

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n}


class Faults(Family):
    name = "faults"
    space = Space((
        Param("block", (128, 256), "threads per block"),
        Param("passes", (1, 2, 4), "times the copy is repeated (good variants differ in speed)"),
        Param("fault", FAULTS, "the planted misbehaviour"),
    ))

    @property
    def source_files(self):  # type: ignore[override]
        return (kernels_dir() / "faults" / "faults.cu",)

    def parse_problem(self, data: Mapping[str, Any]) -> FaultsProblem:
        if set(data) != {"n"} or type(data["n"]) is not int or not 1 <= data["n"] <= 2**30:
            raise InvalidProblem(f"faults: a problem is {{'n': 1..2^30}}, got {dict(data)!r}")
        return FaultsProblem(data["n"])

    def default_config(self, problem: Problem) -> Config:
        return self.space.validate({"block": 256, "passes": 1, "fault": "none"})

    def violations(self, problem: Problem, config: Config) -> list[str]:
        return []

    def render(self, problem: Problem, config: Config) -> KernelSource:
        code = kernel_source("faults/faults.cu")
        fault = FAULTS.index(str(config["fault"]))
        return KernelSource(code, f"faulty_copy<{config['block']}, {config['passes']}, {fault}>", ())

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        n = _as_problem(problem).n
        block = int(config["block"])
        threads = 4 * block if config["fault"] == "over_launch_bounds" else block
        shared = 256 * 1024 if config["fault"] == "too_much_shared" else 0
        return LaunchGeometry((math.ceil(n / block), 1, 1), (threads, 1, 1), shared)

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        n = _as_problem(problem).n
        return (BufferSpec("src", (n,), "float32", "input"), BufferSpec("dst", (n,), "float32", "output"))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        return (BufferArg("src"), BufferArg("dst"), ScalarArg("i64", _as_problem(problem).n))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"src": random_bits(element_type("float32"), (_as_problem(problem).n,), rng)}

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"dst": inputs["src"].copy()}

    def work(self, problem: Problem) -> Work:
        return Work(8 * _as_problem(problem).n)

    def distance(self, a: Problem, b: Problem) -> float | None:
        return abs(math.log2(_as_problem(a).n / _as_problem(b).n))


def _as_problem(problem: Problem) -> FaultsProblem:
    return problem_as("faults", problem, FaultsProblem)
