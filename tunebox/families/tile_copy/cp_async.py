"""Template ``cp_async``: each block's source blocks stream into a ring of ``stages`` shared buffers by
cp.async (vectors inside src and aligned; element loads with the padding elsewhere), ``stages - 1``
tiles ahead of the staged stores (``kernels/tile_copy/tile_copy.cu``, ``tile_copy_cp_async``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..base import CType
from ..contract import choice
from .operation import TileCopyProblem
from .staged import StagedConfig, StagedTemplate, staged_block_bytes
from .tiles import pipeline_violations, round_up


@dataclass(frozen=True)
class CpAsyncConfig(StagedConfig):
    """The staged-path parameters and the depth of the ring."""

    stages: int = choice(1, 2, 3, 4, doc="source blocks in flight per block: shared buffers of cp_async and tma")


class CpAsyncTemplate(StagedTemplate[CpAsyncConfig]):
    name = "cp_async"
    config_type = CpAsyncConfig
    kernel_name = "tile_copy_cp_async"

    def default(self, problem: TileCopyProblem) -> None:
        return None

    def transport_violations(self, problem: TileCopyProblem, config: CpAsyncConfig) -> list[str]:
        broken = pipeline_violations(config.stages, config.tiles_per_block)
        if not config.staged:
            broken.append("transport 'cp_async' stages through shared memory: staging must be a layout, not 'none'")
        if config.vec_bytes < 4:
            broken.append(f"cp.async moves 4, 8 or 16 bytes: vec_bytes={config.vec_bytes} is too small")
        elif config.staging in ("padded", "swizzled") and config.vec_bytes != 4:
            broken.append(
                f"staging {config.staging!r} keeps only 4-byte words together: cp.async into it needs "
                "vec_bytes=4 (or staging 'plain')"
            )
        return broken

    def shared_bytes(self, problem: TileCopyProblem, config: CpAsyncConfig) -> int:
        """The staged source block, rounded up to 16 bytes, in each of the ``stages`` buffers."""
        return config.stages * round_up(staged_block_bytes(problem, config), 16)

    def members(self, problem: TileCopyProblem, config: CpAsyncConfig) -> dict[str, int | bool | CType]:
        return {**super().members(problem, config), "STAGES": config.stages}
