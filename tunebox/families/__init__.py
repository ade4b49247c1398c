"""Families are found, not registered: every subpackage of ``tunebox.families`` whose ``__init__``
defines ``FAMILY`` (a ``contract.Family``), and every ``tunebox.families`` entry point of an
installed distribution (``name = "package.module:FAMILY"``). Adding a family touches no engine
file. Families are imported on first use."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from ..errors import SpaceError
from .contract import Family

ENTRY_POINT_GROUP = "tunebox.families"


@cache
def _locations() -> dict[str, str]:
    """Family name -> "module:attribute" (the subpackages first; an entry point may not shadow one)."""
    found = {info.name: f"{__name__}.{info.name}:FAMILY" for info in pkgutil.iter_modules(__path__) if info.ispkg}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, point.value)
    return found


def names() -> list[str]:
    return sorted(_locations())


def get(name: object) -> Family[Any]:
    """The family called ``name``; an unknown name raises SpaceError listing the known ones."""
    if not isinstance(name, str) or name not in _locations():
        raise SpaceError(f"unknown family {name!r}; known families: {', '.join(names())}")
    return _load(name)


@cache
def _load(name: str) -> Family[Any]:
    module, _, attribute = _locations()[name].partition(":")
    family = getattr(importlib.import_module(module), attribute, None)
    if not isinstance(family, Family) or family.name != name:
        raise SpaceError(f"{module}.{attribute} is not the Family {name!r}: a family package defines FAMILY")
    return family
