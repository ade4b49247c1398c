"""The packages: every package under tunebox/ (found, so a new family package needs no line here),
and the device sources of kernels/, installed as the package data tunebox.kernels (pyproject.toml
maps the folder). The rest of the project's metadata is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["tunebox", "tunebox.*"]), "tunebox.kernels"])
