"""Hardware limits of the device tunebox was measured on (NVIDIA H200, compute capability 9.0)."""

COPY_LIMIT_GBPS = 4250.0  # device-to-device copy, bytes read + written, measured through torch
BF16_TENSOR_TFLOPS = 989.0  # dense bfloat16 tensor-core peak (H100/H200 SXM specification)
MAX_SHARED_BYTES = 227 * 1024  # dynamic shared memory one block may opt in to
