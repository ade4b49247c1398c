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


@pytest.mark.parametrize(
    "given, fragment",
    [
        ({"trials": 2.5}, r"tune\(trials=2.5\) over .*tile_copy.toml: search.trials must be a whole number >= 1"),
        ({"seconds": float("inf")}, r"tune\(seconds=inf\) over .*: search.seconds must be a finite number >= 1"),
    ],
)
def test_overrides_are_named_as_the_arguments_they_came_from(tmp_path: Path, given: dict, fragment: str) -> None:
    """They were blamed on the sweep file ('spaces/tile_copy.toml: search.trials must be a number >= 1')."""
    with pytest.raises(SpaceError, match=fragment):
        api.tune(REPO / "spaces" / "tile_copy.toml", backend="replay", results=tmp_path, **given)


def test_numpy_numbers_are_the_numbers_they_hold(tmp_path: Path) -> None:
    """np.int64(2) trials was refused: 'must be a number >= 1, got np.int64(2)'."""
    import numpy as np

    result = api.tune(REPO / "spaces" / "tile_copy.toml", backend="replay", results=tmp_path, trials=np.int64(2))
    assert result.evaluated == 2 * len(result.problems)


@pytest.mark.parametrize(
    "given, fragment",
    [
        ({"replay_pace": -1}, "replay_pace is a finite number of 0 or more"),
        ({"replay_pace": float("nan")}, "replay_pace is a finite number of 0 or more"),
        ({"progress": 3}, "progress is a function of a SweepProgress, not int"),
    ],
)
def test_arguments_the_sweep_cannot_use_are_refused_first(tmp_path: Path, given: dict, fragment: str) -> None:
    """A negative or NaN pace was accepted; a progress that is no function failed inside the loop."""
    with pytest.raises(SpaceError, match=fragment):
        api.tune(REPO / "spaces" / "tile_copy.toml", backend="replay", results=tmp_path, **given)
    assert list(tmp_path.iterdir()) == []
