"""Host-to-device copies of the worker's inputs and references (up to GBs), complete on return.

From pageable memory the driver stages a copy through small pinned buffers of its own, about 7 GB/s on the
H200 host (1.66 GB in 0.21-0.27 s). A large array is instead page-locked where it lies for the copy
(``cuMemHostRegister``, 0.04-0.07 s for 1.66 GB there) and copied by the DMA engine directly: 0.10-0.13 s in
all (results/diagnostics/uploads.json). Four driver calls, each releasing the GIL once: the first
problem's prepare runs beside the worker's torch import, where every handoff of the GIL can wait its
switch interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cuda_api import checked

REGISTER_BYTES = 16 << 20  # smaller arrays are copied from pageable memory: locking pages would not pay


def upload_to(driver: Any, host: np.ndarray, address: int, stream: Any) -> None:
    """Copy C-contiguous ``host`` to device ``address`` in ``stream``'s order and wait for it. Where the
    driver refuses to lock the array's pages, it is copied from pageable memory."""
    locked = host.nbytes >= REGISTER_BYTES and int(driver.cuMemHostRegister(host.ctypes.data, host.nbytes, 0)[0]) == 0
    try:
        checked(driver.cuMemcpyHtoDAsync(address, host.ctypes.data, host.nbytes, stream.handle))
        stream.sync()
    finally:
        if locked:
            checked(driver.cuMemHostUnregister(host.ctypes.data))
