"""Hardware limits of the device tunebox was measured on (NVIDIA H200, compute capability 9.0).

``tunebox ceilings`` measured both on it: ``results/benchmarks/ceilings.json``."""

COPY_LIMIT_GBPS = 4250.0  # device-to-device copy, bytes read + written (4234 measured)
BF16_TENSOR_TFLOPS = 989.0  # dense bfloat16 tensor-core peak (specification)
BF16_MEASURED_TFLOPS = 722.7  # the measured ceiling: cuBLAS's bfloat16 8192^3 through torch.matmul
MAX_SHARED_BYTES = 227 * 1024  # dynamic shared memory one block may opt in to
MAX_GRID_X = 2**31 - 1  # blocks along grid.x
MAX_GRID_Y = 65_535  # blocks along grid.y (and grid.z)
SM_COUNT = 132  # streaming multiprocessors: persistent grids' size, split counts that fill them
# Thread-block clusters of each size (blocks) that run at once at one block per SM: 66 of 2, 30 of 4
# (cuOccupancyMaxActiveClusters on the H200 for gemm's cluster template; 4-block clusters do not tile
# every GPC). A persistent grid of more clusters runs the extra ones after the others finish.
CLUSTERS_AT_ONCE = {1: SM_COUNT, 2: 66, 4: 30}
SM_SHARED_BYTES = 228 * 1024  # shared memory of one SM, for all its resident blocks
BLOCK_RESERVED_SHARED_BYTES = 1024  # of it, what the hardware keeps for each resident block
SM_THREADS = 2048  # resident threads of one SM
SM_REGISTERS = 65536  # 32-bit registers of one SM, for all its resident blocks
