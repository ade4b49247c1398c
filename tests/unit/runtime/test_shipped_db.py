"""The shipped winners database is found in a checkout and in an installed package, and is read there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tunebox.runtime.lookup import shipped_db

REPO = Path(__file__).resolve().parents[3]
SHIPPED = ("winners.sqlite", "portfolios.json")


def test_a_checkout_reads_its_results_folder() -> None:
    assert shipped_db() == REPO / "results" / "winners.sqlite"


def test_the_package_data_ships_the_results_files() -> None:
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert sorted(package_data["tunebox"]) == sorted(f"shipped/{name}" for name in SHIPPED)
    for name in SHIPPED:  # links in the checkout: one file, two names
        assert (REPO / "tunebox" / "shipped" / name).resolve() == REPO / "results" / name


def test_an_installed_package_reads_its_shipped_copy(tmp_path: Path) -> None:
    """The layout ``pip install .`` makes (package data copied, links followed), run from another folder."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "tunebox", site / "tunebox", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "kernels", site / "tunebox" / "kernels")
    assert not (site / "tunebox" / "shipped" / "winners.sqlite").is_symlink()  # copytree copies the files
    code = (
        "import tunebox, json; print(tunebox.default_db()); "
        "print(tunebox.query('tile_copy', json.loads(open('problem.json').read())).source)"
    )
    (tmp_path / "problem.json").write_text(
        '{"dtype": "float32", "src": [8192, 8192], "dst": [8192, 8192], "origin": [0, 0], "transpose": false,'
        ' "padding": "zero"}'
    )
    found = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    path, source = found.stdout.split()
    assert Path(path) == site / "tunebox" / "shipped" / "winners.sqlite"
    assert source == "exact"
