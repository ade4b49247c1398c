"""Checks every family's unit tests share."""

from __future__ import annotations

import pytest

from tunebox.build.nvrtc import BuildResult, NvrtcBuilder
from tunebox.errors import InvalidConfig


def assert_rule(family, p, good, bad, fragment: str) -> None:
    """``good`` breaks no rule for ``p``; ``bad`` breaks one whose message holds ``fragment``, and
    ``family.check`` refuses it with that message."""
    assert family.violations(p, good) == [], family.violations(p, good)
    family.check(p, good)
    broken = family.violations(p, bad)
    assert any(fragment in b for b in broken), broken
    with pytest.raises(InvalidConfig, match=fragment):
        family.check(p, bad)


def compile_cases(family, cases, arch: str = "sm_90", **builder_options) -> list[tuple[tuple, BuildResult]]:
    """Each (problem, config) of ``cases`` with its NVRTC build for ``arch``, in order."""
    builder = NvrtcBuilder(arch, **builder_options)
    try:
        results = builder.build([family.render(p, c) for p, c in cases])
    finally:
        builder.close()
    return list(zip(cases, results, strict=True))
