"""The family registry: an explicit dict of names to lazily imported families."""

from __future__ import annotations

import importlib
from functools import cache

from ..errors import SpaceError
from .base import Family

_REGISTRY: dict[str, str] = {
    "tile_copy": "tunebox.families.tile_copy:TileCopy",
}


def names() -> list[str]:
    return sorted(_REGISTRY)


@cache
def get(name: str) -> Family:
    """The family called ``name``; an unknown name raises SpaceError listing the known ones."""
    try:
        target = _REGISTRY[name]
    except (KeyError, TypeError):
        raise SpaceError(f"unknown family {name!r}; known families: {', '.join(names())}") from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()
