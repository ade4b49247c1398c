"""The repository's quality gates, run with the tests (so CI runs them): ruff check, ruff format
and mypy (strict on the engine, as pyproject.toml configures it) report nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("check", [("check", "."), ("format", "--check", ".")], ids=["lint", "format"])
def test_ruff(check: tuple[str, ...]) -> None:
    ruff = shutil.which("ruff") or pytest.fail("ruff is not installed: pip install '.[test]'")
    result = run(ruff, *check)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
