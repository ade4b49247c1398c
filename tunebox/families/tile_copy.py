"""Family ``tile_copy``: bounded 2-D copy, crop, pad and transpose with padding modes.

``dst (Md, Nd) <- src (Ms, Ns)`` read at origin ``(oy, ox)`` (may be negative):
``dst[i, j] = src[oy + i, ox + j]`` or, transposed, ``src[oy + j, ox + i]``; destination elements
whose source lies outside ``src`` take the padding value. Every destination element is written.

Three transports (``transport``), so the search picks per problem:

- ``vector``: ld/st vectors in registers, or staged through shared memory (``staging``), one tile
  at a time (``kernels/tile_copy/tile_copy.cu``, ``tile_copy``).
- ``cp_async``: each block's source blocks stream into a ring of ``stages`` shared buffers by
  cp.async (vectors inside src and aligned; element loads with the padding elsewhere), ``stages - 1``
  tiles ahead of the staged stores (``tile_copy_cp_async``).
- ``tma`` (sm_90+; the kernel refuses to compile for older devices): bulk tensor loads into a ring of
  ``stages`` mbarrier-completed buffers with the ``swizzle`` layout, and bulk tensor stores that clip
  at dst's edges (``kernels/tile_copy/tile_copy_tma.cu``). The hardware fills zero outside src; a
  transposed copy or any other padding goes through an output buffer, the padding selected in
  registers. Boxes are as wide as the swizzle span (the layout ``test_tma_gpu`` checked on the H200),
  or without swizzle the whole block row up to 256 elements; the rows of src and dst and the origin's
  column must be 16-byte multiples.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import PADDING_MODES, element_type, padding_bits, random_bits
from ..errors import InvalidProblem
from ..limits import MAX_GRID_X, MAX_SHARED_BYTES
from ..parallel import filled, for_each_chunk
from ..params import Config, Param, Space
from ..tma import MAX_BOX_EXTENT, MAX_COORDINATE, MBARRIER_BYTES, SWIZZLE_BYTES, TensorMapRequest, swizzle_period
from ..tma import violations as tensor_map_violations
from .base import (
    Arg,
    Baseline,
    BufferArg,
    BufferSpec,
    Family,
    KernelSource,
    LaunchGeometry,
    Problem,
    ScalarArg,
    TensorMapArg,
    Work,
    instantiate,
    library_files,
    problem_as,
)

BOUNDS = {"checked": 0, "split": 1, "unchecked": 2}
STAGING = {"none": 0, "plain": 1, "padded": 2, "swizzled": 3}
MAX_REGISTER_BYTES = 256  # per thread in flight for the register path (64 registers)
ADDRESS_REGISTERS = 40  # registers a thread of the register path needs besides its data
MAX_SLOTS = 16  # aligned-window slots per thread and phase of the staged path (unrolled code size)
MAX_EXTENT = 2**31 - 1


@dataclass(frozen=True)
class TileCopyProblem(Problem):
    element: str
    src: tuple[int, int]
    dst: tuple[int, int]
    origin: tuple[int, int] = (0, 0)
    transpose: bool = False
    padding: str = "zero"
    pad_value: float = 0.0  # used when padding == "value"

    @property
    def dtype(self) -> str:
        return self.element

    @functools.cached_property
    def pad_bits(self) -> int:
        return padding_bits(element_type(self.element), self.padding, self.pad_value)

    def source_window(self) -> tuple[int, int, int, int]:
        """(row0, col0, rows, cols) of the source region that the destination reads."""
        rows, cols = (self.dst[1], self.dst[0]) if self.transpose else self.dst
        return self.origin[0], self.origin[1], rows, cols

    def valid_source_elements(self) -> int:
        r0, c0, h, w = self.source_window()
        rows = max(0, min(r0 + h, self.src[0]) - max(r0, 0))
        cols = max(0, min(c0 + w, self.src[1]) - max(c0, 0))
        return rows * cols

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"dtype": self.element, "src": list(self.src), "dst": list(self.dst),
                             "origin": list(self.origin), "transpose": self.transpose,
                             "padding": self.padding}
        if self.padding == "value":
            d["pad_value"] = self.pad_value
        return d


def _pair(data: Mapping[str, Any], key: str, low: int, default: tuple[int, int] | None = None
          ) -> tuple[int, int]:
    value = data.get(key, default)
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(type(v) is int for v in value)):
        raise InvalidProblem(f"tile_copy: {key} must be two integers, got {value!r}")
    if not all(low <= v <= MAX_EXTENT for v in value):
        raise InvalidProblem(f"tile_copy: {key} {list(value)} must lie in [{low}, {MAX_EXTENT}]")
    return value[0], value[1]


class TileCopy(Family):
    name = "tile_copy"
    space = Space((
        Param("BM", (1, 2, 4, 8, 16, 32, 64, 128), "destination tile rows"),
        Param("BN", (8, 16, 32, 64, 128, 256, 512, 1024), "destination tile columns"),
        Param("threads", (64, 128, 256, 512, 1024), "threads per block"),
        Param("vec_bytes", (2, 4, 8, 16), "bytes per vector access"),
        Param("bounds", tuple(BOUNDS), "checked: every tile; split: edge tiles only; unchecked"),
        Param("staging", tuple(STAGING), "none: registers only (tma: its own layout); else the shared-memory layout"),
        Param("tiles_per_block", (1, 2, 4, 8, 16), "consecutive tiles each block processes"),
        Param("transport", ("vector", "cp_async", "tma"), "ld/st vectors; cp.async ring; TMA loads and stores"),
        Param("swizzle", tuple(SWIZZLE_BYTES), "shared-memory swizzle of the TMA boxes (transport tma only)"),
        Param("stages", (1, 2, 3, 4), "source blocks in flight per block: shared buffers of cp_async and tma"),
    ))

    @property
    def source_files(self):  # type: ignore[override]
        return library_files("tile_copy/tile_copy.cu", "tile_copy/tile_copy_tma.cu", "include/tunebox/async_copy.cuh",
                             "include/tunebox/tma.cuh")

    def parse_problem(self, data: Mapping[str, Any]) -> TileCopyProblem:
        known = {"dtype", "src", "dst", "origin", "transpose", "padding", "pad_value"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidProblem(f"tile_copy: unknown problem key(s) {unknown}; known: {sorted(known)}")
        element_type(data.get("dtype"))
        src = _pair(data, "src", 1)
        dst = _pair(data, "dst", 1)
        origin = _pair(data, "origin", -MAX_EXTENT, (0, 0))
        transpose = data.get("transpose", False)
        if not isinstance(transpose, bool):
            raise InvalidProblem(f"tile_copy: transpose must be true or false, got {transpose!r}")
        padding = data.get("padding", "zero")
        if padding not in PADDING_MODES:
            raise InvalidProblem(f"tile_copy: unknown padding {padding!r}; use one of {PADDING_MODES}")
        pad_value = data.get("pad_value", 0.0)
        if type(pad_value) not in (int, float) or (padding != "value" and "pad_value" in data):
            raise InvalidProblem("tile_copy: pad_value must be a number, given only with padding='value'")
        for extent in (src, dst):
            if extent[0] * extent[1] >= 2**40:
                raise InvalidProblem(f"tile_copy: {list(extent)} has too many elements (limit 2^40)")
        try:
            pad_value = float(pad_value)
        except OverflowError:
            raise InvalidProblem(f"tile_copy: pad_value {pad_value} is too large for a float") from None
        return TileCopyProblem(data["dtype"], src, dst, origin, transpose, padding, pad_value)

    def default_config(self, problem: Problem) -> Config:
        p = _as_problem(problem)
        if p.transpose:
            values = {"BM": 32, "BN": 64, "threads": 256, "vec_bytes": 8, "staging": "padded"}
        else:
            values = {"BM": 8, "BN": 256, "threads": 256, "vec_bytes": 16, "staging": "none"}
        return self.space.validate({**values, "bounds": "checked", "tiles_per_block": 1, "transport": "vector",
                                    "swizzle": "none", "stages": 1})

    def violations(self, problem: Problem, config: Config) -> list[str]:
        p = _as_problem(problem)
        et = element_type(p.element)
        bm, bn, threads = int(config["BM"]), int(config["BN"]), int(config["threads"])
        vec_bytes = int(config["vec_bytes"])
        if vec_bytes % et.itemsize:
            return [f"vec_bytes={vec_bytes} is not a multiple of the {et.itemsize}-byte element"]
        vec = vec_bytes // et.itemsize
        broken = []
        if bn % vec or (p.transpose and bm % vec):
            broken.append(f"a vector of {vec} elements must divide BN (and BM when transposed)")
        vectors = bm * bn // vec
        if vectors < threads or vectors % threads:
            broken.append(f"the tile's {vectors} vectors must split evenly over {threads} threads")
        broken += self._pipeline_violations(config)
        transport = config["transport"]
        if transport == "tma":
            broken += self._tma_violations(p, config)
        else:
            broken += self._staging_violations(p, config)
        shared = _shared_bytes(p, config)
        if shared > MAX_SHARED_BYTES:
            broken.append(f"{shared} bytes of shared memory exceed {MAX_SHARED_BYTES}")
        blocks = self.geometry(p, config).grid[0]
        if blocks > MAX_GRID_X:
            broken.append(f"{blocks} blocks exceed the grid limit {MAX_GRID_X}: use larger tiles")
        if config["bounds"] == "unchecked" and not self._every_tile_full(p, bm, bn, vec):
            broken.append("bounds='unchecked' needs every tile full, inside src and aligned")
        return broken

    @staticmethod
    def _pipeline_violations(config: Config) -> list[str]:
        """Rules of the parameters that only some transports use."""
        transport, stages = config["transport"], int(config["stages"])
        broken = []
        if transport != "tma" and config["swizzle"] != "none":
            broken.append(f"swizzle is the layout of TMA boxes: transport {transport!r} takes swizzle='none'")
        if transport == "vector" and stages != 1:
            broken.append("transport 'vector' moves one tile at a time: stages=1")
        if stages > int(config["tiles_per_block"]):
            broken.append(f"stages={stages} exceeds tiles_per_block={config['tiles_per_block']}: a block never has "
                          "more source blocks in flight than it copies")
        return broken

    @staticmethod
    def _staging_violations(p: TileCopyProblem, config: Config) -> list[str]:
        """Rules of the vector and cp_async transports."""
        et = element_type(p.element)
        bm, bn, threads = int(config["BM"]), int(config["BN"]), int(config["threads"])
        vec_bytes = int(config["vec_bytes"])
        vec = vec_bytes // et.itemsize
        staged = config["staging"] != "none"
        broken = []
        if config["transport"] == "cp_async":
            if not staged:
                broken.append("transport 'cp_async' stages through shared memory: staging must be a layout, not "
                              "'none'")
            if vec_bytes < 4:
                broken.append(f"cp.async moves 4, 8 or 16 bytes: vec_bytes={vec_bytes} is too small")
            elif config["staging"] in ("padded", "swizzled") and vec_bytes != 4:
                broken.append(f"staging {config['staging']!r} keeps only 4-byte words together: cp.async into it "
                              "needs vec_bytes=4 (or staging 'plain')")
        elif p.transpose and not staged:
            broken.append("a transpose needs a shared-memory staging layout, not 'none'")
        if staged:
            rows, width = (bn, bm) if p.transpose else (bm, bn)
            slots = -(-rows * (width // vec + 1) // threads)
            if slots > MAX_SLOTS:
                broken.append(f"{slots} aligned-window slots per thread exceed {MAX_SLOTS}")
        elif config["transport"] == "vector":
            budget = min(MAX_REGISTER_BYTES, 4 * (min(255, 65536 // threads) - ADDRESS_REGISTERS))
            if bm * bn * et.itemsize // threads > budget:
                broken.append(f"more than {budget} bytes per thread in registers at {threads} threads")
        return broken

    @staticmethod
    def _tma_violations(p: TileCopyProblem, config: Config) -> list[str]:
        """Rules of the tma transport: its own canonical settings, whole boxes, 16-byte coordinates,
        32-bit coordinates and the driver's rules of both tensor maps."""
        size = element_type(p.element).itemsize
        bm, bn = int(config["BM"]), int(config["BN"])
        layout = _tma_layout(p, config)
        width = bm if p.transpose else bn
        broken = []
        if config["staging"] != "none" or config["bounds"] != "checked":
            broken.append("transport 'tma' has its own layout (swizzle) and clips and fills in hardware: "
                          "staging='none', bounds='checked'")
        if width % layout.box or bn % layout.out_box:
            broken.append(f"swizzle {config['swizzle']} moves boxes {layout.box} elements wide: the source block's "
                          f"{width} and the tile's {bn} columns must be whole boxes")
        if p.origin[1] * size % 16:
            broken.append(f"TMA boxes start at 16-byte multiples of a row: origin column {p.origin[1]} x {size} "
                          "bytes is not one")
        last = max(_last_tma_coordinates(p, config, layout))
        if last > MAX_COORDINATE:
            broken.append(f"TMA coordinates are 32-bit: a box would start at {last} (at most {MAX_COORDINATE})")
        if not broken:
            for arg in _tensor_maps(p, config):
                broken += [f"tensor map of {arg.buffer}: {b}" for b in
                           tensor_map_violations(dataclasses.replace(arg.request, address=256))]
        return broken

    @staticmethod
    def _every_tile_full(p: TileCopyProblem, bm: int, bn: int, vec: int) -> bool:
        r0, c0, h, w = p.source_window()
        inside = r0 >= 0 and c0 >= 0 and r0 + h <= p.src[0] and c0 + w <= p.src[1]
        aligned = p.src[1] % vec == 0 and c0 % vec == 0 and p.dst[1] % vec == 0
        return inside and aligned and p.dst[0] % bm == 0 and p.dst[1] % bn == 0

    def render(self, problem: Problem, config: Config) -> KernelSource:
        p = _as_problem(problem)
        et = element_type(p.element)
        vec = int(config["vec_bytes"]) // et.itemsize
        head = (et.ctype, config["BM"], config["BN"], config["threads"], vec)
        transpose = str(p.transpose).lower()
        if config["transport"] == "tma":
            layout = _tma_layout(p, config)
            targs = (*head, config["tiles_per_block"], config["stages"], layout.span, layout.box, layout.out_box,
                     str(layout.direct).lower(), transpose)
            return instantiate("tile_copy/tile_copy_tma.cu", "tile_copy_tma", targs)
        modes = (BOUNDS[str(config["bounds"])], STAGING[str(config["staging"])], config["tiles_per_block"])
        if config["transport"] == "cp_async":
            return instantiate("tile_copy/tile_copy.cu", "tile_copy_cp_async",
                               (*head, *modes, config["stages"], transpose))
        return instantiate("tile_copy/tile_copy.cu", "tile_copy", (*head, *modes, transpose))

    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry:
        p = _as_problem(problem)
        tiles = self._tiles(p, config)
        per_block = int(config["tiles_per_block"])
        return LaunchGeometry((math.ceil(tiles[0] * tiles[1] / per_block), 1, 1),
                              (int(config["threads"]), 1, 1), _shared_bytes(p, config))

    @staticmethod
    def _tiles(p: TileCopyProblem, config: Config) -> tuple[int, int]:
        return math.ceil(p.dst[0] / int(config["BM"])), math.ceil(p.dst[1] / int(config["BN"]))

    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]:
        p = _as_problem(problem)
        return (BufferSpec("src", p.src, p.element, "input"),
                BufferSpec("dst", p.dst, p.element, "output"))

    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]:
        """vector, cp_async: (src, dst, Ms, Ns, Md, Nd, oy, ox, pad, tiles_n, n_tiles); tma: the two
        tensor maps for src and dst, then Ms, Ns, oy, ox, pad, tiles_n, n_tiles."""
        p = _as_problem(problem)
        tiles_m, tiles_n = self._tiles(p, config)
        pad = ScalarArg("u32" if element_type(p.element).itemsize == 4 else "u16", p.pad_bits)
        tiles = (ScalarArg("i64", tiles_n), ScalarArg("i64", tiles_m * tiles_n))
        if config["transport"] == "tma":
            return (*_tensor_maps(p, config), *(ScalarArg("i64", v) for v in (*p.src, *p.origin)), pad, *tiles)
        scalars = (*p.src, *p.dst, *p.origin)
        return (BufferArg("src"), BufferArg("dst"), *(ScalarArg("i64", v) for v in scalars), pad, *tiles)

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        p = _as_problem(problem)
        return {"src": random_bits(element_type(p.element), p.src, rng)}

    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = _as_problem(problem)
        src = inputs["src"]
        out = filled(p.dst, p.pad_bits, src.dtype)
        r0, c0, h, w = p.source_window()
        rows = slice(max(r0, 0), min(r0 + h, p.src[0]))
        cols = slice(max(c0, 0), min(c0 + w, p.src[1]))
        if rows.start < rows.stop and cols.start < cols.stop:
            block = src[rows, cols]
            dst_rows = slice(rows.start - r0, rows.stop - r0)
            dst_cols = slice(cols.start - c0, cols.stop - c0)
            if p.transpose:
                _transpose_into(out[dst_cols, dst_rows], block)
            else:
                out[dst_rows, dst_cols] = block
        return {"dst": out}

    def work(self, problem: Problem) -> Work:
        p = _as_problem(problem)
        size = element_type(p.element).itemsize
        return Work((p.valid_source_elements() + p.dst[0] * p.dst[1]) * size)

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> TileCopyProblem:
        src, dst = arrays["src"], arrays["dst"]
        if src.dtype != dst.dtype:
            raise InvalidProblem(f"tile_copy: src is {src.dtype} but dst is {dst.dtype}")
        return self.parse_problem({"dtype": src.dtype, "src": list(src.shape), "dst": list(dst.shape),
                                   **options})

    def torch_baseline(self, problem: Problem) -> Baseline:
        import torch
        import torch.nn.functional as F

        p = _as_problem(problem)
        dtype = getattr(torch, p.element)
        r0, c0, h, w = p.source_window()
        whole = (r0, c0, h, w) == (0, 0, *p.src)
        et = element_type(p.element)
        pad_value = et.decode(np.array([p.pad_bits], dtype=et.storage))[0]
        pads = (-c0, c0 + w - p.src[1], -r0, r0 + h - p.src[0])
        outputs: dict[str, Any] = {}

        def copy_into(src):
            if "dst" not in outputs:
                outputs["dst"] = torch.empty(p.dst, dtype=dtype, device=src.device)
            outputs["dst"].copy_(src)
            return outputs

        if whole and not p.transpose:
            return Baseline("torch: b.copy_(a)", lambda t: copy_into(t["src"].view(dtype)))
        if whole:
            return Baseline("torch: b.copy_(a.t())", lambda t: copy_into(t["src"].view(dtype).t()))
        suffix = ".t().contiguous()" if p.transpose else ""

        def padded(t):
            out = F.pad(t["src"].view(dtype), pads, value=float(pad_value))
            return {"dst": out.t().contiguous() if p.transpose else out}

        return Baseline(f"torch: F.pad(a, {pads}, value={pad_value}){suffix}", padded)

    def distance(self, a: Problem, b: Problem) -> float | None:
        pa, pb = _as_problem(a), _as_problem(b)
        if (pa.element, pa.transpose) != (pb.element, pb.transpose):
            return None
        return sum(abs(math.log2(x / y)) for x, y in zip(pa.src + pa.dst, pb.src + pb.dst, strict=True))


def _shared_bytes(p: TileCopyProblem, config: Config) -> int:
    """Dynamic shared memory per block: for tma its layout's; for the staged paths the source block
    (BN x BM when transposed, else BM x BN) with the row pitch of staged_pitch (tile_copy.cu), once for vector,
    in each of the ``stages`` buffers (rounded up to 16 bytes) for cp_async."""
    if config["transport"] == "tma":
        return _tma_layout(p, config).shared_bytes
    if config["staging"] == "none":
        return 0
    itemsize = element_type(p.element).itemsize
    rows, width = (int(config["BN"]), int(config["BM"])) if p.transpose else (int(config["BM"]), int(config["BN"]))
    pad = (1 if itemsize >= 4 else 4 // itemsize) if config["staging"] == "padded" else 0
    block = rows * (width + pad) * itemsize
    return int(config["stages"]) * _round_up(block, 16) if config["transport"] == "cp_async" else block


@dataclass(frozen=True)
class _TmaLayout:
    """How transport tma moves a tile (kernels/tile_copy/tile_copy_tma.cu): boxes of the source
    block's rows x ``box`` elements and of the tile's BM rows x ``out_box``, each box's shared memory
    aligned to the swizzle period."""

    span: int  # swizzle span in bytes, 0 for none
    box: int  # inner extent of a source box (elements)
    out_box: int  # inner extent of a destination box (elements)
    direct: bool  # not transposed, zero padding: the loaded boxes are stored as they are
    shared_bytes: int  # alignment slack, the stages' input buffers, the output buffers, the mbarriers


def _tma_layout(p: TileCopyProblem, config: Config) -> _TmaLayout:
    size = element_type(p.element).itemsize
    bm, bn = int(config["BM"]), int(config["BN"])
    height, width = (bn, bm) if p.transpose else (bm, bn)
    span = SWIZZLE_BYTES[str(config["swizzle"])]
    box, out_box = (span // size,) * 2 if span else (min(width, MAX_BOX_EXTENT), min(bn, MAX_BOX_EXTENT))
    direct = not p.transpose and p.pad_bits == 0
    period = swizzle_period(span)
    stages, tiles = int(config["stages"]), int(config["tiles_per_block"])
    in_bytes = width // box * _round_up(height * box * size, period)
    out_bytes = bn // out_box * _round_up(bm * out_box * size, period)
    out_buffers = 0 if direct else min(2, tiles)
    shared = period + stages * in_bytes + out_buffers * out_bytes + stages * MBARRIER_BYTES
    return _TmaLayout(span, box, out_box, direct, shared)


def _tensor_maps(p: TileCopyProblem, config: Config) -> tuple[TensorMapArg, TensorMapArg]:
    """Tensor maps of src (boxes of the source block's rows x box) and dst (BM x out_box), the
    address filled in at launch."""
    size = element_type(p.element).itemsize
    layout = _tma_layout(p, config)
    height = int(config["BN"]) if p.transpose else int(config["BM"])
    swizzle = str(config["swizzle"])
    src = TensorMapRequest(p.element, p.src, (p.src[1] * size, size), (height, layout.box), 0, swizzle)
    dst = TensorMapRequest(p.element, p.dst, (p.dst[1] * size, size), (int(config["BM"]), layout.out_box), 0, swizzle)
    return TensorMapArg("src", src), TensorMapArg("dst", dst)


def _last_tma_coordinates(p: TileCopyProblem, config: Config, layout: _TmaLayout) -> tuple[int, int]:
    """The largest (column, row) coordinate at which a source box starts (destination boxes start
    inside dst, whose extents are below 2^31)."""
    bm, bn = int(config["BM"]), int(config["BN"])
    tiles_m, tiles_n = math.ceil(p.dst[0] / bm), math.ceil(p.dst[1] / bn)
    (rows, height), (cols, width) = ((tiles_n, bn), (tiles_m, bm)) if p.transpose else ((tiles_m, bm), (tiles_n, bn))
    return p.origin[1] + cols * width - layout.box, p.origin[0] + (rows - 1) * height


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _as_problem(problem: Problem) -> TileCopyProblem:
    return problem_as("tile_copy", problem, TileCopyProblem)


def _transpose_into(out: np.ndarray, block: np.ndarray, rows_per_pass: int = 128) -> None:
    """``out[:] = block.T`` in bands of source rows, on all cores: each band's writes stay within a
    cache-sized strip of ``out`` (about 4x faster than one strided copy on one core)."""
    def band(start: int, stop: int) -> None:
        out[:, start:stop] = block[start:stop].T

    for_each_chunk(block.shape[0], rows_per_pass, band)
