"""Template ``cp_async``: each block's source blocks stream into a ring of ``stages`` shared buffers by
cp.async (vectors inside src and aligned; element loads with the padding elsewhere), ``stages - 1``
tiles ahead of the staged stores (``kernels/tile_copy/tile_copy.cu``, ``tile_copy_cp_async``)."""

from __future__ import annotations

from dataclasses import dataclass

from ...rules import Rules
from ..base import CType
from ..contract import choice
from .operation import TileCopyProblem
from .staged import STAGED_RULES, StagedConfig, StagedTemplate, staged_block_bytes
from .tiles import pipeline_rule, round_up


@dataclass(frozen=True)
class CpAsyncConfig(StagedConfig):
    """The staged-path parameters and the depth of the ring."""

    stages: int = choice(1, 2, 3, 4, doc="source blocks in flight per block: shared buffers of cp_async and tma")


class CpAsyncTemplate(StagedTemplate[CpAsyncConfig]):
    name = "cp_async"
    config_type = CpAsyncConfig
    rule_names = (
        *STAGED_RULES,
        "stages_within_tiles",
        "cp_async_needs_staging",
        "cp_async_vector_width",
        "staging_keeps_words",
    )
    kernel_name = "tile_copy_cp_async"

    def default(self, problem: TileCopyProblem) -> None:
        return None

    def transport_rules(self, rules: Rules, problem: TileCopyProblem, config: CpAsyncConfig) -> None:
        pipeline_rule(rules, config.stages, config.tiles_per_block)
        rules.require(
            "cp_async_needs_staging",
            config.staged,
            "transport 'cp_async' stages through shared memory: staging must be a layout, not 'none'",
        )
        if rules.require(
            "cp_async_vector_width",
            config.vec_bytes >= 4,
            f"cp.async moves 4, 8 or 16 bytes: vec_bytes={config.vec_bytes} is too small",
        ) and config.staging in ("padded", "swizzled"):
            rules.require(
                "staging_keeps_words",
                config.vec_bytes == 4,
                f"staging {config.staging!r} keeps only 4-byte words together: cp.async into it needs "
                "vec_bytes=4 (or staging 'plain')",
            )

    def shared_bytes(self, problem: TileCopyProblem, config: CpAsyncConfig) -> int:
        """The staged source block, rounded up to 16 bytes, in each of the ``stages`` buffers."""
        return config.stages * round_up(staged_block_bytes(problem, config), 16)

    def members(self, problem: TileCopyProblem, config: CpAsyncConfig) -> dict[str, int | bool | CType]:
        return {**super().members(problem, config), "STAGES": config.stages}
