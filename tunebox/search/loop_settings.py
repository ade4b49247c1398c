"""How far the sweep loop works ahead of the device, and when it gives up (``search/loop.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoopSettings:
    pipeline_depth: int = 16  # variants compiled ahead of the device
    # the compile queue is topped up to pipeline_depth once it fell to this many: a batch of asks,
    # which a model-based strategy answers from one fit (its cost spread over the batch)
    refill_at: int = 8
    # evaluations queued on the device: one running, the rest waiting, so the device stays busy through
    # the loop's own stalls (a batch of asks, a compile not yet done; 2 left an H200 idle 70% of a sweep)
    device_queue: int = 8
    breaker: int = 12  # this many consecutive failures of one status stop the sweep
    compile_timeout_s: float = 120.0  # a compile running longer is killed (status timeout)
