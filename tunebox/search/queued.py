"""The sweep loop's in-flight variants: how each compiled variant will get its record, in evaluation
order (``search/loop.py``, and the distributed sweep's worker)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from ..params import Config
from ..records import EvalRecord
from ..runner.protocol import LaunchIdentity
from .ask import Ask

# (binary hash, (geometry, args, prologue)): identical runs are timed once; on replay (configuration JSON,)
Identity = tuple[str, LaunchIdentity] | tuple[str]


class Kind(Enum):
    DEVICE = "device"  # submitted to the backend: answered by next_outcome(), in order
    KNOWN = "known"  # answered without the device (a compile failure, a twin of a finished binary)
    SAME_BINARY = "same_binary"  # identical binary already on the device: takes its record
    SAME_CONFIG = "same_config"  # same configuration asked again while in flight: told, not logged


@dataclass(frozen=True)
class Queued:
    """A compiled variant waiting for its record, in evaluation order."""

    kind: Kind
    ask: Ask
    config: Config
    record: EvalRecord | None = None  # KNOWN
    identity: Identity | None = None  # DEVICE, SAME_BINARY: (binary hash, geometry, args)


def twin(original: EvalRecord, config: Config) -> EvalRecord:
    """The record of an identical binary, for another configuration (timed once)."""
    label = Config(tuple(sorted(original.config.items()))).label()
    message = f"identical binary to {label}" + (f": {original.message}" if original.message else "")
    return replace(original, config=config.as_dict(), message=message)
