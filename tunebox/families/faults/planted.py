"""The faults family's one template: ``kernels/faults/faults.cu`` with a planted misbehaviour."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..base import Arg, BufferArg, Instantiation, LaunchGeometry, ScalarArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from .operation import FaultsProblem

FAULTS = (
    "none",
    "oob_write",
    "hang",
    "wrong_value",
    "skip_element",
    "modify_input",
    "too_much_shared",
    "over_launch_bounds",
    "compile_error",
    "smem_race",
    "oob_read",
)
EXPECTED_STATUS = {
    "none": "ok",
    "oob_write": "runtime_error",
    "hang": "timeout",
    "wrong_value": "wrong_result",
    "skip_element": "wrong_result",
    "modify_input": "wrong_result",
    "too_much_shared": "resource_error",
    "over_launch_bounds": "resource_error",
    "compile_error": "compile_error",
    "smem_race": "ok",
    "oob_read": "ok",
}
# the planted faults verification accepts, and the compute-sanitizer tool that reports each
SANITIZER_FINDS = {"smem_race": "racecheck", "oob_read": "memcheck"}


@dataclass(frozen=True)
class PlantedConfig(TemplateConfig):
    block: int = choice(128, 256, doc="threads per block")
    passes: int = choice(1, 2, 4, doc="times the copy is repeated (good variants differ in speed)")
    fault: str = choice(*FAULTS, doc="the planted misbehaviour")


class PlantedTemplate(KernelTemplate[FaultsProblem, PlantedConfig]):
    name = "planted"
    config_type = PlantedConfig
    kernel = "faults/faults.cu"

    def default(self, problem: FaultsProblem) -> PlantedConfig:
        return PlantedConfig(block=256, passes=1, fault="none")

    def violations(self, problem: FaultsProblem, config: PlantedConfig) -> list[str]:
        return []

    def render(self, problem: FaultsProblem, config: PlantedConfig) -> Instantiation:
        return instantiate(
            self.kernel,
            "faulty_copy",
            {"BLOCK": config.block, "PASSES": config.passes, "FAULT": FAULTS.index(config.fault)},
        )

    def geometry(self, problem: FaultsProblem, config: PlantedConfig) -> LaunchGeometry:
        threads = 4 * config.block if config.fault == "over_launch_bounds" else config.block
        shared = 256 * 1024 if config.fault == "too_much_shared" else 0
        return LaunchGeometry((math.ceil(problem.n / config.block), 1, 1), (threads, 1, 1), shared)

    def args(self, problem: FaultsProblem, config: PlantedConfig) -> tuple[Arg, ...]:
        return (BufferArg("src", "const unsigned"), BufferArg("dst", "unsigned"), ScalarArg("i64", problem.n, "n"))
