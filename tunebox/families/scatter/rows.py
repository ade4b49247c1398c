"""scatter's one template, ``rows`` (``kernels/gather/gather.cu``): the shared row rules of
``indexed_rows``, the kernels ``scatter_rows`` / ``scatter_rows_masked``."""

from __future__ import annotations

from ..base import Arg, ScalarArg
from ..indexed_rows import RowsConfig, RowsTemplate, row_buffers
from .operation import ScatterProblem


class ScatterRows(RowsTemplate[ScatterProblem]):
    def kernel_name(self, p: ScatterProblem) -> str:
        return "scatter_rows" + ("_masked" if p.mask else "")

    def args(self, problem: ScatterProblem, config: RowsConfig) -> tuple[Arg, ...]:
        """The members of the kernel's ``Cfg::Args``: V, idx, mask (masked only), A, N, D, K, offset."""
        p = problem
        scalars = (("N", p.rows), ("D", p.cols), ("K", p.count), ("offset", p.offset))
        return (*row_buffers(p, "V", "A"), *(ScalarArg("i64", v, name) for name, v in scalars))
