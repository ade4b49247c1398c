"""``tunebox.tune``'s overrides of a sweep file's search settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebox import api
from tunebox.errors import SpaceError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("strategy", [None, "exhaustive"])
def test_trials_are_refused_where_the_strategy_evaluates_every_variant(tmp_path: Path, strategy: str | None) -> None:
    """gather.toml's strategy is exhaustive: a trial count there was silently ignored (every variant ran)."""
    with pytest.raises(SpaceError, match="trials=10 does not apply to the exhaustive strategy.*--strategy"):
        api.tune(REPO / "spaces" / "gather.toml", backend="replay", trials=10, strategy=strategy, results=tmp_path)
    assert list(tmp_path.iterdir()) == []  # refused before anything ran or was stored
