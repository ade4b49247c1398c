"""gemm's cluster template against the persistent one at the same tiles (issue 20): each kernel's time
at several grid sizes (blocks launched, whole clusters; median of 30 launches, L2 flushed before each,
not verified: the GPU tests verify these kernels), and the driver's count of clusters that run at once
(cuOccupancyMaxActiveClusters through cuda.core), whence limits.CLUSTERS_AT_ONCE.

    python scripts/cluster_grid.py OUT.json

Needs a GPU and torch.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch
from cuda.core import LaunchConfig, Stream
from serving_benchmark import median_ms, tensors  # scripts/, beside this one

from tunebox.cuda_api import kernel_launcher, pack
from tunebox.families import get
from tunebox.runtime.launch import Launcher

GEMM = get("gemm")
COMMON = {"raster": "m", "group": 8, "epilogue": "tma", "producer_registers": 40, "consumer_registers": 232}
CASES = [  # (problem, tile), each run by the persistent template and by every cluster shape
    ({"M": 1024, "N": 1024, "K": 4096}, {"BM": 64, "BN": 128, "stages": 6, "schedule": "pingpong"}),
    ({"M": 2048, "N": 2048, "K": 2048}, {"BM": 128, "BN": 256, "stages": 4, "schedule": "cooperative"}),
    ({"M": 4096, "N": 4096, "K": 4096}, {"BM": 128, "BN": 256, "stages": 4, "schedule": "cooperative"}),
    ({"M": 3000, "N": 5000, "K": 1000}, {"BM": 128, "BN": 256, "stages": 4, "schedule": "cooperative"}),
]
CLUSTERS = {None: 1, "2x1": 2, "1x2": 2, "2x2": 4}  # cluster shape -> blocks
SAMPLES = 30  # flushed launches a median
GRIDS = (32, 48, 56, 60, 64, 66, 120, 128, 132)  # blocks, rounded down to whole clusters


def measure(launcher: Launcher, stream: Any, shape: dict, tile: dict, cluster: str | None) -> dict[str, Any] | None:
    problem = GEMM.parse_problem(shape)
    values = {"template": "cluster" if cluster else "persistent", **COMMON, **tile, "splits": 1}
    config = GEMM.config({**values, "cluster": cluster} if cluster else values)
    if GEMM.violations(problem, config):
        return None
    arrays, _ = tensors(GEMM, problem, seed=1)
    pointers = {name: t.data_ptr() for name, t in arrays.items()}
    ((kernel, geometry, args),) = launcher.steps(GEMM, problem, config)
    size = CLUSTERS[cluster]
    launch = LaunchConfig(
        grid=geometry.grid,
        cluster=(size, 1, 1) if size > 1 else None,
        block=geometry.block,
        shmem_size=geometry.shared_bytes,
    )
    times = {}
    for blocks in sorted({geometry.grid[0], *(g // size * size for g in GRIDS)}):
        if not 0 < blocks <= geometry.grid[0]:
            continue
        run = kernel_launcher(stream, kernel, dataclasses.replace(geometry, grid=(blocks, 1, 1)), pack(args, pointers))
        run()
        torch.cuda.synchronize()
        times[blocks] = round(median_ms(run, SAMPLES) * 1e3, 1)
    return {
        "shape": shape,
        "config": config.label(),
        "grid": geometry.grid[0],
        "max_active_clusters": kernel.occupancy.max_active_clusters(launch, stream=stream) if size > 1 else None,
        "us_by_grid": times,
    }


def main(out: Path) -> None:
    launcher = Launcher()
    stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    rows = []
    for shape, tile in CASES:
        for cluster in CLUSTERS:
            row = measure(launcher, stream, shape, tile, cluster)
            if row:
                print(json.dumps(row), flush=True)
                rows.append(row)
    out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "cases": rows}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
