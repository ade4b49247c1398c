"""Where the device sources live: ``kernels/`` beside the package in a checkout, else the copy
installed as package data (``tunebox.kernels``)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path


@cache
def kernels_dir() -> Path:
    checkout = Path(__file__).resolve().parent.parent / "kernels"
    if (checkout / "include" / "tunebox").is_dir():
        return checkout
    return Path(str(resources.files("tunebox.kernels")))
