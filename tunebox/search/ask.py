"""A strategy's proposal (kept apart from ``strategy`` so strategies without Optuna never import it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..params import Value

if TYPE_CHECKING:
    from optuna.trial import Trial


@dataclass(frozen=True)
class Ask:
    """A configuration to evaluate (``values``) and, for a strategy driving an Optuna study, the
    trial to tell its result to (None for the others)."""

    trial: Trial | None
    values: dict[str, Value]
