"""Hardware limits of the device tunebox was measured on (NVIDIA H200, compute capability 9.0)."""

COPY_LIMIT_GBPS = 4250.0  # device-to-device copy, bytes read + written, measured through torch
MAX_SHARED_BYTES = 227 * 1024  # dynamic shared memory one block may opt in to
