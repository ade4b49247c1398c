"""The files a family's results depend on: include and import graphs, and the hash over them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tunebox.families import get
from tunebox.kernels_dir import kernels_dir
from tunebox.source_graph import cuda_closure, digest, python_closure

PACKAGE = Path(__import__("tunebox").__file__).resolve().parent


def test_cuda_closure_follows_includes_transitively(tmp_path: Path) -> None:
    closure = {p.name for p in cuda_closure(("tile_copy/tile_copy_tma.cu",))}
    assert {"tile_copy_tma.cu", "tma.cuh"} <= closure  # the kernel and a header it includes
    for path in cuda_closure(("tile_copy/tile_copy_tma.cu",)):  # every header's own includes too
        assert path.is_file() and kernels_dir() in path.parents


def test_python_closure_follows_relative_and_absolute_tunebox_imports() -> None:
    closure = set(python_closure((PACKAGE / "families" / "faults" / "planted.py",)))
    for module in (
        "families/faults/operation.py",
        "families/contract.py",
        "families/base.py",
        "params.py",
        "dtypes.py",
        "tma.py",
    ):
        assert PACKAGE / module in closure, module
    assert not any("numpy" in str(p) or "optuna" in str(p) for p in closure)


def test_every_family_depends_on_its_templates_modules_and_kernels() -> None:
    for name in ("faults",):
        family = get(name)
        files = set(family.source_files)
        for template in family.templates.values():
            assert (kernels_dir() / template.kernel).resolve() in files
            assert Path(__import__(type(template).__module__, fromlist=["_"]).__file__).resolve() in files
        assert Path(__import__(type(family.operation).__module__, fromlist=["_"]).__file__).resolve() in files


def edited(path: Path) -> bytes:
    """A change that alters what ``path`` does: a statement for Python, a line for device code."""
    return b"\nCHANGED = 1\n" if path.suffix == ".py" else b"\n#define CHANGED 1\n"


def test_the_hash_changes_when_any_source_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    family = get("faults")
    before = family.source_hash()
    original = Path.read_bytes
    for changed in family.source_files:
        monkeypatch.setattr(
            Path, "read_bytes", lambda self, c=changed: original(self) + (edited(c) if self == c else b"")
        )
        assert family.source_hash() != before, changed
        monkeypatch.setattr(Path, "read_bytes", original)
    assert family.source_hash() == before


def test_formatting_comments_and_docstrings_leave_a_python_digest_alone(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text("def f(x):\n    return x + 1\n")
    styled = tmp_path / "styled.py"
    styled.write_text('"""A module."""\n\n\ndef f( x ):  # one more\n    """Add one."""\n    return (x + 1)\n')
    assert digest(plain) == digest(styled)
    changed = tmp_path / "changed.py"
    changed.write_text("def f(x):\n    return x + 2\n")
    assert digest(changed) != digest(plain)
    kernel = tmp_path / "k.cu"
    kernel.write_text("// one\n")
    other = tmp_path / "l.cu"
    other.write_text("// two\n")
    assert digest(kernel) != digest(other)  # device sources count byte for byte


def test_a_python_digest_is_the_same_on_every_python_version(tmp_path: Path) -> None:
    """The stored winners' keys are computed on the CPU host (Python 3.11) and looked up on the GPU host
    (3.12): the digest names fields and leaves out the empty ones, so a version that adds a field
    (3.12's type_params) or drops empty ones from ``ast.dump`` (3.13) gives the same text. The expected
    value was computed on Python 3.11 and checked on the H200 host's 3.12."""
    module = tmp_path / "m.py"
    module.write_text(
        "class A:\n    def f(self, x: int = 1, *a, k=2) -> int:\n        return {x: [a, k]}.get(x, 3.5)\n"
    )
    assert (
        hashlib.sha256(digest(module)).hexdigest() == "53a1e5400d2eb9665ede5b16803a3cc68ba622bf486e04af4709e9892dab37a8"
    )
