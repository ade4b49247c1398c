"""The gather_elements family's one template: ``kernels/gather/gather_elements.cu``.

Block b covers ``threads x elems_per_thread`` consecutive elements of output row b / T (T blocks a
row); ``check_bounds = "false"`` compiles the bounds tests out (the mask, if any, is still honoured).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ...dtypes import element_type
from ...limits import MAX_GRID_X
from ...rules import Rules
from ..base import Arg, BufferArg, CType, Instantiation, LaunchGeometry, ScalarArg, instantiate
from ..contract import KernelTemplate, TemplateConfig, choice
from ..indexed import UNCHECKED_NEEDS_VALID, _warps, index_type
from .operation import ElementGatherProblem


@dataclass(frozen=True)
class ElementsConfig(TemplateConfig):
    threads: int = choice(64, 128, 256, 512, doc="threads per block")
    elems_per_thread: int = choice(1, 2, 4, 8, doc="output elements per thread (index loads issued together)")
    check_bounds: str = choice("true", "false", doc="test every index; 'false' promises all are in bounds")


def blocks(p: ElementGatherProblem, config: ElementsConfig) -> int:
    """Blocks of the grid: ceil(C / (threads x elems_per_thread)) per output row."""
    return p.tile[0] * math.ceil(p.tile[1] / (config.threads * config.elems_per_thread))


class ElementsTemplate(KernelTemplate[ElementGatherProblem, ElementsConfig]):
    name = "elements"
    config_type = ElementsConfig
    rule_names = ("threads_busy", "grid_fits", "unchecked_needs_valid")
    kernel = "gather/gather_elements.cu"

    def default(self, problem: ElementGatherProblem) -> ElementsConfig:
        threads = next(t for t in (256, 128, 64) if t <= max(64, _warps(math.ceil(problem.tile[1] / 4))))
        return ElementsConfig(threads=threads, elems_per_thread=4, check_bounds="true")

    def violations(self, problem: ElementGatherProblem, config: ElementsConfig) -> list[str]:
        threads, per_thread = config.threads, config.elems_per_thread
        rules = Rules(self.name)
        busy = _warps(math.ceil(problem.tile[1] / per_thread))
        rules.require(
            "threads_busy",
            threads <= max(64, busy),
            f"{threads} threads exceed the {busy} threads a row of {problem.tile[1]} elements at "
            f"{per_thread} per thread keeps busy",
        )
        n = blocks(problem, config)
        rules.require("grid_fits", n <= MAX_GRID_X, f"{n} blocks exceed the grid limit {MAX_GRID_X}")
        if config.check_bounds == "false":
            rules.require("unchecked_needs_valid", problem.all_valid, UNCHECKED_NEEDS_VALID)
        return rules.broken

    def render(self, problem: ElementGatherProblem, config: ElementsConfig) -> Instantiation:
        members: dict[str, int | bool | CType] = {
            "E": CType(element_type(problem.element).ctype),
            "I": CType(index_type(problem.index_dtype).ctype),
            "THREADS": config.threads,
            "EPT": config.elems_per_thread,
            "CHECK": config.check_bounds == "true",
            "BCAST": problem.broadcast,
        }
        return instantiate(self.kernel, "gather_elements" + ("_masked" if problem.mask else ""), members)

    def geometry(self, problem: ElementGatherProblem, config: ElementsConfig) -> LaunchGeometry:
        return LaunchGeometry((blocks(problem, config), 1, 1), (config.threads, 1, 1), 0)

    def args(self, problem: ElementGatherProblem, config: ElementsConfig) -> tuple[Arg, ...]:
        """The members of ``Cfg::Args``: ``A``, ``ri``, ``ci``, ``mask`` (masked kernel only), ``out``,
        then ``N``, ``D``, ``R``, ``C`` and the padding bits ``pad`` (of type ``E``)."""
        p = problem
        element, index = element_type(p.element).ctype, index_type(p.index_dtype).ctype
        mask = (BufferArg("mask", "const unsigned char"),) if p.mask else ()  # MASK_DTYPE, uint8
        pad_type: Literal["u32", "u16"] = "u32" if element_type(p.element).itemsize == 4 else "u16"
        return (
            BufferArg("A", f"const {element}"),
            BufferArg("ri", f"const {index}"),
            BufferArg("ci", f"const {index}"),
            *mask,
            BufferArg("out", element),
            *(ScalarArg("i64", v, name) for name, v in zip("NDRC", (p.rows, p.cols, *p.tile), strict=True)),
            ScalarArg(pad_type, p.pad_bits, "pad"),
        )
