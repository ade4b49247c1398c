"""The family registry: an explicit dict of names to lazily imported families."""

from __future__ import annotations

import importlib
from functools import cache

from ..errors import SpaceError
from .base import Family

_REGISTRY: dict[str, str] = {
    "tile_copy": "tunebox.families.tile_copy:TileCopy",
    "gather": "tunebox.families.gather:Gather", "scatter": "tunebox.families.scatter:Scatter",
    "gather_elements": "tunebox.families.gather_elements:GatherElements",
    "ragged3d": "tunebox.families.ragged3d:Ragged3D", "gemm": "tunebox.families.gemm:Gemm",
    "windows": "tunebox.families.windows:Windows",
    "faults": "tunebox.families.faults:Faults",  # test-only: planted faults for the harness's tests
}


def names() -> list[str]:
    return sorted(_REGISTRY)


def get(name: object) -> Family:
    """The family called ``name``; an unknown name raises SpaceError listing the known ones."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise SpaceError(f"unknown family {name!r}; known families: {', '.join(names())}")
    return _load(name)


@cache
def _load(name: str) -> Family:
    module, _, cls = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), cls)()
