"""Where the device sources live: ``kernels/`` beside the package in a checkout, else the copy
installed with the package as ``tunebox/kernels`` (package data ``tunebox.kernels``)."""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def kernels_dir() -> Path:
    package = Path(__file__).resolve().parent
    for candidate in (package.parent / "kernels", package / "kernels"):
        if (candidate / "include" / "tunebox").is_dir():
            return candidate
    raise FileNotFoundError(f"no kernels/ beside {package} nor inside it: reinstall tunebox")


@cache
def kernel_source(relative: str) -> str:
    """The text of a device source under ``kernels/`` (read once per process)."""
    return (kernels_dir() / relative).read_text()
