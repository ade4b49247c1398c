"""Template ``vector``: ld/st vectors in registers, or staged through shared memory (``staging``), one
tile at a time (``kernels/tile_copy/tile_copy.cu``, ``tile_copy``)."""

from __future__ import annotations

from dataclasses import dataclass

from ...limits import SM_REGISTERS
from ...rules import Rules
from .operation import TileCopyProblem
from .staged import STAGED_RULES, StagedConfig, StagedTemplate, staged_block_bytes

MAX_REGISTER_BYTES = 256  # per thread in flight for the register path (64 registers)
ADDRESS_REGISTERS = 40  # registers a thread of the register path needs besides its data


@dataclass(frozen=True)
class VectorConfig(StagedConfig):
    """The staged-path parameters: the vector template has none of its own."""


class VectorTemplate(StagedTemplate[VectorConfig]):
    name = "vector"
    config_type = VectorConfig
    rule_names = (*STAGED_RULES, "transpose_needs_staging", "registers_fit")
    kernel_name = "tile_copy"

    def default(self, problem: TileCopyProblem) -> VectorConfig:
        view = self.view(problem)
        if view.transpose:
            return VectorConfig(
                BM=32, BN=64, threads=256, vec_bytes=8, tiles_per_block=1, bounds="checked", staging="padded"
            )
        if view.dst[0] == 1:  # one row (a flat view among them): tiles of one row
            return VectorConfig(
                BM=1, BN=1024, threads=128, vec_bytes=16, tiles_per_block=1, bounds="checked", staging="none"
            )
        return VectorConfig(
            BM=8, BN=256, threads=256, vec_bytes=16, tiles_per_block=1, bounds="checked", staging="none"
        )

    def transport_rules(self, rules: Rules, problem: TileCopyProblem, config: VectorConfig) -> None:
        if config.staged:
            return
        rules.require(
            "transpose_needs_staging",
            not problem.transpose,
            "a transpose needs a shared-memory staging layout, not 'none'",
        )
        budget = min(MAX_REGISTER_BYTES, 4 * (min(255, SM_REGISTERS // config.threads) - ADDRESS_REGISTERS))
        rules.require(
            "registers_fit",
            config.BM * config.BN * problem.itemsize // config.threads <= budget,
            f"more than {budget} bytes per thread in registers at {config.threads} threads",
        )

    def shared_bytes(self, problem: TileCopyProblem, config: VectorConfig) -> int:
        """The staged source block, once (none on the register path)."""
        return staged_block_bytes(problem, config)
