"""The sweep files the GPU tests write (their ``SWEEP`` texts) load on any machine: a space that drifted
from its family (a removed parameter, a template renamed) fails here, on CPU, not first on the GPU host."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tunebox.sweep_spec import load_sweep

GPU_TESTS = Path(__file__).resolve().parents[1] / "gpu"
WITH_SWEEPS = ["test_faults_gpu.py", "test_repeatability_gpu.py", "test_resume_gpu.py", "test_sanitizer_gpu.py"]


def sweep_text(file: str) -> str:
    """The module's ``SWEEP`` string, read from its syntax tree (the GPU modules import GPU helpers)."""
    for node in ast.parse((GPU_TESTS / file).read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SWEEP"]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{file} has no SWEEP")


def test_every_gpu_test_writing_a_sweep_is_listed():
    writers = sorted(p.name for p in GPU_TESTS.glob("test_*.py") if '\nSWEEP = """' in p.read_text())
    assert writers == sorted(WITH_SWEEPS)


@pytest.mark.parametrize("file", WITH_SWEEPS)
def test_the_sweep_a_gpu_test_writes_loads(tmp_path, file):
    path = tmp_path / "sweep.toml"
    path.write_text(sweep_text(file).format(name="sweep", faults='["none"]', finalists=1))  # the templated ones
    spec = load_sweep(path)
    assert spec.problems
