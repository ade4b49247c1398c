"""How far the sweep loop works ahead of the device, and when it gives up (``search/loop.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoopSettings:
    # variants asked and not yet answered: compiling, or queued on the device (at least 16 compiling
    # while the device queue is full: a GPU host's 16 cores)
    pipeline_depth: int = 24
    # the pipeline is topped up to pipeline_depth once it fell to this many: a batch of asks, which a
    # model-based strategy answers from one fit (its cost spread over the batch)
    refill_at: int = 16
    # a problem's first asks run only this many plus its answers so far ahead, up to pipeline_depth:
    # early proposals wait for the first answers (the surrogate asked as the loop asks it, on replay:
    # 0.55 of random search's evaluations to target, as at depth 16 topped up at 8; 0.61 there without
    # the ramp; 0.40 asked one at a time)
    ramp: int = 2
    # evaluations queued on the device: one running, the rest waiting, so the device can stay busy through
    # the loop's own stalls (a batch of asks, a compile not yet done; with 2 the H200 was busy 29% of a
    # warm throughput_default sweep; with 8, and built configurations run while compiles are pending,
    # 95% once the pipeline is full: results/benchmarks/throughput.json, 2026-12-04)
    device_queue: int = 8
    # with fewer evaluations than this queued and no compile done, the strategy is asked for a
    # configuration it knew built (``Strategy.ask_built``) rather than the device waiting for compiles
    # (a warm throughput_default run on the H200 waited 2.2-2.6 s of its 8.9-9.6 s)
    built_below: int = 2
    # asks beyond a problem's trial budget, compiled at its end so that its last evaluations take the
    # first compiles to finish, not the slowest of the last batch (a warm throughput_default run's last
    # answer came 1.3-2.5 s after the one before it, the device idle); never evaluated, cancelled when the
    # budget is reached. None on replay, which compiles nothing.
    spare_asks: int = 8
    breaker: int = 12  # this many consecutive failures of one status stop the sweep
    compile_timeout_s: float = 120.0  # a compile running longer is killed (status timeout)
    # a space of more configurations is sampled, this many drawn for each problem (search/candidates.py:
    # about 6 s of rule checks on one core), not enumerated; exhaustive search enumerates any space
    enumerated: int = 200_000

    def ahead(self, answered: int) -> tuple[int, int]:
        """(asks allowed in flight, the count at or below which the queue is topped up) once a
        problem has ``answered`` answers."""
        depth = min(self.pipeline_depth, self.ramp + answered)
        return depth, min(self.refill_at, depth - 1)
