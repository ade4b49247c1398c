"""The device sources are found both in a checkout and in an installed package's layout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tunebox.kernels_dir import kernels_dir

REPO = Path(__file__).resolve().parents[2]


def test_checkout_layout():
    assert kernels_dir() == REPO / "kernels"


def test_installed_layout(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(REPO / "tunebox", site / "tunebox", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "kernels", site / "tunebox" / "kernels")  # where package data installs
    found = subprocess.run(
        [sys.executable, "-c", "from tunebox.kernels_dir import kernels_dir; print(kernels_dir())"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == site / "tunebox" / "kernels"
    assert (Path(found.stdout.strip()) / "tile_copy" / "tile_copy.cu").is_file()
